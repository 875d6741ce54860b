"""Protocol checks of a board: submissions of one pool set must share the evaluation protocol, and
submissions of one model the setup (see `mmbench.results.protocol`). `leaderboard submit` checks a new
submission against the board; `leaderboard build` checks the board as a whole."""
from __future__ import annotations

import json
from typing import Any, Sequence

from mmbench.results.protocol import join_problems
from mmbench.results.store import SUMMARY

from mmbench.leaderboards.schema import Submission
from mmbench.leaderboards.store import Entry


def entry_protocol(e: Entry) -> tuple[str | None, dict[str, Any] | None]:
    """The stored submission's protocol id and record (None, None for results without one)."""
    try:
        block = json.loads((e.folder / SUMMARY).read_text()).get("mmbench") or {}
    except (OSError, ValueError, AttributeError):
        return None, None
    return block.get("protocol_id"), block.get("protocol")


def submission_protocol(sub: Submission) -> dict[str, Any] | None:
    try:
        return (json.loads(sub.files[SUMMARY]).get("mmbench") or {}).get("protocol")
    except (KeyError, ValueError, AttributeError):
        return None


def _row(e: Entry) -> tuple[str, str, str, dict[str, Any] | None]:
    return (f"{e.model_name} ({e.id})", e.model_name, e.content_hash, entry_protocol(e)[1])


def board_problems(entries: Sequence[Entry]) -> list[str]:
    return join_problems([_row(e) for e in entries if e.kind == "retrieval"])


def submission_problems(entries: Sequence[Entry], sub: Submission, replacing: str | None = None) -> list[str]:
    """What stops `sub` from joining the board's retrieval entries (the entry it replaces left out)."""
    if sub.kind != "retrieval":
        return []
    rows = [_row(e) for e in entries if e.kind == "retrieval" and e.id != replacing]
    new = (f"{sub.model_name} (this submission)", sub.model_name, sub.content_hash, submission_protocol(sub))
    return [p for p in join_problems([*rows, new]) if "(this submission)" in p]
