"""`mmbench prepare SOURCE`: turn a public release into the layout a builder reads.

Each preparer is "module:function"(args: list[str]) -> int, taking its own options, so a release
that needs a preparation step (YoukuDenseCaption's CSV/JSON, OBELICS image URLs) ships it as a
command. The preparer modules live beside their source readers in mmbench.builders.sources.
"""
from __future__ import annotations

import argparse
import importlib

from mmbench.common.errors import CLIError
from mmbench.common.names import did_you_mean

PREPARERS: dict[str, tuple[str, str]] = {
    # name -> ("module:function", one-line help); each function parses its own arguments
    "obelics": ("mmbench.builders.sources.obelics:prepare",
                "OBELICS parquet: image URLs -> local files from an img2dataset folder or a URL map"),
    "youku": ("mmbench.builders.sources.youku_prepare:prepare_main",
              "YoukuDenseCaption release: meta_files/<Category>.csv or benchmark_files/grounding.json -> JSONL"),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prepare", help="convert a public dataset release into the layout its builder reads",
                       description="Sources: " + ", ".join(f"{k} ({h})" for k, (_, h) in sorted(PREPARERS.items())))
    p.add_argument("source", choices=sorted(PREPARERS) or None, help="which release to prepare")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the preparer's own options (see `mmbench prepare SOURCE -h`)")
    p.set_defaults(func=cmd_prepare)


def cmd_prepare(args: argparse.Namespace) -> int:
    if args.source not in PREPARERS:
        raise CLIError(f"unknown source {args.source!r}{did_you_mean(args.source, PREPARERS)}; known: {', '.join(sorted(PREPARERS)) or 'none'}")
    module, func = PREPARERS[args.source][0].split(":")
    return int(getattr(importlib.import_module(module), func)(args.args) or 0)
