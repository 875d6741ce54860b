"""Logical Summarization pools: where each kept document goes, its candidates, and the pools.

Shared by the text (GovReport) and page-image (MMLongBench) halves of the builder: a kept
document (`Placed`) has its placements in length bins (`PoolOptions.placements`: one bin by its
own length, or, with `length_control=padding`, every bin it fits), its Hard variants (vetted:
one that would not take away anything the summary describes is dropped and counted), and
`assemble` makes the Easy candidate and Hard variants in each bin and the constant-C/Q pools.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from mmbench.data.documents import Document, Text

from mmbench.builders.parts.expansion import Unit, replace_units
from mmbench.builders.parts.length_bins import Bin, Placement, no_bin_reason, place
from mmbench.builders.parts.pools import candidate_doc, candidate_meta, easy_hard_pools, unit_log
from mmbench.builders.parts.query_filter import Decision
from mmbench.data.drops import DropLog, bin_counts_text

PARTS = {"first_25": (0.0, 0.25), "last_25": (0.75, 1.0), "middle_50": (0.25, 0.75)}


@dataclass
class Placed:
    """A kept document: its query, its own units, where it goes, and its Hard variants."""

    rid: str
    summary: str
    units: list[Unit]
    placements: list[Placement]
    variants: dict[str, Any] = field(default_factory=dict)
    decision: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return sum(u.tokens for u in self.units)


LENGTH_MEANING = {
    "natural": "a candidate's own document length lies in its bin's range (lo, L]; filler only lifts a document "
               "just short of a bin past its lower bound, at most max_filler_share of the candidate",
    "padding": "every document that fits a bin is padded at its end with unrelated filler to the bin's nominal "
               "length L; one document appears in every bin it fits",
}


@dataclass(frozen=True)
class PoolOptions:
    """The build's length control and pool sizes."""

    mode: str
    max_filler_share: float
    bins: list[Bin]
    per_bin: int
    C: int
    lookalikes: int
    seed: int
    progress: bool

    def placements(self, n: int, step: int = 1) -> tuple[list[Placement], str]:
        """Where a document of `n` own tokens goes ([] and the reason when nowhere)."""
        if self.mode == "padding":
            got = [Placement(b, b.nominal, b.nominal - n) for b in self.bins if n <= b.nominal]
            return got, "" if got else f"longer than the largest bin ({self.bins[-1].nominal} tokens)"
        p = place(n, self.bins, self.max_filler_share, step)
        return ([p], "") if p else ([], no_bin_reason(n, self.bins, self.max_filler_share))

    def room(self, counts: dict[str, int], placements: list[Placement]) -> bool:
        """Natural mode caps each bin at `per_bin` documents; padding mode caps the dataset."""
        if self.mode == "padding":
            return counts.get("all", 0) < self.per_bin
        return counts.get(placements[0].bin.label, 0) < self.per_bin

    def full(self, counts: dict[str, int]) -> bool:
        if self.mode == "padding":
            return counts.get("all", 0) >= self.per_bin
        return all(counts.get(b.label, 0) >= self.per_bin for b in self.bins)

    def count(self, counts: dict[str, int], placements: list[Placement]) -> None:
        key = "all" if self.mode == "padding" else placements[0].bin.label
        counts[key] = counts.get(key, 0) + 1

    def measure(self, log: DropLog, n: int, placements: list[Placement]) -> None:
        """Natural mode: count a document of `n` own tokens against every bin, long enough for it (its own
        length past the bin's lower bound, or lifted into it by the allowed filler) or too short."""
        if self.mode != "natural":
            return
        placed = {pl.bin for pl in placements}
        for b in self.bins:
            log.measure(b.label, n > b.lo or b in placed)


def query_doc(ds: str, p: Placed, counter) -> Document:
    return Document(id=f"q-{ds}-{p.rid}", segments=[Text(p.summary)], tokens=counter.text(p.summary),
                    meta={"dataset": ds, "record_id": p.rid, "length_bins": [x.bin.label for x in p.placements],
                          "summary_filter": p.decision})


def rule_reason(d: Decision) -> str:
    return "summary: " + str(d.details.get("rule", "rules")).replace("_", " ")


MISSES_SUMMARY = "the replaced part holds none of the paragraphs (pages) that best match the summary's sentences"


def vet(p: Placed, vlog: DropLog, failed: str) -> None:
    """Count each variant; drop one whose replaced part takes away nothing the summary describes (its
    sentences' best-matching paragraphs all survive), as it would still answer the query."""
    best = p.decision.get("best_paragraphs")
    for part, v in p.variants.items():
        if v is None:
            vlog.drop(failed, f"{p.rid}/{part}")
        elif best is not None and not any(v[0] <= i < v[1] for i in best):
            p.variants[part] = None
            vlog.drop(MISSES_SUMMARY, f"{p.rid}/{part}")
        else:
            vlog.keep()


def duplicate_of(kept: list[Placed], summary: str, keys: list) -> str | None:
    """The kept document this one duplicates: the same summary, or one's segments all within the other's
    (a query would then have two answers)."""
    from mmbench.builders.parts.validity import normalise_question

    text, mine = normalise_question(summary), set(keys)
    for p in kept:
        theirs = {u.segment.text if isinstance(u.segment, Text) else u.segment.ref for u in p.units}
        if normalise_question(p.summary) == text or mine <= theirs or theirs <= mine:
            return p.rid
    return None


def bin_members(kept: list[Placed], o: PoolOptions) -> dict[str, list[str]]:
    return {b.label: [p.rid for p in kept if any(x.bin == b for x in p.placements)] for b in o.bins}


# ---- candidates and pools -----------------------------------------------------------------

def note_bins(log: DropLog, kept: list[Placed], o: PoolOptions) -> None:
    """Natural mode: each bin's kept documents against the candidates_per_query it needs to be built."""
    if o.mode != "natural":
        return
    for b in o.bins:
        n = sum(1 for p in kept for pl in p.placements if pl.bin == b)
        log.note_bin(b.label, kept=n, needed=o.C, built=n >= o.C)


def assemble(ds: str, kept: list[Placed], o: PoolOptions, padded, filler_name: str, ops: tuple[str, str],
             log: DropLog):
    """Each kept document's Easy candidate and Hard variants in each bin it is placed in, and the pools. A bin
    with fewer than candidates_per_query documents refuses the build (an empty or thin bin would silently
    change what the task measures); the error carries the per-bin counts of `log`."""
    candidates, pools = [], []
    note_bins(log, kept, o)
    for b in tqdm(o.bins, desc=f"{ds} bins", disable=not o.progress):
        here = [(p, pl) for p in kept for pl in p.placements if pl.bin == b]
        if len(here) < o.C:
            counts = f"; {log.what} measured per bin: {bin_counts_text(log.bins)}" if log.bins else ""
            raise ValueError(f"{ds} bin {b.describe()}: {len(here)} documents fit, {o.C} are needed "
                             f"(candidates_per_query); add documents, lower candidates_per_query or leave the bin "
                             f"out of lengths{counts}")
        relevant, hard = {}, {}
        for p, pl in here:
            units = padded(p, pl)
            total = sum(u.tokens for u in units)
            meta = {**candidate_meta(ds, b.nominal, "easy", p.rid), "length_range": [b.lo, b.nominal],
                    "length_control": o.mode, "document_tokens": p.tokens, "filler_tokens": total - p.tokens,
                    "filler_share": round((total - p.tokens) / total, 4)}
            base = f"ls-{ds}-{b.label}-{p.rid}"
            candidates.append(candidate_doc(base, units, {**meta, "provenance": {
                "original": f"{ds}:{p.rid}", "operation": ops[0] if total > p.tokens else "whole_document",
                "filler": filler_name if total > p.tokens else None, "units": unit_log(units)}}))
            relevant[p.rid], hard[p.rid] = base, []
            for part, variant in p.variants.items():
                if variant is None:
                    continue
                a, b_, repl, info = variant
                broken = replace_units(units, a, b_, repl)
                cid = f"{base}-hard-{part}"
                candidates.append(candidate_doc(cid, broken, {**meta, "difficulty": "hard", "provenance": {
                    "original": f"{ds}:{p.rid}", "operation": ops[1], "part": part, "counterpart": base,
                    "replaced": {"segments": [a, b_], "tokens": sum(u.tokens for u in units[a:b_]),
                                 "units": [u.source for u in units[a:b_]]},
                    "replacement": info, "units": unit_log(broken)}}))
                hard[p.rid].append(cid)
        items = easy_hard_pools(ds, b.nominal, [p.rid for p, _ in here], relevant, hard, o.C, o.seed,
                                whole_families=True)
        for item in items:
            item.meta["length_range"] = [b.lo, b.nominal]
        pools += items
    return candidates, pools
