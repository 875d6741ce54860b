"""McNemar's test on paired binary outcomes (e.g. R@1 hit / miss per query).

The 2x2 table is laid out rows = system A (right, wrong), columns = system B (right, wrong)::

    [[both right,            A right / B wrong],
     [A wrong / B right,     both wrong       ]]

With discordant counts b (A only) and c (B only):

* b + c < EXACT_BELOW (25): exact two-sided binomial test, p = min(1, 2 * P[Binom(b+c, 1/2) <= min(b, c)]);
  the reported statistic is min(b, c) (as statsmodels does).
* otherwise: chi-squared with continuity correction, (|b - c| - 1)^2 / (b + c), 1 df.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy import stats

from mmbench.evaluators.stats._base import StatResult, Values, as_pair

EXACT_BELOW = 25


@dataclass
class McNemarResult(StatResult):
    table: list[list[int]]           # [[both right, A only], [B only, both wrong]]
    n: int
    a_only: int                      # b: A right, B wrong
    b_only: int                      # c: A wrong, B right
    statistic: float
    p_value: float
    method: str                      # "exact_binomial" or "chi2_continuity_corrected"
    df: int | None = None
    labels: list[str] = field(default_factory=lambda: ["A", "B"])


def contingency_table(a_correct: Values, b_correct: Values) -> np.ndarray:
    """2x2 counts of paired binary outcomes (values must be 0/1 or booleans)."""
    x, y = as_pair(a_correct, b_correct)
    for name, arr in (("a_correct", x), ("b_correct", y)):
        if not np.all((arr == 0) | (arr == 1)):
            raise ValueError(f"{name}: McNemar needs binary outcomes (0/1), got other values")
    xa, ya = x.astype(bool), y.astype(bool)
    return np.array([[np.sum(xa & ya), np.sum(xa & ~ya)], [np.sum(~xa & ya), np.sum(~xa & ~ya)]], dtype=int)


def mcnemar_table(table: Sequence[Sequence[int]] | np.ndarray, *, exact_below: int = EXACT_BELOW,
                  labels: Sequence[str] = ("A", "B")) -> McNemarResult:
    """McNemar's test from a 2x2 table laid out as in the module docstring."""
    t = np.asarray(table, dtype=int)
    if t.shape != (2, 2) or np.any(t < 0):
        raise ValueError(f"McNemar needs a 2x2 table of non-negative counts, got {t.tolist()}")
    b, c = int(t[0, 1]), int(t[1, 0])
    n_disc = b + c
    if n_disc < exact_below:
        stat = float(min(b, c))
        p = 1.0 if n_disc == 0 else float(min(1.0, 2.0 * stats.binom.cdf(min(b, c), n_disc, 0.5)))
        method, df = "exact_binomial", None
    else:
        stat = float((abs(b - c) - 1) ** 2 / n_disc)
        p = float(stats.chi2.sf(stat, 1))
        method, df = "chi2_continuity_corrected", 1
    return McNemarResult(table=t.tolist(), n=int(t.sum()), a_only=b, b_only=c, statistic=stat, p_value=p,
                         method=method, df=df, labels=list(labels))


def mcnemar(a_correct: Values, b_correct: Values, *, exact_below: int = EXACT_BELOW,
            labels: Sequence[str] = ("A", "B")) -> McNemarResult:
    """McNemar's test on per-query binary outcomes of two systems on the same queries."""
    return mcnemar_table(contingency_table(a_correct, b_correct), exact_below=exact_below, labels=labels)
