"""Simultaneous rank confidence sets per task and across a benchmark's tasks, and a prediction interval for
a model's rank on a new task of the benchmark.

Method (Mogstad, Romano, Shaikh & Wilhelm 2024, "Inference for ranks with applications to mobility across
neighbourhoods and academic achievement across countries", Review of Economic Studies 91(1); the bootstrap
idea goes back to Hall & Miller 2009). For task t with models j = 1..M and per-item scores paired across
models, theta_tj is model j's mean score. Every pairwise difference Delta_tjk = theta_tj - theta_tk gets a
standard error se_tjk = sd(d_tjk) / sqrt(n_t) from the paired per-item differences. A paired bootstrap over
items (the same resample for all models of a task, tasks resampled independently) gives the distribution of

    max over the pairs (and, for the benchmark-wide sets, over the tasks) of |Delta*_tjk - Delta_tjk| / se*_tjk,

studentised by each resample's own standard error se* (the bootstrap-t, which keeps the coverage close
to nominal at a hundred or so items where the plain percentile bootstrap falls short),

whose 1 - alpha quantile c makes every interval Delta_tjk ± c se_tjk hold at once with probability about
1 - alpha. Model j's rank (1 + the number of models with a strictly higher true score) then lies in

    [1 + #{k: Delta_tkj - c se_tkj > 0},  M - #{k: Delta_tjk - c se_tjk > 0}]

for every j (and every t) with at least that probability: the sets are simultaneous, so they may be read
together ("these models are the top three"). They are exact when all models tie (the least favourable
case) and conservative otherwise.

Prediction interval for a new task. If the benchmark's tasks are exchangeable draws from a population of
tasks, a model's rank on a new task is exchangeable with its ranks r_1..r_T on the T tasks it has, so the
order statistics [r_(l), r_(T+1-l)] hold the new rank with probability at least (T + 1 - 2l) / (T + 1)
(the distribution-free prediction interval of Wilks 1941, as used in conformal prediction). l is the
largest with that coverage >= 1 - alpha; with too few tasks (l = 0) the interval is every rank, 1..M, and
the report says which coverage T tasks can guarantee at most.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mmbench.evaluators.stats._base import StatResult
from mmbench.evaluators.stats.ranking import competition_ranks

DEFAULT_ALPHA = 0.05
DEFAULT_RESAMPLES = 2_000


@dataclass
class RankSets(StatResult):
    models: list[str]
    tasks: list[str]
    scores: list[list[float]]           # task x model
    ranks: list[list[int]]              # task x model, 1 = best
    low: list[list[int]]                # simultaneous rank sets, per task (simultaneous over all tasks)
    high: list[list[int]]
    critical: float                     # c of the benchmark-wide sets
    per_task_low: list[list[int]]       # rank sets simultaneous within each task alone
    per_task_high: list[list[int]]
    per_task_critical: list[float]
    alpha: float
    resamples: int
    seed: int
    method: str = ("simultaneous rank confidence sets from the bootstrap max-|t| of all pairwise differences "
                   "(Mogstad, Romano, Shaikh & Wilhelm 2024)")


@dataclass
class RankPrediction(StatResult):
    models: list[str]
    low: list[int]
    high: list[int]
    coverage: float          # guaranteed coverage of the interval
    best_possible: float     # the most a non-trivial interval from T tasks can guarantee: (T - 1) / (T + 1)
    n_tasks: int
    method: str = "order statistics of the model's per-task ranks (distribution-free, Wilks 1941)"


def _pairs(m: int) -> list[tuple[int, int]]:
    return list(itertools.permutations(range(m), 2))


def _check(tasks: Sequence[np.ndarray], n_models: int) -> list[np.ndarray]:
    mats = [np.asarray(t, dtype=np.float64) for t in tasks]
    if not mats:
        raise ValueError("no tasks to rank on")
    for i, m in enumerate(mats):
        if m.ndim != 2 or m.shape[0] != n_models or m.shape[1] < 2:
            raise ValueError(f"task {i}: expected a (models={n_models}) x (items>=2) matrix, got shape {m.shape}")
        if not np.all(np.isfinite(m)):
            raise ValueError(f"task {i}: per-item scores must be finite")
    return mats


def _studentised_max(mat: np.ndarray, resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per task: the estimated differences (pairs), their se, and per resample the max |t| over the pairs."""
    m, n = mat.shape
    pairs = _pairs(m)
    j, k = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    diffs = mat[j] - mat[k]                                   # pairs x items
    est = diffs.mean(axis=1)
    se = diffs.std(axis=1, ddof=1) / np.sqrt(n)
    picks = rng.integers(0, n, size=(resamples, n))           # one resample shared by all models
    drawn = diffs[:, picks]                                   # pairs x resamples x items
    boot = drawn.mean(axis=2).T                               # resamples x pairs
    boot_sq = (drawn ** 2).mean(axis=2).T
    boot_se = np.sqrt(np.maximum(boot_sq - boot ** 2, 0.0) * n / (n - 1) / n)  # bootstrap-t: se of each resample
    safe = np.where((se > 0) & (boot_se > 0), boot_se, np.inf)  # identical models: no uncertainty, never counts
    stat = np.abs(boot - est) / safe
    return est, se, stat.max(axis=1) if stat.size else np.zeros(resamples)


def _sets(est: np.ndarray, se: np.ndarray, c: float, m: int) -> tuple[list[int], list[int]]:
    better = np.zeros((m, m), dtype=bool)                     # better[j, k]: j is significantly above k
    for (j, k), e, s in zip(_pairs(m), est, se):
        better[j, k] = e - c * s > 0
    low = 1 + better.sum(axis=0)                              # models significantly above j
    high = m - better.sum(axis=1)                             # models significantly below j
    return low.tolist(), high.tolist()


def rank_sets(models: Sequence[str], tasks: Sequence[np.ndarray], task_names: Sequence[str] | None = None, *,
              alpha: float = DEFAULT_ALPHA, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> RankSets:
    """Simultaneous rank sets per task, both within each task alone and over all tasks at once (module doc)."""
    if not 0 < alpha < 1 or resamples < 1:
        raise ValueError("alpha must lie in (0, 1) and resamples be positive")
    m = len(models)
    mats = _check(tasks, m)
    names = list(task_names) if task_names is not None else [f"task{i}" for i in range(len(mats))]
    rng = np.random.default_rng(seed)
    parts = [_studentised_max(mat, resamples, rng) for mat in mats]
    joint = np.max(np.stack([p[2] for p in parts]), axis=0)
    c_all = float(np.quantile(joint, 1 - alpha))
    low, high, plow, phigh, pcrit = [], [], [], [], []
    for est, se, stat in parts:
        lo, hi = _sets(est, se, c_all, m)
        low.append(lo)
        high.append(hi)
        c = float(np.quantile(stat, 1 - alpha))
        lo, hi = _sets(est, se, c, m)
        plow.append(lo)
        phigh.append(hi)
        pcrit.append(c)
    scores = [mat.mean(axis=1) for mat in mats]
    return RankSets(models=list(models), tasks=names, scores=[s.tolist() for s in scores],
                    ranks=[competition_ranks(s).tolist() for s in scores], low=low, high=high, critical=c_all,
                    per_task_low=plow, per_task_high=phigh, per_task_critical=pcrit, alpha=float(alpha),
                    resamples=int(resamples), seed=int(seed))


def new_task_rank_interval(ranks: Sequence[Sequence[int]], models: Sequence[str],
                           alpha: float = DEFAULT_ALPHA) -> RankPrediction:
    """Prediction interval of each model's rank on a new task from its ranks on T tasks (`ranks`: task x model)."""
    r = np.asarray(ranks, dtype=int)
    if r.ndim != 2 or r.shape[1] != len(models) or r.shape[0] < 1:
        raise ValueError(f"ranks: expected a (tasks) x (models={len(models)}) matrix, got shape {r.shape}")
    t, m = r.shape
    lidx = int(np.floor((t + 1) * alpha / 2))
    while lidx > 0 and (t + 1 - 2 * lidx) / (t + 1) < 1 - alpha:
        lidx -= 1
    ordered = np.sort(r, axis=0)
    if lidx == 0:
        low, high, cover = [1] * m, [m] * m, 1.0
    else:
        low, high = ordered[lidx - 1].tolist(), ordered[t - lidx].tolist()
        cover = (t + 1 - 2 * lidx) / (t + 1)
    return RankPrediction(models=list(models), low=low, high=high, coverage=float(cover),
                          best_possible=float((t - 1) / (t + 1)), n_tasks=int(t))
