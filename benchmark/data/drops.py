"""What a build read, kept and dropped: counts and a few examples per reason, printed and stored in the manifest.

Source readers and builders both count what they drop here, so nothing leaves a build unreported.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any


class DropLog:
    """Records a build read, kept and dropped, with a count (and a few examples) per reason."""

    def __init__(self, what: str = "records") -> None:
        self.what = what
        self.read = 0
        self.kept = 0
        self.reasons: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = defaultdict(list)

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
        return {"what": self.what, "read": self.read, "kept": self.kept,
                "dropped": {r: {"count": n, "examples": self.examples.get(r, [])}
                            for r, n in sorted(self.reasons.items())}}

    def check_share(self, max_share: float, allow_missing: bool, source: str) -> None:
        """Fail (ValueError, one line) when more than `max_share` of the input was dropped, unless allowed."""
        if self.read and self.dropped / self.read > max_share and not allow_missing:
            top = ", ".join(f"{r} ×{n}" for r, n in self.reasons.most_common(3))
            raise ValueError(f"{source}: {self.dropped} of {self.read} {self.what} unusable ({top}), more than "
                             f"{max_share:.0%}; fix the source or pass --param allow_missing=true")


def summary_lines(drops: dict[str, Any]) -> list[str]:
    """What a build prints at its end: for each log, read -> kept, then a count per reason."""
    lines = []
    for log in drops.values():
        lines.append(f"  {log['what']}: {log['read']} read -> {log['kept']} kept")
        for reason, d in log["dropped"].items():
            ex = f" (e.g. {', '.join(d['examples'][:2])})" if d["examples"] else ""
            lines.append(f"    dropped {d['count']}: {reason}{ex}")
    return lines
