"""Between-draw spread: how much a score moves when a task's items are drawn again.

A draw is one build of a task from the same sources and parameters with another seed. For each group
of items (all, each subset, each length bin, each cell of two axes such as length bin × depth) and each draw k with n_k
items, the score is the mean m_k of the per-item metric and its within-draw sampling error is
se_k = sd_k / sqrt(n_k) (sample sd, ddof = 1). Over K draws:

* between-draw sd  s_b = sd(m_1, ..., m_K) (ddof = 1), with the chi-square CI of a standard deviation,
  sqrt((K - 1) s_b^2 / chi2_{1-a/2, K-1}) to sqrt((K - 1) s_b^2 / chi2_{a/2, K-1}) (exact for normal m_k);
* within-draw error  s_w = sqrt(mean_k se_k^2), the root mean square of the draws' standard errors;
* ratio  s_b / s_w.

If a draw were nothing but a fresh sample of items from one population, s_b would estimate the same
thing as s_w and the ratio would be near 1 -- but only near: under pure item noise (K - 1) s_b^2 / s_w^2 follows
chi-square with K - 1 df, so the ratio alone ranges over sqrt(chi2_{a/2, K-1} / (K - 1)) to
sqrt(chi2_{1-a/2, K-1} / (K - 1)) (0.16 to 1.92 at three draws, 95 %), and p = P(chi2_{K-1} >= (K - 1) ratio^2)
tests for draw variance. A ratio above that range (small p) says the draws differ by more than
their items' sampling noise (the seed also changes which sources, families or fillers a draw is made
of), so one draw's confidence interval understates how much a score depends on the draw. A difference
between two models smaller than the between-draw sd of that difference (or, without paired draws, of
the scores) is one a new draw could reverse.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from mmbench.evaluators.stats._base import StatResult

DEFAULT_AXES = ("subset", "length_bin")
DEFAULT_CELL = ("length_bin", "depth")
DEFAULT_LEVEL = 0.95


@dataclass
class SpreadRow(StatResult):
    group: str
    draws: int
    mean: float                 # mean over draws of the group's score
    between_sd: float | None    # None: fewer than 2 draws hold the group
    between_low: float | None
    between_high: float | None
    within_se: float | None
    ratio: float | None
    items: float                # mean items per draw
    noise_low: float | None = None    # the range of the ratio under pure item noise (chi-square, K - 1 df)
    noise_high: float | None = None
    p_value: float | None = None      # P(ratio this high or higher | pure item noise)


def group_means(per_query: pd.DataFrame, metric: str, axes: Sequence[str] = DEFAULT_AXES,
                cell: Sequence[str] = DEFAULT_CELL) -> dict[str, tuple[float, float, int]]:
    """Group -> (mean, standard error, n) of one draw's per-item `metric`: all items, each value of each axis,
    and each cell of the two `cell` axes (e.g. length bin × depth), named "a=x, b=y"."""
    if metric not in per_query.columns:
        raise ValueError(f"per-query metric {metric!r} is missing")
    present = [a for a in axes if a in per_query.columns]
    out = {"all": mean_se(per_query[metric])}
    for axis in present:
        for value, rows in per_query.groupby(axis, sort=True):
            out[f"{axis}={value}"] = mean_se(rows[metric])
    if len(cell) == 2 and all(c in per_query.columns for c in cell):
        for (v1, v2), rows in per_query.groupby(list(cell), sort=True):
            out[f"{cell[0]}={v1}, {cell[1]}={v2}"] = mean_se(rows[metric])
    return out


def mean_se(values: pd.Series) -> tuple[float, float, int]:
    x = values.to_numpy(dtype=float)
    x = x[np.isfinite(x)]
    se = float(np.std(x, ddof=1) / np.sqrt(x.size)) if x.size > 1 else float("nan")
    return (float(x.mean()) if x.size else float("nan")), se, int(x.size)


def sd_interval(sd: float, draws: int, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """Chi-square confidence interval of a standard deviation estimated from `draws` values."""
    df = draws - 1
    tail = (1 - level) / 2
    return (float(np.sqrt(df * sd ** 2 / stats.chi2.ppf(1 - tail, df))),
            float(np.sqrt(df * sd ** 2 / stats.chi2.ppf(tail, df))))


def noise_range(draws: int, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """The central `level` range of the between / within ratio when draws differ by item noise alone."""
    df = draws - 1
    tail = (1 - level) / 2
    return float(np.sqrt(stats.chi2.ppf(tail, df) / df)), float(np.sqrt(stats.chi2.ppf(1 - tail, df) / df))


def ratio_p(ratio: float, draws: int) -> float:
    """P(chi2_{K-1} >= (K - 1) ratio^2): how often item noise alone gives a ratio this high."""
    return float(stats.chi2.sf((draws - 1) * ratio * ratio, draws - 1))


def spread_of(means: Sequence[float], ses: Sequence[float], items: Sequence[int], group: str,
              level: float = DEFAULT_LEVEL) -> SpreadRow:
    """Between-draw sd, its CI, the within-draw error and their ratio for one group's per-draw scores."""
    m, se = np.asarray(means, dtype=float), np.asarray(ses, dtype=float)
    k = int(m.size)
    within = float(np.sqrt(np.nanmean(se ** 2))) if np.isfinite(se).any() else None
    if k < 2:
        return SpreadRow(group, k, float(m.mean()), None, None, None, within, None, float(np.mean(items)))
    sd = float(np.std(m, ddof=1))
    low, high = sd_interval(sd, k, level)
    ratio = sd / within if within else None
    lo, hi = noise_range(k, level)
    return SpreadRow(group, k, float(m.mean()), sd, low, high, within, ratio, float(np.mean(items)), lo, hi,
                     None if ratio is None else ratio_p(ratio, k))


def draw_spread(draws: Sequence[pd.DataFrame], metric: str, axes: Sequence[str] = DEFAULT_AXES,
                cell: Sequence[str] = DEFAULT_CELL, level: float = DEFAULT_LEVEL) -> list[SpreadRow]:
    """One row per group present in any draw (see module doc), "all" first."""
    per_draw = [group_means(d, metric, axes, cell) for d in draws]
    groups = list(dict.fromkeys(g for d in per_draw for g in d))
    rows = []
    for g in groups:
        held = [d[g] for d in per_draw if g in d and np.isfinite(d[g][0])]
        if held:
            rows.append(spread_of([h[0] for h in held], [h[1] for h in held], [h[2] for h in held], g, level))
    return rows


def difference_spread(scores_a: Sequence[float], scores_b: Sequence[float]) -> float | None:
    """Between-draw sd of the difference of two models' scores on the same draws (None: fewer than 2 draws)."""
    a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    if a.shape != b.shape:
        raise ValueError("the two models' scores must be over the same draws")
    return float(np.std(a - b, ddof=1)) if a.size >= 2 else None


def within_spread(difference: float, spread: float | None) -> bool | None:
    """Whether a difference is smaller than the between-draw spread (a new draw could reverse it)."""
    return None if spread is None else bool(abs(difference) < spread)
