"""What `mmbench run` does with a results folder that already holds results (as mteb does: skip a run
whose settings all match, refuse a different one unless --overwrite), and undoing a folder it created."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmbench.results import SUMMARY


def previous_summary(out: Path) -> dict[str, Any] | None:
    """results.json of `out`, or None when there is none; an unreadable one counts as a different run."""
    from mmbench.results import ResultsError, load_results

    if not (Path(out) / SUMMARY).is_file():
        return None
    try:
        return load_results(Path(out)).summary
    except (ResultsError, OSError, ValueError, KeyError, TypeError) as exc:
        return {"unreadable": str(exc)}


def differences(summary: dict[str, Any], content_hash: str, identity: dict[str, Any], requested: str,
                limit: int | None, seed: int) -> list[str]:
    """Why the previous results are not the results of this run (empty: the same run, finished)."""
    if "unreadable" in summary:
        return [f"its results are unreadable ({summary['unreadable']})"]
    info = summary.get("mmbench", {})
    norm = json.loads(json.dumps(identity, default=str))
    checks = [("pool set", info.get("content_hash"), content_hash), ("model", info.get("model"), norm),
              ("--model", info.get("model_request"), requested), ("--limit", info.get("limit"), limit),
              ("--seed", info.get("seed"), seed)]
    out = [f"{what} differs ({_short(old)} there, {_short(new)} now)" for what, old, new in checks if old != new]
    if not out and info.get("n_failed_items"):
        out.append(f"{info['n_failed_items']} of its items failed")
    return out


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return repr(value.get("name", "?")) + " with other settings"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def missing_ancestor(path: Path) -> Path | None:
    """The outermost folder of `path` that does not exist yet (what creating it would create), or None."""
    path = Path(path).absolute()
    first = None
    while not path.exists():
        first, path = path, path.parent
    return first


def remove_if_empty(created: Path | None, leaf: Path) -> None:
    """Remove the empty folders from `leaf` up to `created` (the folders this run made), nothing else."""
    if created is None:
        return
    path = Path(leaf).absolute()
    while True:
        try:
            path.rmdir()  # only succeeds on an empty folder
        except OSError:
            return
        if path == created:
            return
        path = path.parent
