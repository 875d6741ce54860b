"""`mmbench overfit`: the fresh-draw overfitting test of a model on a task (see mmbench.running.overfit)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from mmbench.cli.commands_core import (build_params_or_error, load_includes, nonnegative_int, positive_int, safe_name,
                                      task_or_error)
from mmbench.cli.draws import (add_draw_arguments, alpha_level, build_or_error, check_build_or_error, load_models,
                               make_or_error, publish_report, write_json)
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
                   help="a board folder to file the report on (shown on its overview; default: none); its draws report "
                        "of the task gives the reference draw variance, its commitment is checked")
    p.add_argument("--commit", action="store_true",
                   help="only build the public draw and publish the salted hash of the secret seed (to --out and "
                        "--board) before any fresh draw exists; run again without it to reveal and test")
    p.add_argument("--commitment", type=Path, default=None, help="the commitment record to check the secret against "
                   "(default: the board's, else <out>/commitment.json when there)")
    p.add_argument("--reference", type=Path, action="append", default=[], metavar="DRAWS_JSON",
                   help="a draws report (`mmbench draws`) of the task whose models' between-draw variance the test "
                        "pools; repeatable (default: the board's draws report of the task, if any)")
    p.set_defaults(func=cmd_overfit)


def _read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CLIError(f"{what} {path}: {exc}") from None
    if not isinstance(data, dict):
        raise CLIError(f"{what} {path}: expected a JSON object")
    return data


def _references(args: argparse.Namespace, task: str, model: str, version: str, design: dict | None) -> list:
    """Other models' draw variances for the test's noise, each report checked first (range, task, version, design)."""
    from mmbench.leaderboards.draw_spread import board_draws_path
    from mmbench.results.draw_report import draw_variances
    from mmbench.results.report_checks import reference_problem

    paths = list(args.reference)
    if not paths and args.board is not None and board_draws_path(args.board, task).is_file():
        paths = [board_draws_path(args.board, task)]
    refs = []
    for path in paths:
        data = _read_json(path, "--reference")
        problem = reference_problem(data, task, version, design)
        if problem is not None:
            raise CLIError(f"--reference {path}: {problem}")
        refs += draw_variances(data, exclude=model)
    return refs


def cmd_overfit(args: argparse.Namespace) -> int:
    from mmbench.leaderboards.overfit import commitment_path, file_commitment, file_report
    from mmbench.results.report_checks import design_of
    from mmbench.running.draw_pool import DrawPlan
    from mmbench.running.overfit import (check_commitment, commitment_record, fresh_seeds, overfit_markdown,
                                         overfit_numbers)

    if args.fresh < 2:
        raise CLIError("--fresh: the test needs at least 2 fresh draws")
    load_includes(args)
    task = task_or_error(args.task)
    check_build_or_error(task, args)  # a malformed --param fails before any build
    try:
        seeds = fresh_seeds(args.secret_seed, args.fresh, args.public_seed)
    except ValueError as exc:
        raise CLIError(f"--secret-seed: {exc}") from None
    # an unknown model fails in a second, before any build (the commitment step encodes nothing)
    model = None if args.commit else load_models([args.model], args.no_cache)[0]
    (public,) = build_or_error(task, [args.public_seed], args)
    out = args.out or Path("runs") / "overfit" / task.name / "commitment"
    if args.commit:
        record = commitment_record(task.name, args.public_seed, public.content_hash, args.secret_seed)
        write_json(out / "commitment.json", record)
        print(f"commitment {record['commitment']} to the secret seed of {task.name} (public draw "
              f"{public.content_hash[:16]}) written to {out / 'commitment.json'}")
        if args.board is not None:
            try:
                print(f"published on the board: {file_commitment(args.board, record)}")
            except (OSError, ValueError) as exc:
                raise CLIError(f"--board: {exc}") from None
        return 0
    where = args.commitment or next((p for p in ([commitment_path(args.board, task.name)] if args.board else [])
                                     + [out / "commitment.json"] if p.is_file()), None)
    committed: dict | None = None
    if where is not None:
        committed = _read_json(Path(where), "commitment")
        try:
            check_commitment(committed, args.secret_seed, task.name, public.content_hash)
        except ValueError as exc:
            raise CLIError(f"commitment {where}: {exc}") from None
    assert model is not None
    metric = args.metric or task.main_score
    out = args.out or Path("runs") / "overfit" / task.name / safe_name(model.card.name)
    reference = _references(args, task.name, model.card.name, task.version, design_of(public.builder))
    params = build_params_or_error(task, args.param)
    plans = [DrawPlan(args.public_seed, params, (out / "public",)),
             *(DrawPlan(seed, {**params, **task.fresh_params}, (out / "fresh",), fresh=True) for seed in seeds)]
    _, (runs,) = make_or_error(task, plans, [(args.model, model)], args)
    try:
        data = overfit_numbers(model.card.name, task, runs[0], runs[1:], metric, args.alpha, reference, committed)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    from mmbench.results.report_checks import runs_record
    from mmbench.results.store import load_results

    # what the report was made from, checked before the board shows it (report_checks.overfit_problem)
    data["made_from"] = runs_record(task.version, {model.card.name: [load_results(Path(data["public"]["results"]))]})
    publish_report(out, "overfit", data, overfit_markdown(data), args.board, file_report)
    return 0
