"""`--limit` intervals against their purpose: over 300 seeds, the 95 % interval of a limited run covers the
full run's score in at least 93 % on items shaped like each task's design cells, at limits 12, 30 and 100, and
is never a point where the full run's scores vary.

The truth is drawn apart from the estimate: per seed, every design cell gets a hit rate (often 0 or 1, the
cells that made the textbook interval collapse, else uniform), every item a 0/1 score (or an MRR-like score in
{0, 1/3, 1/2, 1}) from it; the full run's mean is the truth; the limited run is `select_sample` with that seed
and its estimate `stratified_mean` with the cells' sizes (as a `--limit` run records them).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from mmbench.data.poolset import PoolItem
from mmbench.data.selection import cell_key, cell_of, select_sample, strata_axes
from mmbench.evaluators.stats.stratified import stratified_mean

# design cells of each task (reduced builds where the full one is large): axis -> values, items per cell
SHAPES = {
    "multi_source_reasoning": ({"subset": ["hotpotqa", "mmdocrag"], "difficulty": ["easy", "hard"],
                                "length_bin": ["8K", "16K", "32K", "64K"]}, 9),
    "visual_grounding": ({"anchor_kind": ["text", "image"], "background_modality": ["text", "mixed", "image"],
                          "length_bin": ["256", "512"], "depth": ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]}, 25),
    "logical_summarization": ({"subset": ["a", "b"], "difficulty": ["easy", "hard"],
                               "length_bin": ["4K", "8K", "16K", "32K"]}, 10),
    "temporal_summarization": ({"difficulty": ["easy", "hard"], "length_bin": ["1K", "2K", "4K", "8K"]}, 16),
    "flickr_hard_negatives": ({"caption_index": ["0", "1", "2", "3", "4"]}, 100),
}
LIMITS = (12, 30, 100)
SEEDS = 300


def _pools(shape):
    axes, per_cell = shape
    pools = []
    for cell in itertools.product(*axes.values()):
        meta = {a: v for a, v in zip(axes, cell) if a != "subset"}
        subset = dict(zip(axes, cell)).get("subset", "")
        for i in range(per_cell):
            pid = f"{'-'.join(cell)}-{i}"
            pools.append(PoolItem(id=pid, query_id=pid, subset=subset, candidate_ids=[], relevant_ids=["r"], meta=meta))
    return sorted(pools, key=lambda p: p.id)


def _coverage(task, limit, continuous=False):
    pools = _pools(SHAPES[task])
    axes = strata_axes(pools)
    cells = [cell_key(cell_of(p, axes)) for p in pools]
    sizes: dict[str, int] = {}
    for c in cells:
        sizes[c] = sizes.get(c, 0) + 1
    index = {p.id: i for i, p in enumerate(pools)}
    names = sorted(sizes)
    cover, points = 0, 0
    for seed in range(SEEDS):
        rng = np.random.default_rng([44, seed, limit, len(pools)])
        kind = rng.choice(3, size=len(names), p=[0.25, 0.25, 0.5])
        rate = np.where(kind == 0, 0.0, np.where(kind == 1, 1.0, rng.uniform(0.05, 0.95, len(names))))
        cell_rate = dict(zip(names, rate))
        p_item = np.array([cell_rate[c] for c in cells])
        hit = rng.random(len(pools)) < p_item
        scores = hit * (1.0 if not continuous else 1.0) + (~hit) * (rng.choice([0, 1 / 3, 1 / 2], len(pools))
                                                                    if continuous else 0.0)
        truth = float(scores.mean())
        chosen = [index[p.id] for p in select_sample(pools, limit, seed)]
        est = stratified_mean(scores[chosen], [cells[i] for i in chosen], sizes, axes)
        cover += est.ci_low <= truth <= est.ci_high
        points += est.ci_high - est.ci_low <= 0
    return cover / SEEDS, points


@pytest.mark.parametrize("task", sorted(SHAPES))
def test_limit_intervals_cover_at_least_93_percent_and_are_never_points(task):
    for limit in LIMITS:
        for continuous in ((False, True) if task == "multi_source_reasoning" else (False,)):
            coverage, points = _coverage(task, limit, continuous)
            assert coverage >= 0.93 and points == 0, (task, limit, continuous, coverage, points)
