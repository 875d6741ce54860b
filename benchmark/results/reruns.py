"""Whether a results folder already holds the results of a run (as mteb does: a finished run with the same
settings is not run again). Used by `mmbench run` (skip, or refuse without --overwrite) and `mmbench sweep`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmbench.results.store import SUMMARY


def previous_summary(out: Path) -> dict[str, Any] | None:
    """results.json of `out`, or None when there is none; an unreadable one counts as a different run."""
    from mmbench.results.store import ResultsError, load_results

    if not (Path(out) / SUMMARY).is_file():
        return None
    try:
        return load_results(Path(out)).summary
    except (ResultsError, OSError, ValueError, KeyError, TypeError) as exc:
        return {"unreadable": str(exc)}


def differences(summary: dict[str, Any], content_hash: str, identity: dict[str, Any] | None, requested: str,
                limit: int | None, seed: int) -> list[str]:
    """Why the previous results are not the results of this run (empty: the same run, finished).
    `identity` None: the model is not loaded yet (a sweep's plan), so its identity is not compared."""
    if "unreadable" in summary:
        return [f"its results are unreadable ({summary['unreadable']})"]
    info = summary.get("mmbench", {})
    checks = [("pool set", info.get("content_hash"), content_hash),
              ("--model", info.get("model_request"), requested), ("--limit", info.get("limit"), limit),
              ("--seed", info.get("seed"), seed)]
    if identity is not None:
        checks.insert(1, ("model", info.get("model"), json.loads(json.dumps(identity, default=str))))
    out = [f"{what} differs ({_short(old)} there, {_short(new)} now)" for what, old, new in checks if old != new]
    if not out and info.get("n_failed_items"):
        out.append(f"{info['n_failed_items']} of its items failed")
    return out


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return repr(value.get("name", "?")) + " with other settings"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
