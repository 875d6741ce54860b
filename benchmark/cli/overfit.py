"""`mmbench overfit`: the fresh-draw overfitting test of a model on a task (see mmbench.running.overfit)."""
from __future__ import annotations

import argparse
from pathlib import Path

from mmbench.cli.commands_core import load_includes, nonnegative_int, positive_int, safe_name, task_or_error
from mmbench.cli.draws import (add_draw_arguments, alpha_level, build_or_error, check_build_or_error, draw_options,
                               load_models, publish_report)
from mmbench.common.errors import CLIError


def register(sub) -> None:
    p = sub.add_parser("overfit", help="public − fresh-draw gap of a model on a task (fresh draws from a secret seed)",
                       description="Evaluate a model on the public draw of a task and on fresh draws built from a "
                                   "secret seed, and test whether the public − fresh gap exceeds draw variance.")
    add_draw_arguments(p)
    p.add_argument("--model", required=True, help="the model (registry name, folder, hub id, module:Factory)")
    p.add_argument("--secret-seed", required=True, help="the secret the fresh draws' seeds are derived from "
                   "(keep it private: whoever knows it can build the fresh draws)")
    p.add_argument("--public-seed", type=nonnegative_int, default=0, help="seed of the public draw (default: %(default)s)")
    p.add_argument("--fresh", type=positive_int, default=5, help="number of fresh draws, at least 2 (default: %(default)s)")
    p.add_argument("--alpha", type=alpha_level, default=0.05, help="level of the test (default: %(default)s)")
    p.add_argument("--out", type=Path, default=None,
                   help="folder of the runs and of overfit.md / overfit.json (default: runs/overfit/<task>/<model>)")
    p.add_argument("--board", type=Path, default=None,
                   help="a board folder to file the report on (shown on its overview; default: none)")
    p.set_defaults(func=cmd_overfit)


def cmd_overfit(args: argparse.Namespace) -> int:
    from mmbench.leaderboards.overfit import file_report
    from mmbench.running.overfit import fresh_seeds, overfit_markdown, overfit_test

    if args.fresh < 2:
        raise CLIError("--fresh: the test needs at least 2 fresh draws")
    load_includes(args)
    task = task_or_error(args.task)
    check_build_or_error(task, args)  # a malformed --param fails before any build
    try:
        seeds = fresh_seeds(args.secret_seed, args.fresh, args.public_seed)
    except ValueError as exc:
        raise CLIError(f"--secret-seed: {exc}") from None
    model = load_models([args.model], args.no_cache)[0]  # an unknown model fails in a second, before any build
    public, *fresh = build_or_error(task, [args.public_seed, *seeds], args)
    metric = args.metric or task.main_score
    out = args.out or Path("runs") / "overfit" / task.name / safe_name(model.card.name)
    try:
        data = overfit_test(model, args.model, task, public, fresh, out, draw_options(args), metric, args.alpha)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    from mmbench.results.report_checks import runs_record
    from mmbench.results.store import load_results

    # what the report was made from, checked before the board shows it (report_checks.overfit_problem)
    data["made_from"] = runs_record(task.version, {model.card.name: [load_results(Path(data["public"]["results"]))]})
    publish_report(out, "overfit", data, overfit_markdown(data), args.board, file_report)
    return 0
