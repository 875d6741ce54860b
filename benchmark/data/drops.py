"""What a build read, kept and dropped: counts and a few examples per reason, printed and stored in the manifest.

Source readers and builders both count what they drop here, so nothing leaves a build unreported. A builder
that bins documents by their own length also counts, per requested length bin, how many source units it
measured were long enough for the bin and how many too short (`DropLog.measure`), and notes what it made of
each bin (`DropLog.note_bin`: kept, needed, built); a bin left empty is named in one printed line.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any


# outcomes of measuring a unit against a bin beyond long enough / too short, and how they are printed
OTHER_OUTCOMES = {"too_long": "too long", "no_frame_size": "no frame size within the tolerance"}


class DropLog:
    """Records a build read, kept and dropped, with a count (and a few examples) per reason."""

    def __init__(self, what: str = "records") -> None:
        self.what = what
        self.read = 0
        self.kept = 0
        self.reasons: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = defaultdict(list)
        self.bins: dict[str, dict[str, Any]] = {}   # length bin label -> long_enough, too_short, and notes

    def measure(self, label: str, long_enough: bool, other: str | None = None) -> None:
        """Count one measured source unit against the length bin `label`: long enough for it, or too short.
        `other` (one of OTHER_OUTCOMES) counts a unit that does not go in for another reason under that name."""
        b = self._bin(label)
        if long_enough or other is None:
            b["long_enough" if long_enough else "too_short"] += 1
            return
        if other not in OTHER_OUTCOMES:
            raise ValueError(f"unknown length-bin outcome {other!r}; use one of {sorted(OTHER_OUTCOMES)}")
        b[other] = b.get(other, 0) + 1

    def note_bin(self, label: str, **fields: Any) -> None:
        """Record what the build made of bin `label` (e.g. kept=3, needed=3, built=True)."""
        self._bin(label).update(fields)

    def _bin(self, label: str) -> dict[str, Any]:
        return self.bins.setdefault(label, {"long_enough": 0, "too_short": 0})

    def keep(self, n: int = 1) -> None:
        self.read += n
        self.kept += n

    def drop(self, reason: str, example: str | None = None) -> None:
        self.read += 1
        self.reasons[reason] += 1
        if example is not None and len(self.examples[reason]) < 5:
            self.examples[reason].append(str(example))

    @property
    def dropped(self) -> int:
        return self.read - self.kept

    def to_dict(self) -> dict[str, Any]:
        out = {"what": self.what, "read": self.read, "kept": self.kept,
               "dropped": {r: {"count": n, "examples": self.examples.get(r, [])}
                           for r, n in sorted(self.reasons.items())}}
        if self.bins:
            out["length_bins"] = {label: dict(b) for label, b in self.bins.items()}
        return out

    def check_share(self, max_share: float, allow_missing: bool, source: str) -> None:
        """Fail (ValueError, one line) when more than `max_share` of the input was dropped, unless allowed."""
        if self.read and self.dropped / self.read > max_share and not allow_missing:
            top = ", ".join(f"{r} ×{n}" for r, n in self.reasons.most_common(3))
            raise ValueError(f"{source}: {self.dropped} of {self.read} {self.what} unusable ({top}), more than "
                             f"{max_share:.0%}; fix the source or pass --param allow_missing=true")


def bin_counts_text(bins: dict[str, dict[str, Any]]) -> str:
    """Per length bin, in one line: `64k: 3 long enough, 9 too short, 3 kept of 3 needed; 128k: ...`."""
    parts = []
    for label, b in bins.items():
        text = f"{label}: {b['long_enough']} long enough, {b['too_short']} too short"
        text += "".join(f", {b[key]} {words}" for key, words in OTHER_OUTCOMES.items() if b.get(key))
        if "kept" in b:
            text += f", {b['kept']} kept" + (f" of {b['needed']} needed" if "needed" in b else "")
        if "queries" in b:
            text += f", {b['queries']} queries"
        if b.get("built") is False:
            text += " (not built)"
        parts.append(text)
    return "; ".join(parts)


def empty_bins_line(bins: dict[str, dict[str, Any]]) -> str | None:
    """The one line naming the requested bins a build left empty (None when it built them all)."""
    empty = [(label, b) for label, b in bins.items() if b.get("built") is False]
    if not empty:
        return None
    return "length bins left empty (not built): " + ", ".join(
        f"{label} ({b['long_enough']} of {_measured(b)} long enough)" for label, b in empty)


def _measured(b: dict[str, Any]) -> int:
    """How many units were measured against a bin, whatever the outcome."""
    return b["long_enough"] + b["too_short"] + sum(b.get(key, 0) for key in OTHER_OUTCOMES)


def summary_lines(drops: dict[str, Any]) -> list[str]:
    """What a build prints at its end: for each log, read -> kept, then a count per reason, then (for a log
    that measured lengths) the counts per length bin and a line naming any bin left empty."""
    lines = []
    for log in drops.values():
        lines.append(f"  {log['what']}: {log['read']} read -> {log['kept']} kept")
        for reason, d in log["dropped"].items():
            ex = f" (e.g. {', '.join(d['examples'][:2])})" if d["examples"] else ""
            lines.append(f"    dropped {d['count']}: {reason}{ex}")
        bins = log.get("length_bins")
        if bins:
            lines.append(f"    per length bin: {bin_counts_text(bins)}")
            empty = empty_bins_line(bins)
            if empty:
                lines.append(f"    {empty}")
    return lines
