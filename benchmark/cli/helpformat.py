"""How `mmbench ... --help` shows an option's default: one rule for every command.

An option whose help does not already state its default gets " (default: VALUE)" appended, but only
where the default says something (not None, False or an empty list: "not given" needs no words).
"""
from __future__ import annotations

import argparse
import re

# help that already names the default: "(default: ...)", "(..., default)", "%(default)s"
STATES_DEFAULT = re.compile(r"\(default|default[:)]|%\(default")


def has_default_worth_showing(action: argparse.Action) -> bool:
    default = action.default
    if default is None or default is False or default == [] or default is argparse.SUPPRESS:
        return False
    return bool(action.option_strings)  # positionals take no default from the user


class HelpFormatter(argparse.HelpFormatter):
    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if has_default_worth_showing(action) and not STATES_DEFAULT.search(text):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """ArgumentParser using HelpFormatter; subparsers made from it are Parsers too (argparse uses type(self))."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
