"""Pools the two real-data tasks share (Multi-Source Reasoning, Logical Summarization).

Their pool lengths, parameter checks and filler text, how a candidate is assembled from units and
described in its metadata, and how Easy and Hard items of exactly C candidates are drawn.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from mmbench.builders.parts.expansion import Filler, Unit
from mmbench.data.tokens import length_label
from mmbench.builders.parts.seeding import seeded_rng
from mmbench.data.documents import Document
from mmbench.data.poolset import PoolItem, source_fingerprint
from mmbench.data.tokens import UnifiedTokenCounter
from mmbench.builders.designs import POOL_LENGTHS

LENGTHS = POOL_LENGTHS


def check_pool_params(lengths: Sequence[int], datasets: Sequence[str], known: Sequence[str],
                      queries_per_dataset: int, candidates_per_query: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Validate the parameters both real-data tasks share; lengths come back sorted."""
    datasets = tuple(datasets)
    if set(datasets) - set(known) or not datasets:
        raise ValueError(f"datasets must be among {tuple(known)}")
    if candidates_per_query < 2 or queries_per_dataset < candidates_per_query:
        raise ValueError("need 2 <= candidates_per_query <= queries_per_dataset")
    return tuple(sorted(int(x) for x in lengths)), datasets


def default_filler(path: str | None, counter: UnifiedTokenCounter, sources: dict[str, str]) -> Filler:
    """Unrelated filler text: a given plain-text file, else Python's Language Reference."""
    if path:
        sources["filler"] = source_fingerprint(path)
        return Filler.from_text(Path(path).read_text(encoding="utf-8"), counter.tokenizer, Path(path).name)
    from mmbench.builders.sources.needles import sample_background_text

    sources["filler"] = "pydoc_data.topics (Python Language Reference)"
    return Filler.from_text(sample_background_text(), counter.tokenizer, "pydoc")


def candidate_meta(ds: str, length: int, difficulty: str, rid: str) -> dict[str, Any]:
    return {"dataset": ds, "length_bin": length_label(length), "length_tokens": length, "difficulty": difficulty,
            "record_id": rid}


def candidate_doc(cid: str, units: list[Unit], meta: dict) -> Document:
    return Document(id=cid, segments=[u.segment for u in units], tokens=sum(u.tokens for u in units), meta=meta)


def unit_log(units: list[Unit]) -> list[list]:
    """[role, source, tokens] per segment: how the candidate was assembled."""
    return [[u.role, u.source, u.tokens] for u in units]


def easy_hard_pools(ds: str, length: int, order: list[str], relevant: dict[str, str], hard: dict[str, list[str]],
                    C: int, seed: int, whole_families: bool = False) -> list[PoolItem]:
    """Easy and Hard items with exactly C candidates each (the same other queries at every length).

    A Hard item holds its query's family (the relevant candidate and its own variants) and, to fill C, other
    queries' variants drawn by seed. With `whole_families` (Multi-Source Reasoning, issue 33) it is filled with
    whole families of other queries of the same shape instead: another query's relevant candidate and as many of
    its variants, cut short only in the last family. So every candidate sits in a family like the query's, and a
    reader that looks at the pool but not at the query cannot tell which family is the query's (a family alone
    among singletons is found by its overlap with the rest of the pool).
    """
    label = length_label(length)
    items = []
    for q in order:
        others = [o for o in order if o != q]
        if len(others) < C - 1:
            raise ValueError(f"{ds}/{label}: {len(order)} queries cannot fill {C} candidates per query")
        rng = seeded_rng(seed, "pool", ds, q)
        picked = [others[i] for i in sorted(rng.choice(len(others), C - 1, replace=False))]
        meta = {"dataset": ds, "length_bin": label, "length_tokens": length}
        easy = [relevant[q]] + [relevant[o] for o in picked]
        items.append(PoolItem(id=f"{ds}/easy/{label}/{q}", query_id=f"q-{ds}-{q}", subset=f"{ds}/easy/{label}",
                              candidate_ids=easy, relevant_ids=[relevant[q]], meta={**meta, "difficulty": "easy"}))
        if not whole_families:
            items.append(_mixed_hard(ds, label, q, others, picked, relevant, hard, C, rng, meta))
            continue
        own = hard[q][:C - 1]
        ids = [relevant[q]] + own
        rest = [others[i] for i in rng.permutation(len(others))]
        rest.sort(key=lambda o: len(hard[o]) < len(own))       # families of the query's shape first (stable)
        for o in rest:
            if len(ids) >= C or not own:   # a query without variants: other queries' variants alone, as before
                break
            ids += ([relevant[o]] + _some(hard[o], min(len(own), len(hard[o])), rng))[:C - len(ids)]
        if not own:
            fill = [c for o in others for c in hard[o]]
            ids += _some(fill, min(len(fill), C - 1), rng)
        if len(ids) < C:
            raise ValueError(f"{ds}/{label}: not enough Hard variants to fill {C} candidates for {q}")
        items.append(PoolItem(id=f"{ds}/hard/{label}/{q}", query_id=f"q-{ds}-{q}", subset=f"{ds}/hard/{label}",
                              candidate_ids=ids, relevant_ids=[relevant[q]],
                              meta={**meta, "difficulty": "hard", "own_variants": len(own)}))
    return items


def _mixed_hard(ds, label, q, others, picked, relevant, hard, C, rng, meta) -> PoolItem:
    """The Hard item of version 1: the query's own variants topped up with other queries' variants."""
    own = hard[q][:C - 1]
    fill = [c for o in picked for c in hard[o]]
    if len(own) + len(fill) < C - 1:
        fill = [c for o in others for c in hard[o]]
    if len(own) + len(fill) < C - 1:
        raise ValueError(f"{ds}/{label}: not enough Hard variants to fill {C} candidates for {q}")
    extra = [fill[i] for i in sorted(rng.choice(len(fill), C - 1 - len(own), replace=False))]
    return PoolItem(id=f"{ds}/hard/{label}/{q}", query_id=f"q-{ds}-{q}", subset=f"{ds}/hard/{label}",
                    candidate_ids=[relevant[q]] + own + extra, relevant_ids=[relevant[q]],
                    meta={**meta, "difficulty": "hard", "own_variants": len(own)})


def _some(ids: list[str], k: int, rng) -> list[str]:
    """`k` of `ids` drawn by `rng`, in their stored order (all of them, untouched, when k covers them)."""
    if k >= len(ids):
        return list(ids)
    return [ids[i] for i in sorted(rng.choice(len(ids), k, replace=False))]
