"""Scoring every evaluation item at once: ranking, every metric and the seeded tie-break, as arrays.

`score_items` gives the same rows, bit for bit, as scoring each item on its own with `runner._score_item`:
each item's scores come from the same `PoolScorer` call; items of one pool size are ranked together by the same
stable sort of the rounded, negated scores, and only items whose rounded scores tie take the per-item seeded
permutation (`rank`); the metrics add the same terms in the same order as `evaluators.metrics.item_metrics`
(each nDCG gain is `1 / math.log2(p + 2)`, summed from rank 1 on). Items with a missing or failed vector keep the
per-item path, which writes their error.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Callable, Sequence

import numpy as np

from mmbench.evaluators.metrics import MRR_KS, NDCG_KS, PRECISION_KS, RECALL_KS
from mmbench.data.poolset import PoolItem

ItemScorer = Callable[[PoolItem], dict[str, Any]]
SCORE_DECIMALS = 6  # ranking treats scores equal to this many decimals as ties (float noise)


def rank(item_id: str, candidate_ids: Sequence[str], scores: np.ndarray, seed: int) -> np.ndarray:
    """Order by score, breaking ties by a permutation seeded from the item id (chance, not id order).

    Without ties (and with finite scores) the order is the descending sort itself, whatever the permutation,
    so the seeded generator is only built when some rounded scores are equal."""
    keys = -np.round(scores, SCORE_DECIMALS)
    order = np.argsort(keys, kind="stable")
    if np.all(np.isfinite(keys)) and not np.any(np.diff(keys[order]) == 0):
        return order
    return np.lexsort((tiebreak_keys(item_id, len(candidate_ids), seed), keys))


def tiebreak_keys(item_id: str, n: int, seed: int) -> np.ndarray:
    """The seeded permutation `rank` orders equal scores by (lower first), for a pool of n candidates."""
    digest = hashlib.sha256(f"{seed}:{item_id}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little")).permutation(n)


def _gains(k: int) -> list[float]:
    return [1.0 / math.log2(p + 2) for p in range(k)]


def _ideal(k: int, n_relevant: int) -> float:
    return sum(_gains(min(k, n_relevant)))


def rank_block(block: Sequence[PoolItem], scores: np.ndarray, seed: int) -> np.ndarray:
    """The order of each row of `scores` (items with pools of one size), as `rank` gives it item by item: the
    stable sort of the rounded, negated scores, or, for a row with ties or a non-finite score, the same keys
    ordered by the item's seeded permutation."""
    keys = -np.round(scores, SCORE_DECIMALS)
    order = np.argsort(keys, axis=1, kind="stable")
    sorted_keys = np.take_along_axis(keys, order, axis=1)
    tied = ~np.all(np.isfinite(keys), axis=1) | np.any(np.diff(sorted_keys, axis=1) == 0, axis=1)
    for i in (int(j) for j in np.flatnonzero(tied)):
        order[i] = np.lexsort((tiebreak_keys(block[i].id, scores.shape[1], seed), keys[i]))
    return order


def block_metrics(hits: np.ndarray, n_relevant: np.ndarray) -> dict[str, np.ndarray]:
    """`item_metrics` for each row of a boolean hit matrix (ranked order), with each row's count of relevant ids."""
    out: dict[str, np.ndarray] = {}
    for k in PRECISION_KS:
        out[f"precision_at_{k}"] = hits[:, :k].sum(axis=1) / k
    for k in RECALL_KS:
        out[f"recall_at_{k}"] = hits[:, :k].sum(axis=1) / n_relevant
    any_hit = hits.any(axis=1)
    first = np.where(any_hit, hits.argmax(axis=1) + 1, 0)
    for k in MRR_KS:
        out[f"mrr_at_{k}"] = np.where(any_hit & (first <= k), 1.0 / np.maximum(first, 1), 0.0)
    out["mrr"] = np.where(any_hit, 1.0 / np.maximum(first, 1), 0.0)
    for k in NDCG_KS:
        dcg = np.zeros(len(hits))
        for p, gain in enumerate(_gains(min(k, hits.shape[1]))):
            dcg = dcg + np.where(hits[:, p], gain, 0.0)
        ideal = np.array([_ideal(k, int(r)) for r in n_relevant])
        out[f"ndcg_at_{k}"] = dcg / ideal
    return out


def score_items(items: Sequence[PoolItem], ready: Sequence[bool], scores_of: Callable[[PoolItem], np.ndarray],
                per_item: ItemScorer, seed: int) -> list[dict[str, Any]]:
    """One row per item, in the items' order: `per_item(p)` where `ready` is false, the block path otherwise."""
    rows: list[dict[str, Any] | None] = [None if ok else per_item(p) for p, ok in zip(items, ready)]
    by_size: dict[int, list[int]] = {}
    for i, (p, ok) in enumerate(zip(items, ready)):
        if ok:
            by_size.setdefault(len(p.candidate_ids), []).append(i)
    for size, idx in by_size.items():
        block = [items[i] for i in idx]
        scores = np.stack([scores_of(p) for p in block]) if size else np.zeros((len(block), 0))
        order = rank_block(block, scores, seed)
        ranked = [[p.candidate_ids[j] for j in o] for p, o in zip(block, order.tolist())]
        relevant = [set(p.relevant_ids) for p in block]
        if any(not r for r in relevant):
            raise ValueError("an item needs at least one relevant candidate")
        hits = np.array([[c in rel for c in r] for r, rel in zip(ranked, relevant)], dtype=bool).reshape(len(block), size)
        metrics = block_metrics(hits, np.array([len(r) for r in relevant]))
        first = np.where(hits.any(axis=1), hits.argmax(axis=1) + 1, 0).tolist()
        sorted_scores = np.take_along_axis(scores, order, axis=1).tolist()
        columns = {m: v.tolist() for m, v in metrics.items()}
        for j, (i, p) in enumerate(zip(idx, block)):
            row: dict[str, Any] = {"item_id": p.id, "query_id": p.query_id, "subset": p.subset,
                                   "relevant_ids": list(p.relevant_ids), "ranked_ids": ranked[j],
                                   "scores": sorted_scores[j], "first_relevant_rank": first[j] or None,
                                   **{m: v[j] for m, v in columns.items()}, "error": None}
            for key, value in p.meta.items():
                row.setdefault(key, value if not isinstance(value, (dict, list)) else json.dumps(value, sort_keys=True))
            rows[i] = row
    return rows  # type: ignore[return-value]
