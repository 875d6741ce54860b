"""Retrieval metrics for one ranked list, and their aggregation over evaluation items.

Relevance is binary. Every item ranks its whole pool, so the ranking is complete.
Metric names follow mteb (`precision_at_1`, `ndcg_at_10`, ...).
"""
from __future__ import annotations

import math
from collections.abc import Sized
from typing import Iterable, Sequence

import numpy as np

PRECISION_KS = (1, 3, 5)
RECALL_KS = (1, 3, 5, 10)
MRR_KS = (10,)
NDCG_KS = (10,)
MAIN_METRIC = "precision_at_1"


def metric_names() -> list[str]:
    return ([f"precision_at_{k}" for k in PRECISION_KS] + [f"recall_at_{k}" for k in RECALL_KS]
            + [f"mrr_at_{k}" for k in MRR_KS] + ["mrr"] + [f"ndcg_at_{k}" for k in NDCG_KS])


def item_metrics(ranked_ids: Sequence[str], relevant_ids: Iterable[str]) -> dict[str, float]:
    """All metrics of one ranked list against a set of relevant ids."""
    relevant = set(relevant_ids)
    if not relevant:
        raise ValueError("an item needs at least one relevant candidate")
    hits = np.fromiter((c in relevant for c in ranked_ids), dtype=bool, count=len(ranked_ids))
    out: dict[str, float] = {}
    for k in PRECISION_KS:
        out[f"precision_at_{k}"] = float(hits[:k].sum()) / k
    for k in RECALL_KS:
        out[f"recall_at_{k}"] = float(hits[:k].sum()) / len(relevant)
    positions = np.flatnonzero(hits)
    first = int(positions[0]) + 1 if positions.size else None
    for k in MRR_KS:
        out[f"mrr_at_{k}"] = 1.0 / first if first is not None and first <= k else 0.0
    out["mrr"] = 1.0 / first if first is not None else 0.0
    for k in NDCG_KS:
        dcg = sum(1.0 / math.log2(p + 2) for p in positions if p < k)
        ideal = sum(1.0 / math.log2(p + 2) for p in range(min(k, len(relevant))))
        out[f"ndcg_at_{k}"] = dcg / ideal
    return out


def item_ceiling(metric: str, n_relevant: int) -> float:
    """The most one item can score on `metric`: P@k is capped at min(relevant, k) / k (0.2 for P@5 with one
    relevant candidate); every other metric at 1."""
    if metric.startswith("precision_at_"):
        k = int(metric.rsplit("_", 1)[1])
        return min(int(n_relevant), k) / k
    return 1.0


def metric_range(metric: str, relevant_ids: Iterable[Iterable[str]]) -> float:
    """The upper end c of the range [0, c] the items' scores on `metric` can take (1 where no item is given)."""
    counts = {len(r) if isinstance(r, Sized) else len(list(r)) for r in relevant_ids if r is not None}
    return max((item_ceiling(metric, n) for n in counts), default=1.0)


def chance_metrics(n: int, r: int) -> dict[str, float]:
    """Expected metrics of a uniformly random ranking of `n` candidates, `r` of them relevant: the chance
    level a system must beat (e.g. R@1 = 1/25, MRR = H(25)/25 for one relevant among 25)."""
    if not 1 <= r <= n:
        raise ValueError(f"need 1 <= relevant ({r}) <= candidates ({n})")
    # P(the first relevant candidate is at rank i) = C(n - i, r - 1) / C(n, r)
    first = [math.comb(n - i, r - 1) / math.comb(n, r) for i in range(1, n - r + 2)]
    out: dict[str, float] = {}
    for k in PRECISION_KS:
        out[f"precision_at_{k}"] = min(k, n) * r / n / k
    for k in RECALL_KS:
        out[f"recall_at_{k}"] = min(k, n) / n
    for k in MRR_KS:
        out[f"mrr_at_{k}"] = sum(p / i for i, p in enumerate(first, start=1) if i <= k)
    out["mrr"] = sum(p / i for i, p in enumerate(first, start=1))
    for k in NDCG_KS:  # each rank holds a relevant candidate with probability r / n
        dcg = sum(r / n / math.log2(p + 2) for p in range(min(k, n)))
        ideal = sum(1.0 / math.log2(p + 2) for p in range(min(k, r)))
        out[f"ndcg_at_{k}"] = dcg / ideal
    return out


def first_relevant_rank(ranked_ids: Sequence[str], relevant_ids: Iterable[str]) -> int | None:
    relevant = set(relevant_ids)
    for i, c in enumerate(ranked_ids, start=1):
        if c in relevant:
            return i
    return None


def mean_metrics(rows: Sequence[dict[str, float]], names: Sequence[str] | None = None) -> dict[str, float]:
    """Micro average: the mean of each metric over items."""
    names = list(names or metric_names())
    if not rows:
        return {n: float("nan") for n in names}
    return {n: float(np.mean([r[n] for r in rows])) for n in names}
