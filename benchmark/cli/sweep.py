"""`mmbench sweep`: every task × model pair, here or on a Ray cluster (see mmbench/sweep.py)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from mmbench.cli.commands_core import (model_options, nonnegative_float, nonnegative_int, positive_int, resolve_poolset,
                            safe_name, tasks_or_error, writable_folder_or_error)
from mmbench.common.errors import CLIError
from mmbench.common.home import mmbench_home


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="evaluate several models on several tasks (locally or on Ray)")
    p.add_argument("--task", action="append", required=True, help="a task or benchmark name (repeat, or separate by commas, for several)")
    p.add_argument("--model", action="append", required=True, help="a model (repeat for several)")
    p.add_argument("--data", action="append", default=[], metavar="TASK=DIR",
                   help="pool set folder of a task (default: the task's offline sample, built on first use)")
    p.add_argument("--out-root", type=Path, default=Path("runs"), help="results go to OUT_ROOT/<task>/<model>")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local: the jobs one after another here; ray: each job a Ray task (on --ray-address, "
                        "else on a Ray started here)")
    p.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: start one here)")
    p.add_argument("--ray-num-cpus", type=positive_int, default=None, help="CPUs of the Ray started here")
    p.add_argument("--cpus-per-job", type=float, default=1.0, help="CPUs each Ray job reserves (--executor ray)")
    p.add_argument("--gpus-per-job", type=float, default=0.0, help="GPUs each Ray job reserves, e.g. 1 or 0.5")
    p.add_argument("--workers-per-job", type=positive_int, default=1,
                   help="with --executor ray: split each job's encoding over this many Ray actors")
    p.add_argument("--cpus-per-worker", type=float, default=1.0, help="CPUs each encoding actor reserves")
    p.add_argument("--gpus-per-worker", type=float, default=0.0, help="GPUs each encoding actor reserves")
    p.add_argument("--limit", type=positive_int, help="evaluate N items per job (the selection of `mmbench run --limit`) "
                   "(default: all)")
    p.add_argument("--device", default=None, help="device of every model, e.g. cuda, cpu (default: each adapter's)")
    p.add_argument("--dtype", default=None, help="weight dtype, e.g. bfloat16, float32 (default: each adapter's)")
    p.add_argument("--model-path", default=None, help="local folder with the weights (one --model only)")
    p.add_argument("--attn-implementation", default=None,
                   help="transformers attention implementation, e.g. sdpa, flash_attention_2, eager")
    p.add_argument("--trust-remote-code", action="store_true", help="let transformers run the model repositories' own code")
    p.add_argument("--model-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an adapter option passed to every model (see `mmbench run --help`)")
    p.add_argument("--batch-tokens", type=positive_int, default=32768, help="padded tokens per batch")
    p.add_argument("--price-per-token", type=nonnegative_float, default=None, metavar="USD",
                   help="price of one encoded token (API models): each job's results state the cost per 1,000 "
                        "documents")
    p.add_argument("--cache-dir", type=Path, help="embedding cache shared by all jobs (default: MMBENCH_HOME/"
                   "embeddings; on a cluster, a folder every node can reach)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the embedding cache")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the default builds and of tie-breaking")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars or info logs (mmbench's, and those of Ray, transformers, datasets, mteb)")
    p.set_defaults(func=cmd_sweep)


def _data_folders(pairs: list[str], tasks: list[str]) -> dict[str, Path]:
    out = {}
    for pair in pairs:
        name, sep, folder = pair.partition("=")
        if not sep or not folder:
            raise CLIError(f"--data {pair!r}: expected TASK=DIR")
        if name not in tasks:
            raise CLIError(f"--data {pair!r}: task {name!r} is not among the swept tasks {tasks}")
        out[name] = Path(folder)
    return out


def cmd_sweep(args: argparse.Namespace) -> int:
    from mmbench.data.media import atomic_write_bytes
    from mmbench.running.sweep import Job, outcome_record, run_local, run_ray

    if args.quiet:
        from mmbench.cli.quiet import quiet_libraries

        quiet_libraries()
    tasks = tasks_or_error(args.task)
    models = list(dict.fromkeys(args.model))
    if args.model_path and len(models) > 1:
        raise CLIError("--model-path names one model's weights; sweep one model at a time with it")
    if args.cpus_per_job <= 0 or args.gpus_per_job < 0:
        raise CLIError("--cpus-per-job must be positive and --gpus-per-job not negative")
    if args.cpus_per_worker <= 0 or args.gpus_per_worker < 0:
        raise CLIError("--cpus-per-worker must be positive and --gpus-per-worker not negative")
    if args.workers_per_job > 1 and args.executor != "ray":
        raise CLIError("--workers-per-job needs --executor ray")
    data = _data_folders(args.data, [t.name for t in tasks])
    run_options = {"batch_tokens": args.batch_tokens, "use_cache": not args.no_cache, "limit": args.limit,
                   "seed": args.seed, "cache_dir": str((args.cache_dir or mmbench_home() / "embeddings").resolve()),
                   "model_home": str(mmbench_home().resolve())}
    if args.price_per_token is not None:
        run_options["price_per_token"] = args.price_per_token
    if args.workers_per_job > 1:  # each job shards its own encoding over actors of the same cluster
        run_options["sharding"] = {"workers": args.workers_per_job, "cpus_per_worker": args.cpus_per_worker,
                                   "gpus_per_worker": args.gpus_per_worker}
    jobs = []
    for task in tasks:  # pool sets are built and checked once, here, before any job starts
        ps = resolve_poolset(task, data.get(task.name), args.seed, quiet=args.quiet)
        for model in models:
            out = args.out_root / task.name / safe_name(model)
            writable_folder_or_error(out)
            jobs.append(Job(task.name, model, str(Path(ps.root).resolve()), str(out.resolve()), ps.content_hash,
                            model_options(args, model), run_options))
    if args.executor == "ray":
        try:
            outcomes = run_ray(jobs, args.ray_address, args.cpus_per_job, args.gpus_per_job, args.ray_num_cpus)
        except ImportError:
            raise CLIError("--executor ray needs Ray: pip install 'ray[default]'") from None
    else:
        outcomes = run_local(jobs)
    records = [outcome_record(o) for o in outcomes]
    args.out_root.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(args.out_root / "sweep.json", (json.dumps(records, indent=2) + "\n").encode())
    print(_table(records))
    print(f"\nsweep report written to {args.out_root / 'sweep.json'}")
    return 0 if all(r["status"] != "failed" and not r["failed_items"] for r in records) else 1


def _table(records: list[dict]) -> str:
    rows = [("task", "model", "status", "main", "detail")]
    for r in records:
        main = "-" if r["main_score"] is None else f"{r['main_score']:.3f}"
        rows.append((r["task"], r["model"], r["status"], main, r["detail"][:100]))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4] for row in rows)

