"""Validity: what a built pool set promises, checked on its own records, and what a build dropped.

Every task states its invariants (name -> one-sentence promise) and a check over a `PoolSet` that
yields a `Violation` for each broken promise. Builders repair or drop what fails *before* writing;
`write_valid_poolset` then re-checks the finished records and refuses to write a pool set that still
breaks an invariant, and records the validity report and the drop counts in the manifest.
`mmbench validate DIR` runs the same checks on any pool set folder.

A task registers its checks through `TaskSpec.validator`, "module" naming a module with
``INVARIANTS: dict[str, str]`` and ``check(ps, checked) -> Iterable[Violation]`` (it adds to
``checked[invariant]`` how many things it checked).
"""
from __future__ import annotations

import importlib
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from mmbench.poolset import PoolSet, PoolSetError, write_poolset

MAX_LISTED = 50  # violations listed in a manifest; the count is always complete

COMMON_INVARIANTS = {
    "distinct_questions": "queries ranked against the same candidates ask different questions (normalised text)",
}


@dataclass(frozen=True)
class Violation:
    invariant: str
    item: str      # the pool item, query or candidate id the broken promise is about
    detail: str

    def line(self) -> str:
        return f"{self.item}: {self.invariant}: {self.detail}"


@dataclass
class ValidityReport:
    task: str
    invariants: dict[str, str]
    violations: list[Violation] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)  # invariant -> how many things were checked

    @property
    def ok(self) -> bool:
        return not self.violations

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(v.invariant for v in self.violations).items()))

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "invariants": dict(sorted(self.invariants.items())),
                "checked": dict(sorted(self.checked.items())), "violations": len(self.violations),
                "violations_by_invariant": self.counts(),
                "listed": [v.__dict__ for v in self.violations[:MAX_LISTED]]}

    def summary_line(self) -> str:
        if self.ok:
            return f"validity: all {len(self.invariants)} invariants hold"
        parts = ", ".join(f"{k} ×{n}" for k, n in self.counts().items())
        return f"validity: {len(self.violations)} violations ({parts}); first: {self.violations[0].line()}"


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


def normalise_question(text: str) -> str:
    """Lower-case words and digits of any script (Chinese Youku queries included), punctuation dropped."""
    return re.sub(r"[\W_]+", " ", text.casefold()).strip()


def query_text(doc) -> str:
    return " ".join(s.text for s in doc.segments if s.kind == "text")


def check_distinct_questions(ps: PoolSet) -> Iterable[Violation]:
    """No two queries ranked against the same candidate set are the same question."""
    queries = ps.query_by_id()
    groups: dict[tuple[str, ...], dict[str, str]] = defaultdict(dict)
    for item in ps.pools:
        key = tuple(sorted(item.candidate_ids))
        text = normalise_question(query_text(queries[item.query_id]))
        if not text:
            continue
        other = groups[key].get(text)
        if other is not None and other != item.query_id:
            yield Violation("distinct_questions", item.id, f"query {item.query_id} asks the same as {other}")
        groups[key].setdefault(text, item.query_id)


def task_checks(task: str):
    """The task's validator module (INVARIANTS, check), or None for a task that declares none."""
    from mmbench.tasks import get_task

    name = get_task(task).validator
    return importlib.import_module(name) if name else None


def validate(ps: PoolSet) -> ValidityReport:
    """Run the common and the task's own invariant checks on a pool set's records."""
    module = task_checks(ps.task)
    invariants = {**COMMON_INVARIANTS, **(getattr(module, "INVARIANTS", {}) if module else {})}
    report = ValidityReport(task=ps.task, invariants=invariants)
    report.violations.extend(check_distinct_questions(ps))
    report.checked["distinct_questions"] = len(ps.pools)
    if module is not None:
        report.violations.extend(module.check(ps, report.checked))
    unknown = {v.invariant for v in report.violations} - set(invariants)
    if unknown:
        raise RuntimeError(f"{ps.task} validator reports undeclared invariants {sorted(unknown)}")
    return report


def write_valid_poolset(ps: PoolSet, out: Path, media_from: Path | None = None,
                        drops: dict[str, DropLog] | None = None) -> Path:
    """Check the finished records, refuse an invalid pool set, and write it with its validity report."""
    report = validate(ps)
    if not report.ok:
        raise PoolSetError(f"refusing to write an invalid {ps.task} pool set: {report.summary_line()}")
    extra = {"validity": report.to_dict(), "dropped": {k: v.to_dict() for k, v in (drops or {}).items()}}
    return write_poolset(ps, out, media_from=media_from, extra_manifest=extra)
