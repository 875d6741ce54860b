"""The `mmbench` command line: one module per command group, registered below.

Imports: anything; nothing in mmbench imports the CLI (the library never calls it).
"""
from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import sys
from types import ModuleType
from typing import Sequence

from mmbench.common.address_limit import cap_threads_under_limit, out_of_memory_message, too_small_message
from mmbench.common.errors import CLIError
from mmbench.cli.helpformat import Parser

# Each module (of mmbench.cli) exposes `register(subparsers)`; its parsers set `func(args) -> int`. In this order
# `mmbench --help` lists them.
COMMAND_MODULES = ("commands_core", "commands_validate", "commands_run", "commands_show", "inspect_items", "reported",
                   "prepare", "export", "sweep", "analysis", "ravel", "rank", "leaderboard", "verify", "draws",
                   "overfit", "ranks", "reproduce")
# The module registering each top-level command, so a command line imports and builds its own command's parser
# only (tests/test_cli_help.py checks this against what the modules register).
COMMANDS = {"list": "commands_core", "build": "commands_core", "validate": "commands_validate", "run": "commands_run",
            "show": "commands_show", "inspect": "inspect_items", "reported": "reported", "prepare": "prepare",
            "export": "export", "sweep": "sweep", "compare": "analysis", "report": "analysis", "ravel": "ravel",
            "rank": "rank", "leaderboard": "leaderboard", "verify-backend": "verify", "draws": "draws",
            "overfit": "overfit", "ranks": "ranks", "reproduce": "reproduce"}


def command_module(name: str) -> ModuleType:
    """The CLI module `name` of COMMAND_MODULES."""
    return importlib.import_module(f"mmbench.cli.{name}")


def mmbench_version() -> str:
    from mmbench import __version__
    from mmbench.running.provenance import git_commit

    git = git_commit()
    return __version__ + (f" (git {git['commit'][:12]}{', modified' if git['dirty'] else ''})" if git else "")


class _Version(argparse.Action):
    """--version, computed only when asked for (reading the commit runs git)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"mmbench {mmbench_version()}")
        parser.exit()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command's, or, for a command line `argv` naming a known command (and not
    asking for the top-level help before it), that command's alone."""
    parser = Parser(prog="mmbench", description="Benchmarks for long-context multimodal embedding models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print the mmbench version (and the git commit of a checkout) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    named = _named_command(argv) if argv is not None else None
    for name in (COMMANDS[named],) if named is not None else COMMAND_MODULES:
        command_module(name).register(sub)
    return parser


def _named_command(argv: Sequence[str]) -> str | None:
    """The command `argv` names (the first word after the top-level options, none of which takes a value), if it
    is a known one and no -h/--help comes before it."""
    for word in argv:
        if word in ("-h", "--help"):
            return None
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


# The collector's thresholds for the `mmbench` program (allocations between young collections, young collections per
# middle one, middle ones per full one). Python's defaults (700, 10, 10) suit long-lived processes; a run reads and
# scores tens of thousands of records, and at 700 the collector walked them again and again: about a tenth of a
# warm run (perf/warm_floor.py). Cycles are still collected, a little later.
PROGRAM_GC_THRESHOLDS = (20_000, 20, 20)


def program(argv: Sequence[str] | None = None) -> int:
    """The `mmbench` program (its console script and `python -m mmbench`): `main` in a process of its own, with
    the collector tuned for a short-lived process (`PROGRAM_GC_THRESHOLDS`) and, once the command is done, every
    object it made frozen, so the interpreter's last collection at exit does not walk them all (a twelfth of a
    warm run). Code that calls `main` in a process of its own keeps its collector as it was."""
    gc.set_threshold(*PROGRAM_GC_THRESHOLDS)
    try:
        return main(argv)
    finally:  # the process ends next: its last collection need not walk everything the command made
        gc.freeze()


def main(argv: Sequence[str] | None = None) -> int:
    limit = cap_threads_under_limit()   # before numpy or scipy loads its BLAS: under `ulimit -v` it could hang
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    too_small = too_small_message(limit)
    if too_small is not None:
        print(f"mmbench: error: {too_small}", file=sys.stderr)
        return 2
    from mmbench.running import provenance

    provenance.COMMAND_LINE = ["mmbench", *argv]  # recorded in results
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` and the like: what was asked for is done
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail again
        return 0
    except CLIError as exc:
        print(f"mmbench: error: {exc}", file=sys.stderr)
        if args.verbose and exc.__cause__ is not None:   # -v: what lay under it, in one line, not a traceback
            cause = " ".join(str(exc.__cause__).split())
            print(f"mmbench: cause: {type(exc.__cause__).__name__}: {cause}", file=sys.stderr)
        return 2
    except (MemoryError, ImportError, OSError, ValueError, RuntimeError) as exc:
        no_room = out_of_memory_message(exc, f"running `mmbench {args.command}`")
        if no_room is not None:  # with -v too: a traceback of a failed allocation tells no more than this line
            print(f"mmbench: error: {no_room}", file=sys.stderr)
            return 2
        if args.verbose or isinstance(exc, (MemoryError, ImportError)):
            raise
        print(f"mmbench: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
