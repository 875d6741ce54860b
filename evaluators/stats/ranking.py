"""Rank intervals and tiers: which places on a board the data can actually tell apart.

Input: per task, a matrix of per-item scores (models x items, the same items for every model). A
model's score is its mean over the items, or for several tasks the mean of its per-task means.

Rank interval (paired bootstrap over items). Each resample draws every task's items with replacement
(the same draw for all models, so their differences keep their pairing), recomputes every model's
score and ranks the models (1 = best; ties share the better rank). A model's interval is the
`level` central percentile range of its ranks over the resamples: "with 95 % confidence this model
places between a and b". Hall & Miller (2009), "Using the bootstrap to quantify the authority of an
empirical ranking", Ann. Statist. 37(6B).

Tiers (paired tests, Holm). Tier 1 is the best model and every model whose paired test against it
does not reject equality at `alpha` after Holm's correction over those comparisons; the rest are
tiered the same way around their best, and so on. Models in one tier are statistically tied with that
tier's best. The paired test is the t-test on per-item differences for one task; for several tasks
the difference of the mean of task means, D = (1/T) sum_t mean_t(d), is tested with its stratified
standard error sqrt(sum_t var_t(d) / n_t) / T against the normal distribution. Holm (1979), "A simple
sequentially rejective multiple test procedure", Scand. J. Statist. 6(2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from mmbench.evaluators.stats._base import SD_TOLERANCE, StatResult, sample_sd
from mmbench.evaluators.stats.correction import adjust_pvalues

DEFAULT_RESAMPLES = 1_000
DEFAULT_LEVEL = 0.95
DEFAULT_ALPHA = 0.05


@dataclass
class Ranking(StatResult):
    """Per model, in input order: score, rank (1 = best, ties share the better rank), rank interval, tier."""

    models: list[str]
    scores: list[float]
    ranks: list[int]
    rank_low: list[int]
    rank_high: list[int]
    tiers: list[int]
    tier_p_holm: list[float | None]  # Holm-adjusted p of the test against the tier's best (None for the best)
    resamples: int
    level: float
    alpha: float
    seed: int
    method: str = ("rank interval: paired bootstrap over items (within each task); tiers: paired tests against "
                   "each tier's best, Holm-adjusted")


def _as_matrices(tasks: Sequence[np.ndarray], n_models: int) -> list[np.ndarray]:
    mats = [np.asarray(t, dtype=np.float64) for t in tasks]
    if not mats:
        raise ValueError("no tasks to rank on")
    for i, m in enumerate(mats):
        if m.ndim != 2 or m.shape[0] != n_models or m.shape[1] == 0:
            raise ValueError(f"task {i}: expected a (models={n_models}) x (items>0) matrix, got shape {m.shape}")
        if not np.all(np.isfinite(m)):
            raise ValueError(f"task {i}: per-item scores must be finite (drop failed items first)")
    return mats


def competition_ranks(scores: np.ndarray) -> np.ndarray:
    """1 + the number of strictly better scores, along the last axis (ties share the better rank)."""
    s = np.asarray(scores, dtype=np.float64)
    return 1 + (s[..., None, :] > s[..., :, None]).sum(axis=-1)


def bootstrap_scores(tasks: Sequence[np.ndarray], resamples: int, seed: int) -> np.ndarray:
    """(resamples x models) mean of per-task means, each task's items drawn with replacement (paired)."""
    rng = np.random.default_rng(seed)
    total = np.zeros((resamples, tasks[0].shape[0]))
    for mat in tasks:
        n = mat.shape[1]
        counts = rng.multinomial(n, np.full(n, 1.0 / n), size=resamples)  # one draw shared by all models
        total += counts @ mat.T / n
    return total / len(tasks)


def paired_pvalue(tasks: Sequence[np.ndarray], a: int, b: int) -> float:
    """Two-sided p of 'models a and b have equal (mean of task-mean) scores' from per-item differences."""
    diffs = [m[a] - m[b] for m in tasks]
    if len(diffs) == 1:
        d = diffs[0]
        sd = sample_sd(d)
        if sd == 0.0:
            return 1.0 if abs(float(np.mean(d))) <= SD_TOLERANCE else 0.0
        t = float(np.mean(d)) / (sd / np.sqrt(d.size))
        return float(2 * stats.t.sf(abs(t), d.size - 1))
    mean = float(np.mean([np.mean(d) for d in diffs]))
    var = sum(sample_sd(d) ** 2 / d.size for d in diffs) / len(diffs) ** 2
    if var == 0.0:
        return 1.0 if abs(mean) <= SD_TOLERANCE else 0.0
    return float(2 * stats.norm.sf(abs(mean) / np.sqrt(var)))


def tiers(tasks: Sequence[np.ndarray], scores: np.ndarray, alpha: float = DEFAULT_ALPHA) -> tuple[list[int], list[float | None]]:
    """Tier of each model and the Holm-adjusted p of its test against its tier's best (see module doc)."""
    left = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    tier_of = [0] * len(scores)
    p_of: list[float | None] = [None] * len(scores)
    tier = 0
    while left:
        tier += 1
        best, rest = left[0], left[1:]
        tier_of[best] = tier
        adjusted = adjust_pvalues([paired_pvalue(tasks, best, j) for j in rest], "holm") if rest else np.array([])
        still = []
        for j, p in zip(rest, adjusted):
            if p > alpha:
                tier_of[j], p_of[j] = tier, float(p)
            else:
                still.append(j)
        left = still
    return tier_of, p_of


def rank_models(models: Sequence[str], tasks: Sequence[np.ndarray], *, resamples: int = DEFAULT_RESAMPLES,
                level: float = DEFAULT_LEVEL, alpha: float = DEFAULT_ALPHA, seed: int = 0) -> Ranking:
    """Scores, ranks, bootstrap rank intervals and Holm tiers of `models` over the per-item matrices `tasks`."""
    if not 0 < level < 1 or not 0 < alpha < 1:
        raise ValueError("level and alpha must lie strictly between 0 and 1")
    if resamples < 1:
        raise ValueError("resamples must be positive")
    mats = _as_matrices(tasks, len(models))
    scores = np.mean([m.mean(axis=1) for m in mats], axis=0)
    boot_ranks = competition_ranks(bootstrap_scores(mats, resamples, seed))
    tail = (1 - level) / 2
    low = np.floor(np.quantile(boot_ranks, tail, axis=0, method="lower")).astype(int)
    high = np.ceil(np.quantile(boot_ranks, 1 - tail, axis=0, method="higher")).astype(int)
    tier_of, p_of = tiers(mats, scores, alpha)
    return Ranking(models=list(models), scores=scores.tolist(), ranks=competition_ranks(scores).tolist(),
                   rank_low=low.tolist(), rank_high=high.tolist(), tiers=tier_of, tier_p_holm=p_of,
                   resamples=int(resamples), level=float(level), alpha=float(alpha), seed=int(seed))


def describe(r: Ranking, i: int) -> str:
    """One model's place in words."""
    lo, hi = r.rank_low[i], r.rank_high[i]
    where = f"rank {lo}" if lo == hi else f"rank {lo} to {hi}"
    return f"{r.models[i]}: {where} (marginal {r.level:.0%} interval); tier {r.tiers[i]} ({tier_words(r, i)})"


def tier_words(r: Ranking, i: int) -> str:
    """What model i's tier says: alone in it, the best of it, or tied with its best (named)."""
    mates = [j for j in range(len(r.models)) if r.tiers[j] == r.tiers[i]]
    if len(mates) == 1:
        return "alone in its tier: no other model is statistically tied with it"
    best = max(mates, key=lambda j: (r.scores[j], -j))
    how = f"at alpha {r.alpha:g}, Holm"
    if best == i:
        others = ", ".join(r.models[j] for j in mates if j != i)
        return f"the best of its tier; statistically tied with it: {others} ({how})"
    return f"statistically tied with {r.models[best]}, the best model of its tier ({how})"
