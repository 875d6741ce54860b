"""`mmbench reproduce`: run the reproduction matrix (leaderboards/reproduction.py) and compare, or rewrite it."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from mmbench.common.errors import CLIError


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def register(sub) -> None:
    p = sub.add_parser("reproduce", help="run the reproduction matrix: each official pool set with BM25, MiniLM, two "
                                         "tiny image models and a reference LLM ranker, expected vs got, exit 1 on "
                                         "a miss",
                       description="Build each task's official pool set (the offline sample, seed 0; cached under "
                                   "MMBENCH_HOME), run the matrix's models on it and compare the main score and "
                                   "secondary figures with the shipped reproduction matrix, within its tolerances. "
                                   "Exit 1 on a miss, naming task, model, expected and got.")
    p.add_argument("--task", action="append", type=_names, default=[], metavar="T[,T2]",
                   help="only these tasks (repeatable; default: every task with an official pool set)")
    p.add_argument("--model", action="append", type=_names, default=[], metavar="M[,M2]",
                   help="only these models (repeatable; default: all of the matrix's: bm25, minilm, tiny-clip, "
                        "tiny-gme, llm-ranker)")
    speed = p.add_mutually_exclusive_group()
    speed.add_argument("--fast", action="store_true",
                       help="only the fast conditions (what CI runs: all but the slow ones)")
    speed.add_argument("--slow", action="store_true",
                       help="only the slow conditions, kept out of the test suite (tiny-clip on all of Visual "
                            "Grounding's items, minutes on 2 cores); run before a release")
    p.add_argument("--matrix", type=Path, default=None, help="the matrix to compare with (default: the shipped one)")
    p.add_argument("--write-matrix", type=Path, default=None, metavar="PATH",
                   help="run the selected conditions and write their rows to PATH (the file's other rows are kept, "
                        "but for conditions the matrix no longer has); the maintainer's command after an official "
                        "hash is re-issued")
    p.set_defaults(func=cmd_reproduce)


def _official(registry, task: str):
    """The official sample of `task`, built (or read from MMBENCH_HOME) and checked against its official hash."""
    from mmbench.running.poolsets import resolve_poolset
    from mmbench.tasks import get_task

    spec = get_task(task)
    official = registry.get(task, spec.version)
    ps = resolve_poolset(spec, None, 0, progress=False, announce=lambda line: print(f"  {line}", file=sys.stderr))
    if ps.content_hash != official.content_hash:
        raise CLIError(f"{task}: the sample built here has content hash {ps.content_hash[:12]}, the official "
                       f"pool set of v{spec.version} is {official.content_hash[:12]} (a stale cache under "
                       "MMBENCH_HOME, or a builder changed without re-issuing the hash)")
    return spec, ps


# the tiny random models: which builder of mmbench.models.tiny_random, and how the folder is loaded
TINY = {"tiny-clip": ("clip", None, {}), "tiny-gme": ("qwen2vl", "gme-2b", {"context": 2048})}


def _load(name: str, scratch: Path):
    """An embedding model of the matrix: a registered one, or a tiny random one built under `scratch`."""
    from mmbench.running.model_loading import load_model_explained

    if name not in TINY:
        return load_model_explained(name, {})
    from mmbench.models.tiny_random import BUILDERS

    builder, preset, options = TINY[name]
    folder = BUILDERS[builder](scratch / name, 0)
    if preset is None:
        return load_model_explained(str(folder), {"device": "cpu"})
    return load_model_explained(preset, {"model_path": str(folder), "device": "cpu", **options})


def _rank(spec, ps, limit: int | None) -> Mapping[str, Any]:
    """The reference listwise ranker's run (mmbench.rankers.reference), as `mmbench rank` writes it."""
    from mmbench.rankers.reference import ReferenceServer, reference_ranker
    from mmbench.rankers.run import RankOptions, rank_poolset
    from mmbench.results.mteb_layout import summary_json
    from mmbench.running.provenance import provenance

    start = time.perf_counter()
    with ReferenceServer() as server:
        ranker = reference_ranker(server, max_attempts=1)
        per_query, _, info = rank_poolset(ps, ranker, RankOptions(limit=limit, progress=False, seed=0))
    info = {**info, "provenance": provenance(ranker)}
    return summary_json(spec.name, ps.task_version, ps.content_hash, ranker.card.identity(), per_query, info,
                        time.perf_counter() - start, main_metric=spec.main_score)


def _runner(registry, scratch: Path):
    from mmbench.running.evaluation import evaluate_in_memory
    from mmbench.running.runner import RunOptions

    models: dict[str, Any] = {}
    samples: dict[str, Any] = {}

    def run(cond) -> Mapping[str, Any]:
        if cond.task not in samples:   # the conditions come task by task: one sample in memory at a time
            samples.clear()
            samples[cond.task] = _official(registry, cond.task)
        spec, ps = samples[cond.task]
        if cond.model == "llm-ranker":
            return _rank(spec, ps, cond.limit)
        if cond.model not in models:
            models[cond.model] = _load(cond.model, scratch)
        options = RunOptions(use_cache=False, limit=cond.limit, progress=False, seed=0)
        return evaluate_in_memory(cond.task, ps, models[cond.model], options, cond.model).summary

    return run


def _selection(args: argparse.Namespace, official_tasks: list[str]) -> list[Any]:
    """The conditions the command line selects; an unknown task or model, or a selection of none, is an error."""
    from mmbench.leaderboards import reproduction as rp

    tasks = [t for group in args.task for t in group]
    models = [m for group in args.model for m in group]
    for t in tasks:
        if t not in official_tasks:
            raise CLIError(f"task {t!r} has no official pool set; tasks with one: {', '.join(official_tasks)}")
    for m in models:
        if m not in rp.MODEL_NAMES:
            raise CLIError(f"model {m!r} is not in the reproduction matrix; models in it: {', '.join(rp.MODEL_NAMES)}")
    conds = rp.select(rp.conditions(official_tasks), tasks, models, args.fast, args.slow)
    if not conds:
        where = {f"{m.name} ({m.description})": ", ".join(m.tasks) if m.tasks else "every task" for m in rp.MODELS}
        raise CLIError("no condition of the matrix matches this selection (models and their tasks: "
                       + "; ".join(f"{k}: {v}" for k, v in where.items())
                       + "; slow conditions: " + (", ".join(c.key for c in rp.conditions(official_tasks)
                                                             if not c.fast) or "none") + ")")
    return conds


def cmd_reproduce(args: argparse.Namespace) -> int:
    from mmbench import __version__
    from mmbench.cli.quiet import quiet_libraries

    quiet_libraries()   # the tiny models' builds and loads would print the libraries' progress bars and notices
    from mmbench.leaderboards import reproduction as rp
    from mmbench.leaderboards.official import OfficialRegistry

    registry = OfficialRegistry.load()
    official_tasks = registry.tasks()
    conds = _selection(args, official_tasks)
    if not args.write_matrix:
        try:
            matrix = rp.load_matrix(args.matrix)
        except rp.MatrixError as exc:
            raise CLIError(str(exc)) from None
    say = lambda line: print(f"  {line}", file=sys.stderr)  # noqa: E731
    print(f"reproducing {len(conds)} condition(s) on the official pool sets", file=sys.stderr)
    on_row: Callable[[Any], None] | None = None
    rows: dict[str, Any] = {}
    if args.write_matrix:
        path = args.write_matrix
        try:
            kept = rp.load_matrix(path) if path.is_file() else {}
        except rp.MatrixError as exc:
            raise CLIError(str(exc)) from None
        known = {c.key for c in rp.conditions(official_tasks)}   # a row of a condition no longer run is dropped
        rows = {k: r for k, r in kept.items() if k in known}

        def save(row: rp.Row) -> None:   # saved as each condition finishes: an interruption keeps what ran
            rows[row.key] = row
            rp.save_matrix(rows.values(), path, __version__)

        on_row = save
    with tempfile.TemporaryDirectory(prefix="mmbench-reproduce-") as scratch:
        got, seconds = rp.run_conditions(conds, _runner(registry, Path(scratch)), progress=say, on_row=on_row)
    if args.write_matrix:
        print(f"wrote {len(got)} row(s) ({len(rows) - len(got)} kept) to {path}")
        for line in rp.table([c for cond in conds for c in rp.compare(cond, got[cond.key], got[cond.key])],
                             got, seconds):
            print(line)
        return 0
    checks = [c for cond in conds for c in rp.compare(cond, matrix.get(cond.key), got[cond.key])]
    print("\n".join(rp.table(checks, got, seconds)))
    misses = rp.miss_lines(checks)
    if misses:
        print("\n".join(misses))
        print(f"{len(misses)} miss(es) in {len(conds)} condition(s); if a change meant to move these numbers, "
              f"regenerate the matrix (`{rp.REGENERATE}`) and put old and new numbers in CHANGELOG.md")
        return 1
    print(f"all {len(checks)} figures of {len(conds)} condition(s) within tolerance")
    return 0
