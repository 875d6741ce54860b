"""`mmbench show`: print the summary of a results folder."""
from __future__ import annotations

import argparse
from pathlib import Path

from mmbench.cli.analysis import add_effective_flags, effective_options
from mmbench.cli.commands_core import task_or_error
from mmbench.common.errors import CLIError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="print the summary of a results folder")
    p.add_argument("results", type=Path, help="results folder written by `mmbench run`")
    p.add_argument("--metric", default=None, help="metric of the tables by axis, e.g. ndcg_at_10 (default: the "
                                                  "task's main score)")
    add_effective_flags(p)
    p.add_argument("--reported", action="store_true",
                   help="also print the numbers the seed papers report for this task (not reproduced here)")
    p.add_argument("--draws", type=Path, default=None, metavar="DRAWS_JSON",
                   help="a draws.json of `mmbench draws` for this task: print the between-draw spread of the scores "
                        "(default: none)")
    p.set_defaults(func=cmd_show)


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
    print(format_summary(res, axes, metric, effective=effective_options(args)))
    if args.reported:
        from mmbench.cli.reported import print_reported_beside

        values = res.per_query[metric] if metric in res.per_query.columns else None
        print_reported_beside(res.task, metric, None if values is None else float(values.mean()), res.model_name)
    if args.draws is not None:
        from mmbench.cli.analysis import draws_report
        from mmbench.results.draw_report import spread_lines

        report = draws_report(args.draws, res.task, [(str(args.results), res.info)])
        print("\n".join(spread_lines(report, res.task, str(res.model_name))))
    return 0
