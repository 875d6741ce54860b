"""Every option and positional of every `mmbench` command (nested subcommands included) has help text,
and the help a user reads states the option's real default."""
from __future__ import annotations

import argparse

import pytest

from mmbench.cli import build_parser
from mmbench.cli.helpformat import HelpFormatter, has_default_worth_showing

# (command path, option) pairs hidden from --help on purpose; each needs a reason here.
DELIBERATELY_SUPPRESSED: dict[tuple[str, str], str] = {}


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("mmbench",)):
    """(command path, parser, action) for every action of the tree, subcommand entries included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield path, parser, action
            for name, child in action.choices.items():
                yield from walk(child, path + (name,))
        elif not isinstance(action, argparse._HelpAction):
            yield path, parser, action


def action_name(action: argparse.Action) -> str:
    return "/".join(action.option_strings) or action.dest


def rendered_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help text as `--help` prints it (%(...)s expanded; mmbench's formatter appends defaults)."""
    text = parser._get_formatter()._get_help_string(action)
    params = {**vars(action), "prog": parser.prog}
    for key in list(params):
        if hasattr(params[key], "__name__"):
            params[key] = params[key].__name__
    return text % params


def default_spellings(default) -> set[str]:
    out = {str(default)}
    if isinstance(default, float):
        out |= {f"{default:g}", repr(default)}
    return out


class _Captured(Exception):
    def __init__(self, parser):
        self.parser = parser


def preparer_parsers():
    """The own parsers of `mmbench prepare SOURCE` (each preparer builds one inside its function): captured
    at its parse_args call, before it reads anything."""
    import importlib
    from unittest import mock

    from mmbench.cli.prepare import PREPARERS

    def capture(self, *args, **kwargs):
        raise _Captured(self)

    out = {}
    for name, (target, _) in sorted(PREPARERS.items()):
        module, func = target.split(":")
        with mock.patch.object(argparse.ArgumentParser, "parse_args", capture):
            try:
                getattr(importlib.import_module(module), func)([])
            except _Captured as got:
                out[name] = got.parser
    assert sorted(out) == sorted(PREPARERS), "a preparer did not build its parser"
    return out


TREE = list(walk(build_parser())) + [action for name, parser in preparer_parsers().items()
                                     for action in walk(parser, ("mmbench", "prepare", name))]


def test_the_walk_reaches_nested_subcommands():
    paths = {" ".join(path) for path, _, _ in TREE}
    for expected in ("mmbench run", "mmbench sweep", "mmbench rank", "mmbench ravel score", "mmbench ravel flops",
                     "mmbench leaderboard submit", "mmbench leaderboard describe", "mmbench prepare",
                     "mmbench prepare obelics", "mmbench prepare youku"):
        assert expected in paths
    assert len(TREE) > 200


def test_every_option_and_positional_has_help():
    missing, suppressed = [], []
    for path, _, action in TREE:
        if isinstance(action, argparse._SubParsersAction):
            continue
        where = (" ".join(path), action_name(action))
        if action.help == argparse.SUPPRESS:
            if where not in DELIBERATELY_SUPPRESSED:
                suppressed.append(" ".join(where))
        elif not (action.help or "").strip():
            missing.append(" ".join(where))
    assert not missing, f"{len(missing)} options without help: {missing}"
    assert not suppressed, f"options hidden with argparse.SUPPRESS, not listed as deliberate: {suppressed}"


def test_every_subcommand_has_help():
    missing = []
    for path, _, action in TREE:
        if isinstance(action, argparse._SubParsersAction):
            helped = {choice.dest for choice in action._choices_actions if (choice.help or "").strip()}
            missing += [" ".join(path + (name,)) for name in action.choices if name not in helped]
    assert not missing, f"subcommands without help: {missing}"


def test_help_states_each_meaningful_default():
    wrong = []
    for path, parser, action in TREE:
        if isinstance(action, argparse._SubParsersAction) or not has_default_worth_showing(action):
            continue
        text = rendered_help(parser, action)
        if not any(s in text for s in default_spellings(action.default)):
            wrong.append(f"{' '.join(path)} {action_name(action)}: default {action.default!r} not in {text!r}")
    assert not wrong, "\n".join(wrong)


def test_every_mmbench_parser_uses_the_default_stating_formatter():
    parsers = {parser.prog: parser for path, parser, _ in TREE if path[:2] != ("mmbench", "prepare") or len(path) == 2}
    assert all(isinstance(p._get_formatter(), HelpFormatter) for p in parsers.values())


def test_formatter_appends_the_default_only_where_help_is_silent_about_it():
    p = build_parser()._subparsers._group_actions[0].choices["run"]
    text = p.format_help()
    assert "padded tokens per batch (default: 32768)" in " ".join(text.split())
    assert "(default: None)" not in text and "(default: False)" not in text and "(default: [])" not in text


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["ravel", "score", "--help"],
                                  ["leaderboard", "describe", "--help"], ["rank", "--help"]])
def test_help_renders(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 0
    assert "usage: mmbench" in capsys.readouterr().out


def test_each_command_is_registered_by_the_module_the_cli_names_for_it():
    """`mmbench.cli.COMMANDS` (a command line builds its own command's parser only) says which module registers
    each top-level command: the full parser has exactly those commands, and each module registers its own."""
    import mmbench.cli as top

    full = build_parser()._subparsers._group_actions[0].choices
    assert set(full) == set(top.COMMANDS)
    for name in top.COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        top.command_module(name).register(sub)
        assert {c for c, m in top.COMMANDS.items() if m == name} == set(sub.choices), name
    for argv in (["run", "--help"], ["-v", "compare", "a", "b"], ["leaderboard", "build"]):
        own = build_parser(argv)._subparsers._group_actions[0].choices
        assert set(own) == {c for c, m in top.COMMANDS.items() if m == top.COMMANDS[next(w for w in argv if w[0] != "-")]}
    for argv in (["-h", "run"], ["--version"], ["nonsense"], []):  # the whole listing
        assert set(build_parser(argv)._subparsers._group_actions[0].choices) == set(top.COMMANDS)


def test_the_readme_command_table_lists_every_command_help_lists():
    """Issue 47 #5: `--help` listed draws, overfit and ranks; the README's table did not."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Command line", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `mmbench ([\w-]+)", table, re.M))
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = sorted(set(sub.choices) - listed)
    assert not missing, f"commands `mmbench --help` lists that the README's command table does not: {missing}"
