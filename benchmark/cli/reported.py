"""`mmbench reported`: the numbers the seed papers publish, to read a run beside (never ranked with runs)."""
from __future__ import annotations

import argparse

from mmbench.common.errors import CLIError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reported", help="list the numbers the seed papers report (MMLongEmbed, the Flickr30k "
                                        "hard-negative study, RAVEL), with where each is printed")
    p.add_argument("--task", default=None, help="only the numbers about this task (or benchmark, or `ravel`)")
    p.set_defaults(func=cmd_reported)


def cmd_reported(args: argparse.Namespace) -> int:
    from mmbench.leaderboards.reported import reported_for, reported_lines

    rows = reported_for(args.task)
    if not rows:
        raise CLIError(f"no reported numbers for {args.task!r}; tasks with some: "
                       f"{', '.join(sorted({r.task for r in reported_for(None)}))}")
    print("\n".join(reported_lines(rows)))
    return 0


def print_reported_beside(task: str, metric: str, measured: float | None, model: str) -> None:
    """`show --reported` / `compare --reported`: the task's reported numbers under the run's own figure."""
    from mmbench.leaderboards.reported import reported_for, reported_lines

    rows = reported_for(task)
    print(f"\nreported numbers beside this run ({model}: {metric} "
          f"{'n/a' if measured is None else f'{measured:.4f} ({100 * measured:.2f} %)'} measured here, on this pool set):")
    print("\n".join(reported_lines(rows)) if rows else "   none published for this task")
