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

LENGTHS = (8192, 16384, 32768)


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
                    C: int, seed: int) -> list[PoolItem]:
    """Easy and Hard items with exactly C candidates each (the same other queries at every length)."""
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
        own = hard[q][:C - 1]
        fill = [c for o in picked for c in hard[o]]
        if len(own) + len(fill) < C - 1:
            fill = [c for o in others for c in hard[o]]
        if len(own) + len(fill) < C - 1:
            raise ValueError(f"{ds}/{label}: not enough Hard variants to fill {C} candidates for {q}")
        extra = [fill[i] for i in sorted(rng.choice(len(fill), C - 1 - len(own), replace=False))]
        items.append(PoolItem(id=f"{ds}/hard/{label}/{q}", query_id=f"q-{ds}-{q}", subset=f"{ds}/hard/{label}",
                              candidate_ids=[relevant[q]] + own + extra, relevant_ids=[relevant[q]],
                              meta={**meta, "difficulty": "hard", "own_variants": len(own)}))
    return items
