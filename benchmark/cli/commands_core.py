"""Core commands: list, build, run, show."""
from __future__ import annotations

import argparse
import math
import ast
import os
import re
import time
from pathlib import Path
from typing import Any

from mmbench.common.home import mmbench_home  # re-exported: other command modules import it from here

from mmbench.common.errors import CLIError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list tasks or models")
    p.add_argument("what", choices=("tasks", "models"), help="what to list")
    p.add_argument("--options", action="store_true", help="models: also list each adapter's --model-option keys")
    p.add_argument("--include", action="append", default=[], type=Path, metavar="FILE",
                   help="Python file to import first; it may register tasks and models (mmbench.register_task, "
                        "mmbench.register_model)")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("build", help="build a task's pool set")
    p.add_argument("--task", required=True, help="the task to build (see `mmbench list tasks`)")
    p.add_argument("--include", action="append", default=[], type=Path, metavar="FILE",
                   help="Python file to import first; it may register tasks and models (mmbench.register_task, "
                        "mmbench.register_model)")
    p.add_argument("--source", default="sample", help="'sample' (offline, built in) or a real source of the task (see `mmbench list tasks`)")
    p.add_argument("--out", type=Path, help="output folder (default: under MMBENCH_HOME)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the build (same seed, same pool set)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="builder parameter, e.g. --param lengths=[256,512] --param haystack=obelics.parquet")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("validate", help="re-check a pool set's invariants (exit 2 naming each broken one)")
    p.add_argument("poolset", type=Path, help="pool set folder")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("run", help="evaluate a model on one or several tasks")
    p.add_argument("--task", required=True, action="append",
                   help="task or benchmark name (mmlongembed: its four tasks); repeat it or separate names by commas")
    p.add_argument("--model", required=True,
                   help="registered name, local path, hub id, mteb:<name or folder>, or module:Factory")
    p.add_argument("--include", action="append", default=[], type=Path, metavar="FILE",
                   help="Python file to import first; it may register tasks and models (mmbench.register_task, "
                        "mmbench.register_model)")
    p.add_argument("--data", type=Path, help="pool set folder of the one task (default: build the sample source)")
    p.add_argument("--limit", type=positive_int, help="evaluate N items, chosen deterministically by the candidate documents "
                   "they add (whole cells first), so the cost grows with N")
    p.add_argument("--output", type=Path, help="results folder (default: runs/<task>/<model>; with several "
                                               "tasks, one subfolder per task)")
    p.add_argument("--device", default=None, help="device of the model, e.g. cuda, cuda:1, cpu (default: the adapter's)")
    p.add_argument("--dtype", default=None, help="weight dtype, e.g. bfloat16, float16, float32 (default: the adapter's)")
    p.add_argument("--model-path", default=None, help="local folder with the model's weights")
    p.add_argument("--model-name", default=None,
                   help="the name to record and show for the model (default: the registered name; a local "
                        "folder is named <folder>@<hash of its files>)")
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
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the embedding cache")
    p.add_argument("--verify", action="store_true",
                   help="recompute the pool set's content hash and check every media file (default: check the "
                        "tables against the digests in its manifest)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the default build and of tie-breaking")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars or info logs (mmbench's, and those of transformers, datasets and mteb)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace results already in the results folder (without it: a finished run with the same "
                        "settings is skipped, a different one is refused)")
    p.add_argument("--mteb-cache", type=Path, metavar="DIR",
                   help="also write the results in mteb's results-cache layout under DIR (mteb.ResultCache(DIR))")
    add_executor_arguments(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("show", help="print the summary of a results folder")
    p.add_argument("results", type=Path, help="results folder written by `mmbench run`")
    p.add_argument("--metric", default=None, help="metric of the tables by axis, e.g. ndcg_at_10 (default: the "
                                                  "task's main score)")
    p.set_defaults(func=cmd_show)


def _int_at_least(minimum: int, what: str):
    """An argparse type for integers >= `minimum`: checked before any model loads or build starts."""
    def parse(text: str) -> int:
        value = int(text) if re.fullmatch(r"\s*[+-]?\d+\s*", text) else None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected a {what} integer, got {text!r}")
        return value
    return parse


positive_int = _int_at_least(1, "positive")
nonnegative_int = _int_at_least(0, "non-negative")  # seeds: the builders' generators take no negative seed


def float_in(low: float, high: float = math.inf, low_open: bool = False, what: str = "number"):
    """An argparse type for finite floats in [low, high] (or (low, high]): checked before any build or request."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < low or (low_open and value == low) or value > high:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value
    return parse


nonnegative_float = float_in(0.0, what="a non-negative finite number")


def load_includes(args: argparse.Namespace) -> None:
    """Import the --include files, so the names they register resolve."""
    from mmbench.common.plugins import IncludeError, include_file

    for path in getattr(args, "include", None) or []:
        try:
            include_file(path)
        except IncludeError as exc:
            raise CLIError(str(exc)) from None


def cmd_list(args: argparse.Namespace) -> int:
    load_includes(args)
    if args.what == "tasks":
        from mmbench.tasks import BENCHMARKS, task_specs

        for t in task_specs():
            bins = ",".join(t.length_bins) or "-"
            long = (f"  optional long bins: {','.join(t.long_bins)} (--param lengths=[{','.join(map(str, t.long_lengths))}])"
                    if t.long_bins else "")
            print(f"{t.name}  v{t.version}  sources: {', '.join(t.sources)}  length bins: {bins}{long}")
            print(f"    {t.description}")
        for name, members in sorted(BENCHMARKS.items()):
            print(f"benchmark {name}: {', '.join(members)}")
    else:
        from mmbench.models.registry import model_specs

        print(f"{'name':26s} {'modalities':18s} {'context':>7s} {'params':>7s} {'dim':>5s}  {'hub id / reference':46s}"
              "  description")
        for m in model_specs():
            ctx = str(m.context) if m.context else "-"
            flag = "" if m.verified else "UNVERIFIED: "
            print(f"{m.name:26s} {','.join(m.modalities):18s} {ctx:>7s} {format_parameters(m.parameters):>7s} "
                  f"{str(m.dim or '-'):>5s}  {m.hub_id or '-':46s}  {flag}{m.description}")
            if args.options:
                print(f"{'':26s} options: {', '.join(sorted(m.option_names())) or '-'}")
    return 0


def format_parameters(n: int | None) -> str:
    """A parameter count as the field writes it (22.7M, 2.2B); '-' when undisclosed or not applicable."""
    if not n:
        return "-"
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def parse_params(items: list[str], flag: str = "--param") -> dict[str, Any]:
    """KEY=VALUE pairs; values are Python literals where they parse as one, else strings."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise CLIError(f"{flag} {item!r}: expected KEY=VALUE")
        key, raw = item.split("=", 1)
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", key):
            raise CLIError(f"{flag} {item!r}: invalid key {key!r}")
        out[key] = parse_value(raw)
    return out


BOOLEAN_WORDS = {"true": True, "false": False, "yes": True, "no": False}


def parse_value(raw: str) -> Any:
    """A Python literal where `raw` parses as one; true/false/yes/no (any case) as booleans (the string "false"
    would otherwise count as true); a bracketed list of bare words ([text, mixed]) as a list (so a list-valued
    builder parameter is never split into characters); else the string itself."""
    if raw.strip().lower() in BOOLEAN_WORDS:
        return BOOLEAN_WORDS[raw.strip().lower()]
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        pass
    text = raw.strip()
    if text.startswith("[") and text.endswith("]"):
        return [parse_value(x.strip()) for x in text[1:-1].split(",") if x.strip()]
    return raw


def task_or_error(name: str):
    """The registered task, or a CLIError naming the known ones."""
    from mmbench.tasks import UnknownTaskError, get_task

    try:
        return get_task(name)
    except UnknownTaskError as exc:
        raise CLIError(str(exc)) from None


def cmd_build(args: argparse.Namespace) -> int:
    load_includes(args)
    task = task_or_error(args.task)
    if args.source not in task.sources:
        raise CLIError(f"task {task.name} has no source {args.source!r}; sources: {', '.join(task.sources)}")
    from mmbench.running.poolsets import default_poolset_dir

    out = args.out or default_poolset_dir(task.name, args.source, args.seed)
    params = parse_params(args.param)
    from mmbench.common.scratch import OutputRefused, check_replaceable

    start = time.perf_counter()
    try:
        check_replaceable(out)  # before any work: a folder mmbench did not write is never replaced
        ps = task.build(args.source, out, seed=args.seed, **params)
    except OutputRefused as exc:
        raise CLIError(str(exc)) from None
    except TypeError as exc:
        raise CLIError(f"bad builder parameter for {task.name}: {exc}") from None
    except (ValueError, FileNotFoundError) as exc:  # builders' checks of parameters and sources
        raise CLIError(f"cannot build {task.name}: {exc}") from None
    counts = ps.manifest.get("counts", {})
    print(f"built {task.name} ({args.source}) in {time.perf_counter() - start:.1f}s -> {out}")
    print(f"  {counts.get('queries')} queries, {counts.get('candidates')} candidates, {counts.get('pools')} items, "
          f"{counts.get('media_files')} media files; content hash {ps.manifest['content_hash'][:16]}")
    from mmbench.data.drops import summary_lines

    for line in summary_lines(ps.manifest.get("dropped", {})):
        print(line)
    validity = ps.manifest.get("validity")
    if validity:
        print(f"  validity: {len(validity['invariants'])} invariants checked, {validity['violations']} violations")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from mmbench.tasks.validation import validate
    from mmbench.data.poolset import PoolSetError, load_poolset

    try:
        ps = load_poolset(args.poolset, verify=True)
        report = validate(ps)
    except PoolSetError as exc:
        raise CLIError(str(exc)) from None
    for name, text in sorted(report.invariants.items()):
        n = report.checked.get(name, 0)
        bad = report.counts().get(name, 0)
        print(f"{'FAIL' if bad else 'ok  '} {name} ({n} checked{f', {bad} broken' if bad else ''}): {text}")
    if report.leak_audit:
        print(f"leak audit: {report.leak_audit['rule']}")
    for v in report.violations[:20]:
        print(f"  {v.line()}")
    if len(report.violations) > 20:
        print(f"  ... and {len(report.violations) - 20} more")
    if not report.ok:
        raise CLIError(f"{args.poolset}: {report.summary_line()}")
    print(f"{args.poolset}: {ps.task} v{ps.task_version} is valid ({report.summary_line()})")
    print_design_floors(ps)
    return 0


def print_design_floors(ps) -> None:
    """Resolution floors of the pool set's groups, derived from its item counts (nothing is stored)."""
    from mmbench.data.selection import design_groups
    from mmbench.evaluators.stats.floors import design_floor

    groups = design_groups(ps.pools)
    print("resolution floors (design-time): the smallest paired difference in a 0/1 main metric (e.g. P@1) "
          "between two models that each group's items detect with 80 % power at alpha 0.05 (discordance 0.5)")
    for name, n in groups.items():
        mde = design_floor(n).mde
        print(f"  {name}: {n} items, floor {'n/a (too few items)' if mde is None else f'{mde:.3f}'}")


def resolve_poolset(task, data: Path | None, seed: int, quiet: bool = False, verify: bool = False):
    """`mmbench.running.poolsets.resolve_poolset`, announcing a sample build and exiting 2 on an unusable pool set."""
    from mmbench.running.poolsets import PoolSetUnusable
    from mmbench.running.poolsets import resolve_poolset as resolve_poolset_for

    try:
        return resolve_poolset_for(task, data, seed, progress=not quiet, verify=verify, announce=print)
    except PoolSetUnusable as exc:
        raise CLIError(str(exc)) from None


def tasks_or_error(names: list[str]):
    """The tasks named by --task (task and benchmark names, repeated or comma-separated)."""
    from mmbench.tasks import UnknownTaskError, resolve_tasks

    try:
        return resolve_tasks(names)
    except UnknownTaskError as exc:
        raise CLIError(str(exc)) from None


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

    from mmbench.cli.previous_run import missing_ancestor, remove_if_empty

    created = missing_ancestor(args.output) if args.output is not None else None
    if args.output is not None:
        writable_folder_or_error(args.output)
    try:
        poolsets = [resolve_poolset(task, args.data, args.seed, quiet=args.quiet, verify=args.verify) for task in tasks]
        model = load_model_for_run(args.model, model_options(args, args.model), cached=not args.no_cache)
        if args.model_name:
            rename_model(model, args.model_name)
    except ModelUnavailable as exc:
        remove_if_empty(created, args.output)  # a failed load leaves no empty results folder behind
        raise CLIError(str(exc)) from None
    except CLIError:
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
    options.certificate = certificate_or_error(args.backend_certificate, model)
    options.executor = executor_or_error(args, args.model, model_options(args, args.model))
    try:
        failed = _run_tasks(tasks, poolsets, outs, skip, model, options, args)
    except Exception:
        remove_if_empty(created, args.output)  # a run that wrote nothing (a full disk, a bad model) leaves no folder
        raise
    finally:
        options.executor.close()
    return 1 if failed else 0


def certificate_or_error(path: Path | None, model) -> dict[str, Any] | None:
    """The backend certificate at `path`, refused (exit 2) when unreadable or made for another model."""
    if path is None:
        return None
    from mmbench.running.verify_backend import ProbeError, certificate_covers, read_certificate

    try:
        cert = read_certificate(path)
    except ProbeError as exc:
        raise CLIError(str(exc)) from None
    if not certificate_covers(cert, model.card.identity()):
        raise CLIError(f"{path}: reference.model / second.model: the certificate was made for another model or "
                       f"settings than {model.card.name!r}; run `mmbench verify-backend` for this one")
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
            evaluate_to_folder(task.name, ps, model, options, out, args.model)
        res = load_results(out)
        print(format_summary(res, task.summary_axes, task.main_score))
        print(f"\nresults {'in' if task.name in skip else 'written to'} {out}")
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


def model_options(args: argparse.Namespace, model: str) -> dict[str, Any]:
    """The model-loading options a user gave (device, dtype, weights folder, --model-option ...), omitting
    defaults; a --model-option the registered model does not take is an error naming the ones it does."""
    from mmbench.models.registry import option_names

    flags = {k: v for k, v in {"device": args.device, "dtype": args.dtype, "model_path": args.model_path,
                               "attn_implementation": args.attn_implementation,
                               "trust_remote_code": args.trust_remote_code or None}.items() if v is not None}
    extra = parse_params(args.model_option, "--model-option")
    twice = sorted(set(flags) & set(extra))
    if twice:
        raise CLIError(f"--model-option {twice[0]} repeats an option given by its own flag")
    known = option_names(model)
    unknown = sorted(set(extra) - known) if known is not None else []
    if unknown:
        raise CLIError(f"model {model!r} has no option {unknown[0]!r}; its options: {', '.join(sorted(known))}")
    return {**flags, **extra}


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


def writable_folder_or_error(path: Path) -> None:
    """Create the results folder now, so an unusable --output fails before the run, not after it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CLIError(f"--output {path} exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"--output {path}: cannot create the results folder ({exc.strerror or exc})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise CLIError(f"--output {path}: the results folder is not writable")


def safe_name(name: str) -> str:
    """A model name as a folder name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"


def cmd_show(args: argparse.Namespace) -> int:
    from mmbench.results.store import ResultsError, load_results
    from mmbench.results.summary import format_summary

    try:
        res = load_results(args.results)
    except ResultsError as exc:
        raise CLIError(str(exc)) from None
    axes = ("length_bin", "depth", "difficulty", "background_modality", "anchor_kind")
    metric = args.metric or "precision_at_1"
    try:
        task = task_or_error(res.task)
        axes, metric = task.summary_axes, args.metric or task.main_score
    except CLIError:
        pass
    print(format_summary(res, axes, metric))
    return 0
