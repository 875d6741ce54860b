"""`mmbench compare` and `mmbench report`: statistics and reports over results folders.

They read results only (per_query.parquet + results.json); they never re-run a model.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from mmbench.cli.commands_core import float_in, int_at_least, nonnegative_int
from mmbench.common.errors import CLIError
from mmbench.common.names import did_you_mean

DEFAULT_METRIC = "precision_at_1"


_alpha = float_in(0.0, 1.0, low_open=True, high_open=True, what="a significance level strictly between 0 and 1")
tolerance = float_in(0.0, 1.0, low_open=True, what="a drop in the metric in (0, 1]")   # --effective-tolerance
window = int_at_least(2, "a number of items, at least 2")                            # --effective-window


def add_effective_flags(p) -> None:
    """How the effective context is read (show, compare, report)."""
    p.add_argument("--effective-tolerance", type=tolerance, default=None,
                   help="read the effective context with this fixed drop in the metric instead of the resolution "
                        "floor of each point (default: the floor; every output says which was used)")
    p.add_argument("--effective-window", type=window, default=None,
                   help="items in each stratum's reference for the effective context (default: a tenth of the "
                        "stratum's scored items, at least 10)")


def _settle_at(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text}: a difference in (0, 1] of the metric")
    return value


def register(sub) -> None:
    p = sub.add_parser("compare", help="paired tests between runs of one pool set",
                       description="Paired t-test (bootstrap CI, Cohen's d_z), McNemar on R@1, Wilcoxon on reciprocal rank, "
                                   "Bonferroni/Holm, and bootstrap CIs of R@1, R@3, MRR for two or more runs of the same pool set.")
    p.add_argument("results", nargs="+", type=Path, metavar="RESULTS", help="results folders (two or more, same content hash)")
    p.add_argument("--metric", default=None, help="per-query metric of the paired t-test (default: the task's main score, "
                                                  f"e.g. recall_at_1 for Flickr; {DEFAULT_METRIC} for tasks mmbench does not know)")
    p.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples, CI of the mean difference (default: %(default)s)")
    p.add_argument("--ci-resamples", type=int, default=1_000, help="bootstrap resamples, per-run metric CIs (default: %(default)s)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="bootstrap seed (default: %(default)s)")
    p.add_argument("--alpha", type=_alpha, default=0.05, help="family-wise significance level (default: %(default)s)")
    p.add_argument("--out", type=Path, default=None, help="folder for compare.md and compare.json (default: print only)")
    p.add_argument("--draws", type=Path, default=None, metavar="DRAWS_JSON",
                   help="a draws.json of `mmbench draws` for this task: say which differences are smaller than the "
                        "between-draw spread (default: none)")
    p.add_argument("--settle-at", type=_settle_at, default=None, metavar="D",
                   help="the true difference items-to-settle plans for (default: each pair's resolution floor)")
    add_effective_flags(p)
    add_protocol_flag(p)
    p.add_argument("--reported", action="store_true",
                   help="also print the numbers the seed papers report for this task (not reproduced here)")
    p.set_defaults(func=cmd_compare)

    r = sub.add_parser("report", help="positional bias, heatmaps, length curves, Easy vs Hard, modality robustness",
                       description="Markdown report with PNG figures and the same numbers as JSON.")
    r.add_argument("results", nargs="+", type=Path, metavar="RESULTS", help="results folders")
    r.add_argument("--metric", default=None, help="per-query score of tables, curves and the mixed model (default: the "
                                                  f"tasks' main score when they share one, else {DEFAULT_METRIC})")
    r.add_argument("--heatmap-metric", default="precision_at_5", help="metric of the length×depth heatmaps (default: %(default)s)")
    r.add_argument("--ci-resamples", type=int, default=1_000, help="bootstrap resamples for metric CIs (default: %(default)s)")
    r.add_argument("--seed", type=nonnegative_int, default=0, help="bootstrap seed (default: %(default)s)")
    r.add_argument("--out", type=Path, default=Path("mmbench-report"), help="output folder (default: %(default)s)")
    add_effective_flags(r)
    add_protocol_flag(r)
    r.set_defaults(func=cmd_report)


def add_protocol_flag(p) -> None:
    p.add_argument("--allow-protocol-mismatch", action="store_true",
                   help="join runs whose protocol ids differ (another --limit selection, instructions, budgets, dtype, "
                        "backend...); the differing fields are printed. Without it such runs are refused")


def check_protocols(runs, allow: bool) -> list[str]:
    """Refuse (exit 2) runs whose protocols may not be joined, naming the differing fields; with `allow`,
    print the differences to stderr and go on. Returns the differences."""
    from mmbench.results.protocol import join_problems, unrecorded

    rows = [(str(run.root or run.model_name), str(run.model_name), str(run.info.get("content_hash")),
             run.info.get("protocol")) for run in runs]
    problems = join_problems(rows)
    for label in unrecorded(rows):
        print(f"mmbench: note: {label} records no protocol (an older mmbench); it cannot be checked", file=sys.stderr)
    if problems and not allow:
        raise CLIError("the runs were made under different protocols (pass --allow-protocol-mismatch to join them "
                       "anyway): " + " | ".join(problems))
    for problem in problems:
        print(f"mmbench: warning: joined despite a protocol difference: {problem}", file=sys.stderr)
    return problems


def _check_distinct(paths: Sequence[Path]) -> None:
    """Refuse a results folder given twice (same resolved path): it would compare a run with itself."""
    seen: dict[Path, Path] = {}
    for path in paths:
        key = Path(path).resolve()
        if key in seen:
            same = "" if str(seen[key]) == str(path) else f" (also given as {seen[key]})"
            raise CLIError(f"results folder {path} is given twice{same}; pass each run once")
        seen[key] = path


def _load(paths: Sequence[Path]):
    from mmbench.results.store import ResultsError, load_results

    _check_distinct(paths)
    runs = []
    for path in paths:
        try:
            runs.append(load_results(path))
        except ResultsError as exc:
            raise CLIError(str(exc)) from exc
    return runs


def _check_metrics(runs, *metrics: str) -> None:
    from mmbench.evaluators.metrics import metric_names

    known = metric_names()
    for metric in metrics:
        if metric not in known:
            present = [m for m in known if all(m in run.per_query.columns for run in runs)]
            raise CLIError(f"{metric!r} is not a per-query metric{did_you_mean(metric, known)}; choose one of: {', '.join(present or known)}")
    for run in runs:
        for metric in metrics:
            if metric not in run.per_query.columns:
                raise CLIError(f"{run.root}: no per-query column {metric!r} (choose a metric column of per_query.parquet)")


def main_score(runs) -> str:
    """The runs' task main score (one name for one number: Flickr's R@1 is `recall_at_1`), if they share one."""
    from mmbench.tasks import UnknownTaskError, get_task

    scores = set()
    for run in runs:
        try:
            scores.add(get_task(run.task).main_score)
        except UnknownTaskError:
            scores.add(DEFAULT_METRIC)
    return scores.pop() if len(scores) == 1 else DEFAULT_METRIC


def _check_resamples(*values: int) -> None:
    if any(v < 1 for v in values):
        raise CLIError("resample counts must be positive")


def cmd_compare(args: argparse.Namespace) -> int:
    from mmbench.reports import PoolSetMismatch, write_comparison

    if len(args.results) < 2:
        raise CLIError("compare needs two or more results folders")
    _check_resamples(args.resamples, args.ci_resamples)
    runs = _load(args.results)
    if len({run.task for run in runs}) > 1:   # a benchmark: rank sets per task and across its tasks
        return compare_across_tasks(runs, args)
    check_protocols(runs, args.allow_protocol_mismatch)
    args.metric = args.metric or main_score(runs)
    _check_metrics(runs, args.metric)
    try:
        _, markdown = write_comparison(runs, args.out, metric=args.metric, resamples=args.resamples,
                                       ci_resamples=args.ci_resamples, seed=args.seed, alpha=args.alpha,
                                       effective=effective_options(args),
                                       draws=draws_report(args.draws, runs[0].task, [(str(r.root), r.info) for r in runs]),
                                       settle_at=args.settle_at)
    except PoolSetMismatch as exc:
        raise CLIError(str(exc)) from exc
    print(markdown)
    if args.reported:
        from mmbench.cli.reported import print_reported_beside

        for run in runs:
            values = run.per_query[args.metric]
            print_reported_beside(run.task, args.metric, float(values.mean()), run.model_name)
    if args.out is not None:
        print(f"wrote {args.out / 'compare.md'}, {args.out / 'compare.json'} and {args.out / 'figures' / 'paired_differences.png'}", file=sys.stderr)
    return 0


def draws_report(path: Path | None, task: str, runs: list[tuple[str, dict]]):
    """The draws report given by --draws, checked against the runs it is read beside (range of every spread; task,
    design, protocol and model, `results.report_checks`), or a one-line error naming the file."""
    if path is None:
        return None
    import json

    from mmbench.results.report_checks import draws_problem

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CLIError(f"--draws {path}: cannot read the draws report ({exc})") from None
    problem = draws_problem(data, task, runs)
    if problem is not None:
        raise CLIError(f"--draws {path}: refused: {problem}")
    return data


def compare_across_tasks(runs, args: argparse.Namespace) -> int:
    """`compare` over runs of several tasks (a benchmark): simultaneous rank sets per task and across tasks, and
    each model's rank interval on a new task (as `mmbench ranks`), each task on its own main score unless
    --metric names one."""
    from mmbench.cli.ranks import print_ranks
    from mmbench.tasks import UnknownTaskError, get_task

    def task_metric(task: str) -> str:
        try:
            return args.metric or get_task(task).main_score
        except UnknownTaskError:
            return "precision_at_1"

    print_ranks(runs, task_metric, args.alpha, args.ci_resamples, args.seed, args.out)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from mmbench.reports import write_report

    _check_resamples(args.ci_resamples)
    runs = _load(args.results)
    check_protocols(runs, args.allow_protocol_mismatch)
    args.metric = args.metric or main_score(runs)
    _check_metrics(runs, args.metric, args.heatmap_metric)
    write_report(runs, args.out, metric=args.metric, heatmap_metric=args.heatmap_metric,
                 ci_resamples=args.ci_resamples, seed=args.seed, effective=effective_options(args))
    print(f"wrote {args.out / 'report.md'}, {args.out / 'report.json'} and figures in {args.out / 'figures'}")
    return 0


def effective_options(args: argparse.Namespace) -> dict[str, float | int | None]:
    """The effective-context options of a command line, as `effective_length_entry` takes them."""
    return {"tolerance": args.effective_tolerance, "window": args.effective_window}


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry (`python -m mmbench.cli.analysis`), same exit codes as `mmbench`."""
    parser = argparse.ArgumentParser(prog="mmbench")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    register(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CLIError as exc:
        print(f"mmbench: error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"mmbench: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
