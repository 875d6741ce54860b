"""Invariants of a declarative task's pool sets (builders/declarative.py), checked on the built records.

The design they check against is the one the manifest records (`builder.length_bins`, `pool_size`,
`distractors`, `depths`); the source ids are the built ids blinding keeps as provenance (`d:<id>` for a
document, `<haystack>@<needle>@<depth>` for a needle-style candidate), checked against each query's
`relevant_source_ids` (provenance: what the source declared relevant).
"""
from __future__ import annotations

from typing import Any, Iterable

from mmbench.builders.parts.validity import Violation
from mmbench.data.poolset import PoolSet

# the query's relevant source ids name its label: kept in provenance.parquet, out of the tables evaluators read
PROVENANCE_COLUMNS = ("relevant_source_ids",)
INVARIANTS = {
    "length_in_bin": "each candidate's unified token count lies in its length bin's range (lo, hi]",
    "pool_in_bin": "every candidate of an item is in the item's length bin (its subset)",
    "pool_size": "each item ranks pool_size candidates (distractors none: every document of its bin)",
    "relevant_declared": "an item's relevant candidates are documents the source names relevant to its query "
                         "(needle-style: the one candidate holding the query's needle)",
    "depth_recorded": "needle-style: each candidate records the share of its tokens before its needle, within one "
                      "insertion unit of the depth its item asked for",
}


def _built_id(doc) -> str:
    prov = doc.meta.get("provenance") or {}
    return str(prov.get("built_id", doc.id)) if isinstance(prov, dict) else doc.id


def check(ps: PoolSet, checked: dict[str, int]) -> Iterable[Violation]:
    for name in INVARIANTS:
        checked.setdefault(name, 0)
    b: dict[str, Any] = ps.builder or {}
    bins = {k: tuple(v) for k, v in (b.get("length_bins") or {}).items()}
    size, policy, needle = b.get("pool_size"), b.get("distractors"), bool(b.get("depths"))
    cands, queries = ps.candidate_by_id(), ps.query_by_id()
    for c in ps.candidates:
        checked["length_in_bin"] += 1
        name = str(c.meta.get("length_bin"))
        lo, hi = bins.get(name, (0, -1))
        if not lo < c.tokens <= hi:
            yield Violation("length_in_bin", c.id, f"{c.tokens} tokens outside {name} ({lo}, {hi}]")
    for item in ps.pools:
        checked["pool_in_bin"] += 1
        off = [c for c in item.candidate_ids if cands[c].meta.get("length_bin") != item.subset]
        if off:
            yield Violation("pool_in_bin", item.id, f"{len(off)} candidates outside bin {item.subset}")
        checked["pool_size"] += 1
        if policy != "none" and len(item.candidate_ids) != size:
            yield Violation("pool_size", item.id, f"{len(item.candidate_ids)} candidates, not {size}")
        checked["relevant_declared"] += 1
        query = queries[item.query_id]
        qid, wanted = _built_id(query)[2:], set(query.meta.get("relevant_source_ids") or ())
        for r in item.relevant_ids:
            got = _built_id(cands[r])
            source = got.split("@")[1] if needle and "@" in got else got[2:]
            if source not in wanted:
                yield Violation("relevant_declared", item.id, f"relevant {got} is not a relevant document of {qid}")
        if needle:
            yield from _depths(item, cands, checked)


def _depths(item, cands, checked: dict[str, int]) -> Iterable[Violation]:
    target = item.meta.get("depth_target")
    for cid in item.candidate_ids:
        checked["depth_recorded"] += 1
        c = cands[cid]
        if c.meta.get("depth_target") != target or not isinstance(c.meta.get("depth"), (int, float)):
            yield Violation("depth_recorded", cid, f"depth target {c.meta.get('depth_target')} in an item asking {target}")
        elif abs(float(c.meta["depth"]) - float(target)) > 0.5:
            yield Violation("depth_recorded", cid, f"needle at {c.meta['depth']} for depth {target}")
