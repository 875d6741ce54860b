"""`mmbench run`: evaluate a model on one or several tasks, and the steps of it other commands reuse."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

from mmbench.cli.commands_core import (add_include_argument, load_includes, model_options, nonnegative_float,
                                      nonnegative_int, positive_int, resolve_poolset, safe_name, tasks_or_error,
                                      writable_folder_or_error)
from mmbench.common.address_limit import memory_step
from mmbench.common.errors import CLIError
from mmbench.common.home import mmbench_home


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="evaluate a model on one or several tasks")
    p.add_argument("--task", required=True, action="append",
                   help="task or benchmark name (mmlongembed: its four tasks); repeat it or separate names by commas")
    p.add_argument("--model", required=True,
                   help="registered name, local path, hub id, mteb:<name or folder>, or module:Factory")
    add_include_argument(p)
    p.add_argument("--data", type=Path, help="pool set folder of the one task (default: build the sample source)")
    p.add_argument("--limit", type=positive_int, help="evaluate N items: a stratified random sample of the design's cells, "
                   "seeded by --seed; the score is weighted back to the cells' sizes, with its CI (N at or above "
                   "the task's size: all items)")
    p.add_argument("--output", type=Path, help="results folder (default: runs/<task>/<model>; with several "
                                               "tasks, one subfolder per task)")
    p.add_argument("--device", default=None, help="device of the model, e.g. cuda, cuda:1, cpu (default: the adapter's)")
    p.add_argument("--dtype", default=None, help="weight dtype, e.g. bfloat16, float16, float32 (default: the adapter's)")
    p.add_argument("--model-path", default=None, help="local folder with the model's weights")
    p.add_argument("--model-name", default=None,
                   help="the name to record and show for the model (default: the registered name; a local "
                        "folder is named <folder>@<hash of its files>)")
    p.add_argument("--truncation", choices=("middle", "head"), default="middle",
                   help="how documents longer than the model's window are cut: middle keeps the head and the tail "
                        "(the protocol's rule); head keeps the start only, as sentence-transformers and stock mteb do "
                        "(another protocol: such runs are not compared or ranked with middle-truncated ones)")
    p.add_argument("--protocol", default=None, metavar="NAME",
                   help="run the model under another of its protocols, e.g. mteb (gme-2b, gme-7b: as mteb's wrapper "
                        "runs it, to reproduce an mteb number); default mmlongembed. Its own protocol id: never "
                        "compared or ranked with the default's runs (`mmbench list models --details`)")
    p.add_argument("--attn-implementation", default=None,
                   help="transformers attention implementation, e.g. sdpa, flash_attention_2, eager")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="let transformers run the model repository's own code")
    p.add_argument("--model-option", action="append", default=[], metavar="KEY=VALUE",
                   help="any other option of the model's adapter, e.g. --model-option model=text-embedding-3-large "
                        "--model-option base_url=http://localhost:8000/v1 (see `mmbench list models --options`)")
    p.add_argument("--batch-tokens", type=positive_int, default=32768, help="padded tokens per batch")
    p.add_argument("--cache-dir", type=Path, help="embedding cache (default: MMBENCH_HOME/embeddings)")
    p.add_argument("--price-per-token", type=nonnegative_float, default=None, metavar="USD",
                   help="price of one encoded token (API models): results then state the cost per 1,000 documents "
                        "in their efficiency record")
    p.add_argument("--backend-certificate", type=Path, default=None, metavar="FILE",
                   help="a certificate written by `mmbench verify-backend` for this model: the results carry it "
                        "and the leaderboard marks runs whose backend has none")
    p.add_argument("--allow-failed-certificate", action="store_true",
                   help="attach a --backend-certificate that failed its thresholds (default: refused); the board "
                        "and the model page then show the backend as FAILED")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the embedding cache")
    p.add_argument("--verify", action="store_true",
                   help="recompute the pool set's content hash and check every media file (default: check the "
                        "tables against the digests in its manifest)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the default build, of tie-breaking and of the --limit sample")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars or info logs (mmbench's, and those of transformers, datasets and mteb)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace results already in the results folder (without it: a finished run with the same "
                        "settings is skipped, a different one is refused)")
    p.add_argument("--log-samples", action="store_true",
                   help="also write samples.jsonl beside per_query.parquet: one JSON line per item (the query, ranked "
                        "ids with scores, relevant ids, metrics, what the model saw of each document)")
    p.add_argument("--mteb-cache", type=Path, metavar="DIR",
                   help="also write the results in mteb's results-cache layout under DIR (mteb.ResultCache(DIR))")
    add_executor_arguments(p)
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from mmbench.running.model_loading import ModelUnavailable

    if args.quiet:
        from mmbench.cli.quiet import quiet_libraries

        quiet_libraries()
    load_includes(args)
    tasks = tasks_or_error(args.task)
    if args.data is not None and len(tasks) > 1:
        raise CLIError(f"--data names one pool set, but --task names {len(tasks)} tasks; run them one by one")
    from mmbench.results.reruns import differences, previous_summary

    poolsets_read = _start_reading_poolsets(args, tasks)  # after that import: two threads would share the GIL for it

    from mmbench.cli.previous_run import missing_ancestor, remove_if_empty

    created = missing_ancestor(args.output) if args.output is not None else None
    if args.output is not None:
        writable_folder_or_error(args.output)
    try:
        model, poolsets = _model_and_poolsets(args, poolsets_read)
    except ModelUnavailable as exc:
        remove_if_empty(created, args.output)  # a failed load leaves no empty results folder behind
        raise CLIError(str(exc)) from None
    except Exception:  # an unusable pool set, out of memory, ...: no empty results folder is left behind
        remove_if_empty(created, args.output)
        raise
    outs = [(args.output if len(tasks) == 1 else args.output / task.name) if args.output is not None
            else Path("runs") / task.name / safe_name(model.card.name) for task in tasks]
    skip = set()
    for task, ps, out in zip(tasks, poolsets, outs):  # decided for every task before any runs
        prev = previous_summary(out)
        if prev is None:
            continue
        diffs = differences(prev, ps.content_hash, model.card.identity(), args.model, args.limit, args.seed)
        if not diffs and not args.overwrite:
            skip.add(task.name)
        elif diffs and not args.overwrite:
            raise CLIError(f"{out} already holds results of another run: {'; '.join(diffs)}. "
                           "Pass --overwrite to replace them, or choose another --output")
    options = run_options(args, progress=not args.quiet)
    options.certificate = certificate_or_error(args.backend_certificate, model, args.allow_failed_certificate)
    options.executor = executor_or_error(args, args.model, model_options(args, args.model))
    try:
        failed = _run_tasks(tasks, poolsets, outs, skip, model, options, args)
    except Exception:
        remove_if_empty(created, args.output)  # a run that wrote nothing (a full disk, a bad model) leaves no folder
        raise
    finally:
        options.executor.close()
    return 1 if failed else 0


def _start_reading_poolsets(args: argparse.Namespace, tasks) -> Callable[[], list]:
    """The tasks' pool sets, as a call that returns them.

    A --data folder is only read and checked, so that starts now, in a thread, while the main thread loads the
    model (imports and weights take seconds of a cold run). Without --data the offline sample may have to be built (minutes), so nothing starts before
    the model has loaded: an unavailable model fails before any pool set is built."""
    def read() -> list:
        return [resolve_poolset(task, args.data, args.seed, quiet=args.quiet, verify=args.verify) for task in tasks]

    if args.data is None:
        return read
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow.parquet  # noqa: F401  imported before the thread starts, so the two threads never import them
    import mmbench.running.poolsets  # noqa: F401  at once (the main thread's imports need numpy and pyarrow too)

    pool = ThreadPoolExecutor(1, thread_name_prefix="mmbench-poolset")
    pending = pool.submit(read)
    pool.shutdown(wait=False)  # the thread ends with the read; an error in it is raised by the call below
    return pending.result


def _model_and_poolsets(args: argparse.Namespace, poolsets: Callable[[], list]) -> tuple[Any, list]:
    """The model and the tasks' pool sets (`_start_reading_poolsets`); the model's error (unknown name, no weights
    offline, no key) comes first."""
    loaded = load_model_for_run(args.model, model_options(args, args.model), cached=not args.no_cache)
    if args.model_name:
        rename_model(loaded, args.model_name)
    if args.truncation != "middle":
        from mmbench.running.lazy_model import set_truncation

        set_truncation(loaded, args.truncation)
    return loaded, poolsets()


def certificate_or_error(path: Path | None, model, allow_failed: bool = False) -> dict[str, Any] | None:
    """The backend certificate at `path`, refused (exit 2) when unreadable, forged (its `passed` differs from its
    own measurements), made for another model, or failed without `allow_failed`."""
    if path is None:
        return None
    from mmbench.running.parity_thresholds import describe_block
    from mmbench.running.verify_backend import (ProbeError, certificate_covers, certificate_verdict, read_certificate,
                                                run_block)

    try:
        cert = read_certificate(path)
    except ProbeError as exc:
        raise CLIError(str(exc)) from None
    if not certificate_covers(cert, model.card.identity()):
        raise CLIError(f"{path}: reference.model / second.model: the certificate was made for another model or "
                       f"settings than {model.card.name!r}; run `mmbench verify-backend` for this one")
    if not certificate_verdict(cert) and not allow_failed:
        reasons = "; ".join(str(r) for r in cert.get("reasons") or []) or "below the protocol's minimum thresholds"
        raise CLIError(f"{path}: passed: the certificate FAILED ({reasons}): {describe_block(run_block(cert))}; pass "
                       "--allow-failed-certificate to attach it anyway (the board then shows the backend as FAILED)")
    return cert


def _run_tasks(tasks, poolsets, outs, skip, model, options, args) -> int:
    """Evaluate (or skip) each task into its folder and print its summary; the number of failed items."""
    from mmbench.running.evaluation import evaluate_to_folder
    from mmbench.results.store import load_results
    from mmbench.results.summary import format_summary

    failed = 0
    for task, ps, out in zip(tasks, poolsets, outs):
        if len(tasks) > 1:
            print(f"\n== {task.name}")
        if task.name in skip:
            print(f"{out}: results of this run (same pool set, model, settings) are already there; "
                  "skipped (--overwrite runs it again)")
        else:
            with memory_step(f"evaluating {task.name}"):
                evaluate_to_folder(task.name, ps, model, options, out, args.model)
        with memory_step(f"reading the results in {out}"):
            res = load_results(out)
        print(format_summary(res, task.summary_axes, task.main_score))
        print(f"\nresults {'in' if task.name in skip else 'written to'} {out}")
        if getattr(args, "log_samples", False):
            from mmbench.results.samples import write_samples

            print(f"logged samples: {write_samples(out, res, ps.query_by_id())} ({len(res.per_query)} lines)")
        if args.mteb_cache is not None:
            from mmbench.interop.mteb_cache import write_mteb_cache

            print(f"mteb results cache: {write_mteb_cache(out, args.mteb_cache)}")
        failed += int(res.info.get("n_failed_items") or 0)
    return failed


def rename_model(model, name: str) -> None:
    """--model-name: the name results, folders and leaderboards show (e.g. for a local folder)."""
    from mmbench.running.lazy_model import rename_model as rename

    if not name.strip():
        raise CLIError("--model-name must not be empty")
    rename(model, name.strip())


def load_model_for_run(name: str, options: dict[str, Any], cached: bool):
    """The model, or with the cache on a stand-in holding its remembered card that loads the weights
    only if some vector is missing (see mmbench/lazy_model.py)."""
    from mmbench.running.model_loading import load_model_explained
    from mmbench.running.lazy_model import load_model_lazily

    if not cached:
        return load_model_explained(name, options)
    return load_model_lazily(name, options, mmbench_home(), load_model_explained)


def add_executor_arguments(p: argparse.ArgumentParser) -> None:
    """--executor/--workers: where one evaluation's batches are encoded (see mmbench/executors)."""
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="ray: split the batches of this evaluation over --workers Ray actors, each holding the model")
    p.add_argument("--workers", type=positive_int, default=2, help="Ray actors encoding in parallel (--executor ray)")
    p.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: start one here)")
    p.add_argument("--ray-num-cpus", type=positive_int, default=None, help="CPUs of the Ray started here")
    p.add_argument("--cpus-per-worker", type=float, default=1.0, help="CPUs each Ray actor reserves")
    p.add_argument("--gpus-per-worker", type=float, default=0.0, help="GPUs each Ray actor reserves (e.g. 1)")
    p.add_argument("--worker-timeout", type=positive_int, default=1800, metavar="SECONDS",
                   help="a Ray actor slower than this to load the model or to encode one batch is dropped and "
                        "its batches go to the others")


def executor_or_error(args: argparse.Namespace, model: str, options: dict[str, Any]):
    from mmbench.running.executors import make_executor

    if args.cpus_per_worker <= 0 or args.gpus_per_worker < 0:
        raise CLIError("--cpus-per-worker must be positive and --gpus-per-worker not negative")
    if args.executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise CLIError("--executor ray needs Ray: pip install 'ray[default]'") from None
    return make_executor(args.executor, model, options, args.workers, address=args.ray_address,
                         cpus_per_worker=args.cpus_per_worker, gpus_per_worker=args.gpus_per_worker,
                         num_cpus=args.ray_num_cpus, timeout=args.worker_timeout)


def run_options(args: argparse.Namespace, progress: bool):
    from mmbench.running.runner import RunOptions

    return RunOptions(batch_tokens=args.batch_tokens, cache_dir=args.cache_dir or mmbench_home() / "embeddings",
                      use_cache=not args.no_cache, limit=args.limit, progress=progress, seed=args.seed,
                      price_per_token=getattr(args, "price_per_token", None))
