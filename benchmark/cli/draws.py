"""`mmbench draws`: build several draws of a task, run models over them, and report the between-draw spread.

`mmbench draws --task T --seeds 0..4 [--model M ...] [--out DIR]` builds the draws (once; see
mmbench.running.draws), runs each model over each (reused when already run), and writes draws.md and
draws.json: per model, the between-draw sd of each score per task, subset, length bin and cell next to the
within-draw sampling error and their ratio, and which differences between models are smaller than the
between-draw spread. `compare --draws DIR/draws.json` then says so for the pairs it compares.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable

from mmbench.cli.commands_core import (add_include_argument, build_params_or_error, float_in, load_includes,
                                      positive_int, task_or_error)
from mmbench.common.errors import CLIError

alpha_level = float_in(0.0, 1.0, low_open=True, high_open=True, what="a significance level strictly between 0 and 1")


def seeds_arg(text: str) -> list[int]:
    from mmbench.running.draws import parse_seeds

    try:
        return parse_seeds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_draw_arguments(p) -> None:
    """--task, --include, --source, --param, --metric, --batch-tokens, --no-cache, --out (draws and overfit)."""
    p.add_argument("--task", required=True, help="the task (see `mmbench list tasks`)")
    add_include_argument(p)
    p.add_argument("--source", default="sample", help="source of the builds (default: %(default)s)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="builder parameter of every draw, as for `mmbench build` (e.g. lengths=[8192]); repeatable")
    p.add_argument("--metric", default=None, help="per-query metric of the report (default: the task's main score)")
    p.add_argument("--batch-tokens", type=positive_int, default=32768, help="padded tokens per batch (default: %(default)s)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the embedding cache")
    p.add_argument("--jobs", type=jobs_arg, default=None, metavar="N|auto",
                   help="draws made at once, each by a worker process (--executor local) or a Ray task (--executor "
                        "ray): auto (default) takes the smallest of the draws, the usable cores and what memory "
                        "holds; 1 with --executor local makes them one after another in this process")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="where the draws are made: local, worker processes here (default), or ray, Ray tasks")
    p.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: start one here)")
    p.add_argument("--ray-num-cpus", type=positive_int, default=None,
                   help="CPUs of the Ray started here (default: --jobs)")


def jobs_arg(text: str) -> int | None:
    """--jobs: a positive number, or auto (None)."""
    return None if text == "auto" else positive_int(text)


def register(sub) -> None:
    p = sub.add_parser("draws", help="build draws of a task with several seeds and report the between-draw spread",
                       description="Build a task with several seeds from the same sources and parameters, run models "
                                   "over every draw (cached), and report the between-draw spread of each score.")
    add_draw_arguments(p)
    p.add_argument("--seeds", type=seeds_arg, default="0..4", metavar="A..B",
                   help="seeds of the draws: A..B (inclusive), a comma-separated list, or one seed (default: %(default)s)")
    p.add_argument("--model", action="append", default=[], help="model to run over the draws; repeatable "
                   "(default: none, only build the draws)")
    p.add_argument("--board", type=Path, default=None,
                   help="a board folder to file the report on (its overview flags gaps within the spread; default: none)")
    p.add_argument("--out", type=Path, default=None,
                   help="folder of the runs and of draws.md / draws.json (default: runs/draws/<task>)")
    p.set_defaults(func=cmd_draws)


def load_models(names: list[str], no_cache: bool):
    from mmbench.cli.commands_run import load_model_for_run
    from mmbench.running.model_loading import ModelUnavailable

    try:
        return [load_model_for_run(name, {}, cached=not no_cache) for name in names]
    except ModelUnavailable as exc:
        raise CLIError(str(exc)) from None


def draw_options(args: argparse.Namespace):
    from mmbench.common.home import mmbench_home
    from mmbench.running.runner import RunOptions

    return RunOptions(batch_tokens=args.batch_tokens, cache_dir=mmbench_home() / "embeddings", use_cache=not args.no_cache,
                      progress=False, seed=0)


def check_build_or_error(task, args: argparse.Namespace) -> None:
    """--source and --param of `draws` and `overfit`, checked before any model loads or draw is built."""
    if args.source not in task.sources:
        raise CLIError(f"task {task.name} has no source {args.source!r}; sources: {', '.join(task.sources)}")
    build_params_or_error(task, args.param)


def build_or_error(task, seeds: list[int], args: argparse.Namespace, extra: dict[str, Any] | None = None) -> list[Any]:
    """The draws of `task` for `seeds` with the command's --param (and `extra` builder parameters on top), built
    one after another here (the draws only, no run)."""
    from mmbench.running.draw_pool import DrawPlan

    params = {**build_params_or_error(task, args.param), **(extra or {})}
    return make_or_error(task, [DrawPlan(seed, params) for seed in seeds], [], args, parallel=False)[0]


def make_or_error(task, plans: list[Any], models: list[tuple[str, Any]], args: argparse.Namespace,
                  parallel: bool = True) -> tuple[list[Any], list[list[Any]]]:
    """`plans` built and `models` run over them (mmbench.running.draw_pool.build_and_run) as --jobs and
    --executor say; a build that fails in one line, as a CLIError."""
    from mmbench.running.draw_jobs import DrawBuildError
    from mmbench.running.draw_pool import Parallel, build_and_run

    check_build_or_error(task, args)
    where = Parallel(executor=args.executor, jobs=args.jobs, ray_address=args.ray_address,
                     ray_num_cpus=args.ray_num_cpus, includes=tuple(args.include)) if parallel else Parallel(jobs=1)
    if where.executor == "ray":
        ray_or_error()
    try:
        return build_and_run(task, args.source, plans, models, draw_options(args), where, announce=print)
    except DrawBuildError as exc:
        raise build_error(task, exc.cause) from None


def build_error(task, cause: BaseException) -> BaseException:
    """What a failed build says: a CLIError for a bad parameter or unusable input, else the failure itself."""
    from mmbench.data.poolset import PoolSetError

    if isinstance(cause, TypeError):
        return CLIError(f"bad builder parameter for {task.name}: {cause}")
    if isinstance(cause, (ValueError, FileNotFoundError, PoolSetError)):
        return CLIError(f"cannot build {task.name}: {cause}")
    return cause


def ray_or_error() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        raise CLIError("--executor ray needs Ray: pip install 'ray[default]'") from None


def write_json(path: Path, data: dict[str, Any]) -> None:
    from mmbench.data.media import atomic_write_bytes

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps(data, indent=2, sort_keys=True).encode())


def write_report(out: Path, stem: str, data: dict[str, Any], markdown: str) -> None:
    from mmbench.data.media import atomic_write_bytes

    write_json(out / f"{stem}.json", data)
    atomic_write_bytes(out / f"{stem}.md", markdown.encode())


def publish_report(out: Path, stem: str, data: dict[str, Any], markdown: str, board: Path | None,
                   file_on_board: Callable[[Path, dict[str, Any]], Path]) -> None:
    """How `draws` and `overfit` end: write <stem>.json and <stem>.md under `out`, print the report and where it
    went, and with a `board`, file it there (`file_on_board(board, data)` returns the filed path)."""
    write_report(out, stem, data, markdown)
    print(markdown)
    print(f"report written to {out / f'{stem}.md'} and {out / f'{stem}.json'}")
    if board is not None:
        print(f"filed on the board: {file_on_board(board, data)}")


def cmd_draws(args: argparse.Namespace) -> int:
    from mmbench.cli.commands_core import safe_name
    from mmbench.leaderboards.draw_spread import file_draws
    from mmbench.results.draw_report import draws_markdown, draws_numbers
    from mmbench.results.report_checks import runs_record
    from mmbench.running.draw_pool import DrawPlan

    load_includes(args)
    task = task_or_error(args.task)
    check_build_or_error(task, args)
    models = load_models(args.model, args.no_cache)  # an unknown model fails in a second, before any build
    out = args.out or Path("runs") / "draws" / task.name
    params = build_params_or_error(task, args.param)
    plans = [DrawPlan(seed, params, tuple(out / safe_name(m.card.name) for m in models)) for seed in args.seeds]
    poolsets, model_runs = make_or_error(task, plans, list(zip(args.model, models)), args)
    for seed, ps in zip(args.seeds, poolsets):
        print(f"draw {seed}: {ps.root} (content hash {ps.content_hash[:16]})")
    if not args.model:
        return 0
    metric = args.metric or task.main_score
    by_model = {model.card.name: runs for model, runs in zip(models, model_runs)}
    missing = [n for n, runs in by_model.items() if any(metric not in r.per_query.columns for r in runs)]
    if missing:
        raise CLIError(f"per-query metric {metric!r} is missing from the runs of {missing[0]}")
    data = draws_numbers(task.name, metric, args.seeds, by_model, axes=("subset", "length_bin", *task.summary_axes[1:]),
                         cell=task.summary_axes[:2])
    data["made_from"] = runs_record(task.version, by_model)   # checked wherever the report is read (report_checks)
    publish_report(out, "draws", data, draws_markdown(data), args.board, file_draws)
    return 0
