"""Validity: what a built pool set promises, checked on its own records, and what a build dropped.

Every task states its invariants (name -> one-sentence promise) and a check over a `PoolSet` that
yields a `Violation` for each broken promise. Builders repair or drop what fails *before* writing;
`write_valid_poolset` then re-checks the finished records and refuses to write a pool set that still
breaks an invariant, and records the validity report and the drop counts in the manifest.
`mmbench validate DIR` runs the same checks on any pool set folder.

A task names its checks in `TaskSpec.validator` and its builder passes the same module in: a module with
``INVARIANTS: dict[str, str]`` and ``check(ps, checked) -> Iterable[Violation]`` (it adds to
``checked[invariant]`` how many things it checked).
"""
from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Iterator

from mmbench.builders.checks import fits, leaks, lexical, pool_aware, probe
from mmbench.builders.parts.blinding import blind
from mmbench.data import work_cache
from mmbench.data.drops import DropLog
from mmbench.data.selection import design_groups
from mmbench.evaluators.stats.floors import DEFAULT_ALPHA, DEFAULT_POWER, design_floor
from mmbench.data.poolset import PoolSet, PoolSetError, write_poolset

MAX_LISTED = 50  # violations listed in a manifest; the count is always complete

COMMON_INVARIANTS = {
    "distinct_questions": "queries ranked against the same candidates ask different questions (normalised text)",
    "label_blind": "no label-blind baseline (stored position, ids, length, one metadata column) scores a subset's "
                   "P@1 further from chance than a two-sided binomial test allows at p < 1e-6 (mmbench.builders.checks.leaks)",
    "pool_order_blind": "no query-blind ranker that reads other pools over the same candidates (the slot whose "
                        "occupant changes between them) scores a subset's P@1 further from chance than a two-sided "
                        "binomial test allows at p < 1e-6 (mmbench.builders.checks.pool_aware)",
    "pool_centre_free": f"no query-blind pool medoid (the candidate whose word shingles overlap the rest of its pool "
                        f"most) scores a subset's, a dataset and difficulty's or all items' P@1 significantly above "
                        f"chance + {probe.MARGIN:g} (one-sided binomial p < {probe.ALPHA:g}; "
                        f"mmbench.builders.checks.pool_aware)",
    "lexical_baseline": f"no Hard subset (or dataset and difficulty) is lexically easier than its Easy one "
                        f"(whole-text BM25 P@1 higher, one-sided Fisher exact p < {lexical.ALPHA:g}), and in no group "
                        f"does the relevant candidate alone hold its query verbatim in most pools "
                        f"(mmbench.builders.checks.lexical)",
    "shortcut_probe": f"no classifier over query-blind candidate and pool features, over the numbers a query states "
                      f"against each candidate's counts, or over the candidate's own text (word, word-shape and "
                      f"character n-grams), trained {probe.FOLDS}-fold by query group and source record, scores a "
                      f"subset's, a dataset and difficulty's or all items' held-out P@1 significantly above chance + "
                      f"{probe.MARGIN:g} (one-sided binomial p < {probe.ALPHA:g}; mmbench.builders.checks.probe)",
}


class CheckCosts:
    """Wall and CPU seconds of each check of one `validate`. The probe's model fits run on threads beside the other
    checks (`fits.Pool`), so a check's CPU is its own thread's, with the fits' CPU added to the probe's, and the
    checks' walls overlap: `total` is the wall of the whole. Machine-dependent: printed by `mmbench build` and kept in
    the manifest's `check_costs`, never in the validity report (whose figures `mmbench validate` reproduces)."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.elapsed = 0.0
        self.threads = 1

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - wall
            self.add_cpu(name, time.thread_time() - cpu)

    def add_cpu(self, name: str, seconds: float) -> None:
        self.cpu[name] = self.cpu.get(name, 0.0) + seconds

    def to_dict(self) -> dict[str, Any]:
        return {"unit": "seconds", "threads": self.threads,
                "total": {"wall": round(self.elapsed, 3), "cpu": round(sum(self.cpu.values()), 3)},
                "checks": {k: {"wall": round(self.wall[k], 3), "cpu": round(self.cpu[k], 3)} for k in self.wall}}


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
    leak_audit: dict[str, Any] = field(default_factory=dict)  # leaks.summary, with pool_aware.summary under "pool_aware"
    breakdown: dict[str, Any] = field(default_factory=dict)   # a task's counts of what it checked (checks.breakdown)
    costs: CheckCosts = field(default_factory=lambda: CheckCosts())  # seconds per check; not in `to_dict`

    @property
    def ok(self) -> bool:
        return not self.violations

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(v.invariant for v in self.violations).items()))

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "invariants": dict(sorted(self.invariants.items())),
                "checked": dict(sorted(self.checked.items())), "violations": len(self.violations),
                "violations_by_invariant": self.counts(),
                "listed": [v.__dict__ for v in self.violations[:MAX_LISTED]], "leak_audit": self.leak_audit,
                **({"breakdown": self.breakdown} if self.breakdown else {})}

    def summary_line(self) -> str:
        if self.ok:
            return f"validity: all {len(self.invariants)} invariants hold"
        parts = ", ".join(f"{k} ×{n}" for k, n in self.counts().items())
        return f"validity: {len(self.violations)} violations ({parts}); first: {self.violations[0].line()}"


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


def validate(ps: PoolSet, module: ModuleType | None, media_root: Path | None = None) -> ValidityReport:
    """Run the common invariant checks and those of the task's checks `module` (None: the common ones only).

    The module is passed in by the task's builder (its own `mmbench.builders.checks.<task>`) or, for a
    pool set read from disk, looked up from the task registry (`mmbench.tasks.validation.validate`).
    `media_root` is where the media refs live (default: a written pool set's `media/`), for the probe's byte counts.
    """
    invariants = {**COMMON_INVARIANTS, **(getattr(module, "INVARIANTS", {}) if module else {})}
    report = ValidityReport(task=ps.task, invariants=invariants)
    if media_root is None and ps.root is not None:
        media_root = Path(ps.root) / "media"
    started, timed = time.perf_counter(), report.costs.timed
    with fits.Pool() as pool:     # the probe's fits run on its threads while the other checks are computed
        report.costs.threads = pool.workers
        with timed("shortcut_probe"):
            finish_probe = probe.start(ps, ps.provenance_columns, media_root, pool)
        with timed("distinct_questions"):
            repeated = list(check_distinct_questions(ps))
        with timed("label_blind"):
            scores = leaks.audit(ps, ps.provenance_columns)   # what the document tables hold, as an evaluator reads
        with timed("pool_aware"):     # both pool-aware rules: the order baselines and the centre (medoid once)
            medoid = {pool_aware.CENTRE: pool_aware.medoid_scores(ps)}
            pooled = pool_aware.audit(ps, computed=medoid)   # rankers that read the whole pool, never the query
            centred = pool_aware.centre(ps, medoid[pool_aware.CENTRE])
        with timed("lexical_ceiling"):     # the lexical baseline: its figures (its refusals are read from them)
            words = lexical.ceiling(ps)
        own = _task_checks(ps, module, report)
        with timed("shortcut_probe"):
            found = finish_probe()
        if pool.workers > 1:     # one worker runs each fit on this thread, inside the probe's own timing
            report.costs.add_cpu("shortcut_probe", pool.cpu)
    report.costs.elapsed = time.perf_counter() - started
    # the report is filled in the order the checks ran in one after another (violations, leak audit keys)
    report.violations.extend(repeated)
    report.checked["distinct_questions"] = len(ps.pools)
    report.leak_audit = leaks.summary(scores, ps.provenance_columns)
    report.violations.extend(Violation("label_blind", s.subset, s.line()) for s in scores if s.leaks)
    report.checked["label_blind"] = len(scores)
    report.leak_audit["pool_aware"] = pool_aware.summary(pooled, centred)
    enforced = [s for s in pooled if s.baseline in pool_aware.ENFORCED]
    report.violations.extend(Violation("pool_order_blind", s.subset, s.line()) for s in enforced if s.leaks)
    report.checked["pool_order_blind"] = len(enforced)
    report.violations.extend(Violation("pool_centre_free", c.group, c.line()) for c in centred if c.refuses)
    report.checked["pool_centre_free"] = len(centred)
    add_shortcut_probe(report, found, words)
    report.violations.extend(own)
    unknown = {v.invariant for v in report.violations} - set(invariants)
    if unknown:
        raise RuntimeError(f"{ps.task} validator reports undeclared invariants {sorted(unknown)}")
    return report


def _task_checks(ps: PoolSet, module: ModuleType | None, report: ValidityReport) -> list[Violation]:
    """The task's own invariants (counted into `report.checked`) and its breakdown."""
    if module is None:
        return []
    with report.costs.timed(f"{ps.task} invariants"):
        found = list(module.check(ps, report.checked))
        if hasattr(module, "breakdown"):
            report.breakdown = module.breakdown(ps)
    return found


def add_shortcut_probe(report: ValidityReport, found: list, words: dict[str, Any]) -> None:
    """The learned shortcut probe and the lexical baseline (each a refusal), into the report's leak audit."""
    report.leak_audit["shortcut_probe"] = probe.summary(found)
    report.violations.extend(Violation("shortcut_probe", s.subset, s.line()) for s in found if s.refuses)
    report.checked["shortcut_probe"] = sum(s.features in probe.ENFORCED_SETS for s in found)
    report.leak_audit["lexical_ceiling"] = words
    report.violations.extend(Violation("lexical_baseline", group, why)
                             for group, why in lexical.refusals(words["per_subset"]))
    report.checked["lexical_baseline"] = len(words["per_subset"])


def write_valid_poolset(ps: PoolSet, out: Path, checks: ModuleType | None, media_from: Path | None = None,
                        drops: dict[str, DropLog] | None = None) -> Path:
    """Check the finished records with the common and the task's `checks`, refuse an invalid pool set, and
    write it with its validity report. The ids are made opaque and each pool's candidates put in a seeded
    order first (`blinding.blind`), so nothing but the labels says which candidate is relevant."""
    blind(ps)
    ps.provenance_columns = provenance_columns(checks)
    report = validate(ps, checks, media_from)
    if not report.ok:
        learned = next((v for v in report.violations if v.invariant == "shortcut_probe"), None)
        also = f"; {learned.line()}" if learned is not None and learned is not report.violations[0] else ""
        raise PoolSetError(f"refusing to write an invalid {ps.task} pool set: {report.summary_line()}{also}")
    extra = {"validity": report.to_dict(), "dropped": {k: v.to_dict() for k, v in (drops or {}).items()},
             "resolution_floors": design_floors(ps), "check_costs": report.costs.to_dict()}
    written = write_poolset(ps, out, media_from=media_from, extra_manifest=extra)
    work_cache.flush()     # what this build counted, for the next build of the same sources
    return written


def provenance_columns(checks: ModuleType | None) -> tuple[str, ...]:
    """The meta keys a pool set stores in provenance.parquet, outside the tables an evaluator reads: the task's
    `PROVENANCE_COLUMNS` (how a record was built; several name the label) and blinding's `provenance` dict."""
    return tuple(sorted({*leaks.ALWAYS_PROVENANCE, *(getattr(checks, "PROVENANCE_COLUMNS", ()) if checks else ())}))


def design_floors(ps: PoolSet) -> dict[str, Any]:
    """The design-time resolution floor of every group a reader compares on (all items, each subset and axis
    value, each length x depth cell): the smallest paired difference in a 0/1 main metric that the group's items
    detect with 80 % power at alpha 0.05, assuming two models disagree on half the items. In the manifest, outside
    the content hash."""
    groups = design_groups(ps.pools)
    return {"alpha": DEFAULT_ALPHA, "power": DEFAULT_POWER, "basis": "design (discordance 0.5)",
            "groups": {name: {"n": n, "mde": design_floor(n).mde} for name, n in groups.items()}}
