"""`mmbench leaderboard`: submit validated results to a board, list it, build its static site."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mmbench.common.errors import CLIError


def register(sub: argparse._SubParsersAction) -> None:
    lb = sub.add_parser("leaderboard", help="validated submissions, the board store and its static site")
    lsub = lb.add_subparsers(dest="leaderboard_command", metavar="SUBCOMMAND")
    lsub.required = True

    p = lsub.add_parser("submit", help="validate a results folder and add it to a board")
    p.add_argument("results", type=Path, help="folder written by `mmbench run` (or one holding ravel_scores.json)")
    p.add_argument("--board", type=Path, required=True, help="board folder (created if missing)")
    p.add_argument("--replace", action="store_true", help="replace an existing submission of the same model identity")
    p.add_argument("--official", type=Path, help="official hash registry JSON (default: $MMBENCH_OFFICIAL_HASHES, "
                                                   "else the shipped one)")
    p.add_argument("--max-file-mb", type=float, default=256.0, help="largest accepted Parquet file (MiB)")
    p.add_argument("--allow-protocol-mismatch", action="store_true",
                   help="accept results whose protocol differs from the board's submissions of the same pool set "
                        "(or of the same model); the differing fields are printed. Without it they are refused")
    p.set_defaults(func=cmd_submit)

    p = lsub.add_parser("list", help="list a board's submissions")
    p.add_argument("--board", type=Path, required=True, help="board folder")
    p.set_defaults(func=cmd_list)

    p = lsub.add_parser("build", help="render a board as a static HTML site")
    p.add_argument("--board", type=Path, required=True, help="board folder")
    p.add_argument("--out", type=Path, required=True, help="site folder (replaced)")
    p.add_argument("--allow-protocol-mismatch", action="store_true",
                   help="build even when submissions of one pool set (or one model) differ in protocol; the "
                        "differences are printed. Without it the build is refused")
    p.add_argument("--no-reported", dest="reported", action="store_false",
                   help="leave out the band of numbers the seed papers report for the board's tasks (shown by "
                        "default after the measured tables, never ranked with them)")
    p.set_defaults(func=cmd_build)

    p = lsub.add_parser("remove", help="take one submission off a board (its rows and files)")
    p.add_argument("id", help="the submission id, as `leaderboard list` or a build warning shows it")
    p.add_argument("--board", type=Path, required=True, help="board folder")
    p.set_defaults(func=cmd_remove)

    p = lsub.add_parser("describe", help="add a model's metadata to a board (parameters, dim, context, licence, weights)",
                        description="Writes the board's model_metadata.json; the main board shows these fields for every "
                                    "submission of MODEL (its name as submitted), ahead of the model registry.")
    p.add_argument("model", help="the model name as submitted")
    p.add_argument("--board", type=Path, required=True, help="board folder (its submissions name MODEL)")
    p.add_argument("--parameters", type=int, help="total parameters")
    p.add_argument("--dim", type=int, help="embedding dimension")
    p.add_argument("--context", type=int, help="context window (tokens)")
    p.add_argument("--modalities", help="comma-separated: text,image,video,audio")
    p.add_argument("--license", help="licence name, e.g. apache-2.0")
    p.add_argument("--weights", help="https:// link to the weights, or a Hugging Face hub id")
    p.set_defaults(func=cmd_describe)

    p = lsub.add_parser("official", help="print (or add to a registry) the official entry of a built pool set")
    p.add_argument("poolsets", type=Path, nargs="+", help="pool set folders (e.g. from `mmbench build --task T`)")
    p.add_argument("--write", type=Path, help="registry JSON to create or update")
    p.set_defaults(func=cmd_official)


def _board(path: Path, create: bool):
    from mmbench.leaderboards.store import DB_NAME, Board

    if not create and not (path / DB_NAME).is_file():
        raise CLIError(f"{path} is not a board (no {DB_NAME}); submit to it first")
    return Board(path)


def cmd_submit(args: argparse.Namespace) -> int:
    from mmbench.leaderboards.files import Limits
    from mmbench.leaderboards.official import OfficialRegistry
    from mmbench.leaderboards.problems import SubmissionRejected
    from mmbench.leaderboards.protocols import submission_problems
    from mmbench.leaderboards.schema import validate_submission

    if not args.results.exists():
        raise CLIError(f"results folder {args.results} does not exist")
    try:
        registry = OfficialRegistry.load(args.official)
    except (FileNotFoundError, ValueError) as exc:
        raise CLIError(str(exc)) from None
    limits = Limits(max_file_bytes=int(args.max_file_mb * 1024 * 1024))
    try:
        sub = validate_submission(args.results, registry, limits)
        board = _board(args.board, create=True)
        _protocol_gate(submission_problems(board.entries(), sub, replacing=sub.submission_id if args.replace else None),
                       args.allow_protocol_mismatch, "--allow-protocol-mismatch to accept it anyway")
        try:
            entry = board.submit(sub, replace=args.replace)
        finally:  # said also when the submission itself is then refused
            if board.cleaned:
                print(f"cleaned {len(board.cleaned)} leftover(s) of interrupted submits: "
                      + ", ".join(str(p.relative_to(board.root)) for p in board.cleaned))
    except SubmissionRejected as exc:
        raise CLIError(str(exc)) from None
    print(f"accepted {entry.model_name!r} on {entry.task} v{entry.task_version} as {entry.id} -> {entry.folder}")
    _say_certificate(sub.files)
    return 0


def _say_certificate(files: dict[str, bytes]) -> None:
    """The backend certificate's verdict by mmbench's protocol, as the board will show it (none said without one)."""
    import json

    from mmbench.results.store import SUMMARY
    from mmbench.running.parity_thresholds import describe_block

    try:
        block = (json.loads(files[SUMMARY]).get("mmbench") or {}).get("backend_certificate")
    except (KeyError, ValueError, AttributeError):
        return
    if block is not None:
        print(f"backend certificate: {describe_block(block)}")


def _protocol_gate(problems: list[str], allow: bool, hint: str) -> None:
    """Refuse (exit 2) on protocol differences, naming the fields; with `allow`, print them and go on."""
    import sys

    if problems and not allow:
        raise CLIError(f"different protocols (pass {hint}): " + " | ".join(problems))
    for problem in problems:
        print(f"mmbench: warning: joined despite a protocol difference: {problem}", file=sys.stderr)


def cmd_list(args: argparse.Namespace) -> int:
    board = _board(args.board, create=False)
    for e in board.entries():
        main = e.scores.get("all", {}).get("precision_at_1")
        shown = f"P@1 {main:.3f}" if main is not None else ""
        print(f"{e.id}  {e.task:24s} v{e.task_version:6s} {e.model_name!r:40s} {shown}  {e.submitted_at}")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from mmbench.leaderboards.site import build_site

    board = _board(args.board, create=False)
    from mmbench.leaderboards.modelmeta import MetadataError
    from mmbench.leaderboards.protocols import board_problems

    _protocol_gate(board_problems(board.entries()), args.allow_protocol_mismatch,
                   "--allow-protocol-mismatch to build anyway")
    skipped: list[str] = []
    try:
        out = build_site(board, args.out, skipped, reported=args.reported)
    except MetadataError as exc:
        raise CLIError(str(exc)) from exc
    for line in skipped:
        print(f"warning: left out submission {line}; `mmbench leaderboard remove` takes it off the board",
              file=sys.stderr)
    print(f"site with {len(board.entries()) - len(skipped)} submissions written to {out} (open {out / 'index.html'})")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    board = _board(args.board, create=False)
    try:
        entry = board.remove(args.id)
    except KeyError:
        raise CLIError(f"board {args.board} has no submission {args.id!r}; `mmbench leaderboard list` shows the ids") from None
    print(f"removed {entry.model_name!r} on {entry.task} v{entry.task_version} ({entry.id}); "
          "rebuild the site with `mmbench leaderboard build`")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    from mmbench.leaderboards.modelmeta import MetadataError, describe

    board = _board(args.board, create=False)
    fields = {k: getattr(args, k) for k in ("parameters", "dim", "context", "modalities", "license", "weights")
              if getattr(args, k) is not None}
    if not fields:
        raise CLIError("describe needs at least one of --parameters --dim --context --modalities --license --weights")
    try:
        merged = describe(board.root, args.model, fields)
    except MetadataError as exc:
        raise CLIError(str(exc)) from exc
    print(f"{args.model}: " + ", ".join(f"{k}={v}" for k, v in sorted(merged.items())))
    return 0


def cmd_official(args: argparse.Namespace) -> int:
    import json

    from mmbench.leaderboards.official import OfficialRegistry, entry_from_poolset
    from mmbench.data.poolset import PoolSetError, load_poolset

    registry = OfficialRegistry.load(args.write) if args.write and args.write.is_file() else OfficialRegistry()
    for folder in args.poolsets:
        try:
            ps = load_poolset(folder, verify=True)
        except PoolSetError as exc:
            raise CLIError(str(exc)) from None
        entry = entry_from_poolset(ps, {"seed": ps.seed, "sources": ps.sources})
        registry.add(entry)
        print(json.dumps({entry.task: {entry.task_version: entry.to_json()}}, indent=1, sort_keys=True)
              if not args.write else f"{entry.task} v{entry.task_version}: {entry.content_hash} ({entry.n_items} items)")
    if args.write:
        registry.save(args.write)
        print(f"registry written to {args.write}")
    return 0
