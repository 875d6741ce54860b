"""How a model's name is shown to people: a local path by its last folder, never the path itself.

A run of `--model /home/me/ckpt/gme-ft` records that path as the model's name. Tables, figures
and boards show `gme-ft (local)` instead: the path says nothing to a reader and may expose a home
directory. Registered names and hub ids (`Alibaba-NLP/gme-Qwen2-VL-2B-Instruct`: one '/') are shown
as they are. `mmbench compare`, `mmbench report` and the leaderboard all use `display_name`.
"""
from __future__ import annotations

import re
from typing import Iterable

_WINDOWS_PATH = re.compile(r"^[A-Za-z]:[\\/]")


def looks_like_path(name: str) -> bool:
    """True for '/x/y', './y', '../y', '~/y', 'C:\\y', 'a\\b', or anything with two or more '/' (a hub id has one)."""
    name = name.strip()
    return (name.startswith(("/", "./", "../", "~", "\\")) or bool(_WINDOWS_PATH.match(name)) or "\\" in name
            or name.count("/") >= 2)


def display_name(name: str) -> str:
    """The name shown: a path becomes its last component followed by ' (local)'; anything else is kept."""
    if not looks_like_path(name):
        return name
    parts = [p for p in re.split(r"[\\/]+", name.strip()) if p not in ("", ".", "..", "~")]
    return (parts[-1] if parts else "local model") + " (local)"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """' (did you mean 'gme-2b'?)' for the known name closest to a mistyped one, or '' when none is close."""
    import difflib

    candidates = {k.lower().replace("_", "-"): k for k in known}
    close = difflib.get_close_matches(name.lower().replace("_", "-"), list(candidates), n=1, cutoff=0.7)
    return f" (did you mean {candidates[close[0]]!r}?)" if close else ""
