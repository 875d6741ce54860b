"""`mmbench reproduce`: run the reproduction matrix (leaderboards/reproduction.py) and compare, or rewrite it."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from mmbench.common.errors import CLIError


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def register(sub) -> None:
    p = sub.add_parser("reproduce", help="run the reproduction matrix: each official pool set with BM25 and MiniLM, "
                                         "expected vs got, exit 1 on a miss",
                       description="Build each task's official pool set (the offline sample, seed 0; cached under "
                                   "MMBENCH_HOME), run the matrix's models on it and compare the main score and "
                                   "secondary figures with the shipped reproduction matrix, within its tolerances. "
                                   "Exit 1 on a miss, naming task, model, expected and got.")
    p.add_argument("--task", action="append", type=_names, default=[], metavar="T[,T2]",
                   help="only these tasks (repeatable; default: every task with an official pool set)")
    p.add_argument("--model", action="append", type=_names, default=[], metavar="M[,M2]",
                   help="only these models (repeatable; default: bm25 and minilm)")
    p.add_argument("--fast", action="store_true",
                   help="only the fast conditions (what CI runs: every task with BM25 and MiniLM, Visual Grounding's "
                        "MiniLM on a seeded selection)")
    p.add_argument("--matrix", type=Path, default=None, help="the matrix to compare with (default: the shipped one)")
    p.add_argument("--write-matrix", type=Path, default=None, metavar="PATH",
                   help="run the selected conditions and write their rows to PATH (other rows of the file are kept); "
                        "the maintainer's command after an official hash is re-issued")
    p.set_defaults(func=cmd_reproduce)


def _runner(registry):
    from mmbench.running.model_loading import load_model_explained
    from mmbench.running.poolsets import resolve_poolset
    from mmbench.running.evaluation import evaluate_in_memory
    from mmbench.running.runner import RunOptions
    from mmbench.tasks import get_task

    models: dict[str, Any] = {}

    def run(cond) -> Mapping[str, Any]:
        spec = get_task(cond.task)
        official = registry.get(cond.task, spec.version)
        ps = resolve_poolset(spec, None, 0, progress=False,
                             announce=lambda line: print(f"  {line}", file=sys.stderr))
        if ps.content_hash != official.content_hash:
            raise CLIError(f"{cond.task}: the sample built here has content hash {ps.content_hash[:12]}, the official "
                           f"pool set of v{spec.version} is {official.content_hash[:12]} (a stale cache under "
                           "MMBENCH_HOME, or a builder changed without re-issuing the hash)")
        if cond.model not in models:
            models[cond.model] = load_model_explained(cond.model, {})
        options = RunOptions(use_cache=False, limit=cond.limit, progress=False, seed=0)
        return evaluate_in_memory(cond.task, ps, models[cond.model], options, cond.model).summary

    return run


def cmd_reproduce(args: argparse.Namespace) -> int:
    from mmbench import __version__
    from mmbench.leaderboards import reproduction as rp
    from mmbench.leaderboards.official import OfficialRegistry

    registry = OfficialRegistry.load()
    tasks = [t for group in args.task for t in group]
    models = [m for group in args.model for m in group]
    official_tasks = registry.tasks()
    for t in tasks:
        if t not in official_tasks:
            raise CLIError(f"task {t!r} has no official pool set; tasks with one: {', '.join(official_tasks)}")
    for m in models:
        if m not in rp.CPU_MODELS:
            raise CLIError(f"model {m!r} is not in the reproduction matrix; models in it: {', '.join(rp.CPU_MODELS)}")
    conds = rp.select(rp.conditions(official_tasks), tasks, models, args.fast)
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
        rows = {k: r for k, r in kept.items() if r.task in official_tasks}

        def save(row: rp.Row) -> None:   # saved as each condition finishes: an interruption keeps what ran
            rows[row.key] = row
            rp.save_matrix(rows.values(), path, __version__)

        on_row = save
    got, seconds = rp.run_conditions(conds, _runner(registry), progress=say, on_row=on_row)
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
