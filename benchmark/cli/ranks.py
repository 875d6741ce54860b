"""`mmbench ranks`: rank sets per task and across a benchmark's tasks, and each model's rank on a new task."""
from __future__ import annotations

import argparse
from pathlib import Path

from mmbench.cli.commands_core import nonnegative_int, positive_int
from mmbench.cli.draws import alpha_level
from mmbench.common.errors import CLIError


def register(sub) -> None:
    p = sub.add_parser("ranks", help="simultaneous rank intervals per task and across tasks, and the rank on a new task",
                       description="From results folders of several models on several tasks of a benchmark: "
                                   "simultaneous rank confidence sets per task and over all tasks, and a prediction "
                                   "interval for each model's rank on a new task.")
    p.add_argument("results", nargs="+", type=Path, metavar="RESULTS", help="results folders, one per model and task")
    p.add_argument("--metric", default="precision_at_1", help="per-query metric (default: %(default)s)")
    p.add_argument("--alpha", type=alpha_level, default=0.05, help="1 − confidence of the sets and intervals (default: %(default)s)")
    p.add_argument("--resamples", type=positive_int, default=2000, help="bootstrap resamples (default: %(default)s)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="bootstrap seed (default: %(default)s)")
    p.add_argument("--out", type=Path, default=None, help="folder for ranks.md and ranks.json (default: print only)")
    p.set_defaults(func=cmd_ranks)


def cmd_ranks(args: argparse.Namespace) -> int:
    from mmbench.results.store import ResultsError, load_results

    try:
        runs = [load_results(path) for path in dict.fromkeys(args.results)]
    except ResultsError as exc:
        raise CLIError(str(exc)) from None
    print_ranks(runs, args.metric, args.alpha, args.resamples, args.seed, args.out)
    return 0


def print_ranks(runs, metric, alpha: float, resamples: int, seed: int, out: Path | None) -> None:
    """Rank sets per task and across tasks and the new-task rank interval, printed (and written to `out`);
    `mmbench ranks` and `compare` over runs of several tasks both print them this way."""
    from mmbench.cli.draws import write_report
    from mmbench.results.benchmark_ranks import BenchmarkIncomplete, benchmark_ranks, ranks_markdown

    try:
        data = benchmark_ranks(runs, metric, alpha, resamples, seed)
    except BenchmarkIncomplete as exc:
        raise CLIError(str(exc)) from None
    text = ranks_markdown(data)
    if out is not None:
        write_report(out, "ranks", data, text)
    print(text)
