"""Uncertainty of a rank correlation over a handful of items (RAVEL: a few encoders per language model).

* `spearman_ci`: Spearman ρ with a Fisher-z confidence interval using the Bonett–Wright (2000)
  standard error ``sqrt((1 + ρ²/2) / (n − 3))``; undefined for n ≤ 3.
* `spearman_null_interval`: the central interval of ρ under a random predictor (every ranking of
  the n items equally likely): exact by enumerating permutations for n ≤ 8, otherwise a seeded
  Monte-Carlo over random permutations. Over 6 encoders a random predictor reaches |ρ| ≥ 0.83 one
  time in twenty, so a single ρ = 0.71 is no evidence by itself.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from mmbench.evaluators.stats._base import StatResult, as_pair

EXACT_MAX_N = 8
NULL_DRAWS = 20_000


@dataclass
class CorrelationCI(StatResult):
    estimate: float | None
    low: float | None
    high: float | None
    n: int
    confidence: float
    method: str


def spearman_ci(x: Sequence[float], y: Sequence[float], *, confidence: float = 0.95) -> CorrelationCI:
    """Spearman ρ of (x, y) and its Fisher-z interval (Bonett–Wright SE); low/high None when n ≤ 3 or ρ is undefined."""
    a, b = as_pair(x, y)
    n = int(a.size)
    method = "Fisher z, Bonett-Wright standard error"
    if n < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return CorrelationCI(None, None, None, n, confidence, method)
    rho = float(stats.spearmanr(a, b).statistic)
    return CorrelationCI(rho, *fisher_interval(rho, n, confidence), n, confidence, method)


def fisher_interval(rho: float, n: int, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Fisher-z interval of a Spearman ρ over n items (Bonett–Wright SE); (None, None) when n ≤ 3."""
    if n <= 3 or not math.isfinite(rho):
        return None, None
    r = min(max(rho, -1 + 1e-12), 1 - 1e-12)
    se = math.sqrt((1 + r * r / 2) / (n - 3))
    z = stats.norm.ppf(0.5 + confidence / 2)
    centre = math.atanh(r)
    return math.tanh(centre - z * se), math.tanh(centre + z * se)


def spearman_null_interval(n: int, *, confidence: float = 0.95, seed: int = 0) -> tuple[float, float] | None:
    """Central `confidence` interval of Spearman ρ between n untied items and a uniformly random ranking of them."""
    if n < 3:
        return None
    base = np.arange(n, dtype=float)
    if n <= EXACT_MAX_N:
        perms = np.array(list(itertools.permutations(range(n))), dtype=float)
    else:
        rng = np.random.default_rng(seed)
        perms = np.array([rng.permutation(n) for _ in range(NULL_DRAWS)], dtype=float)
    d2 = ((perms - base) ** 2).sum(axis=1)
    rho = 1.0 - 6.0 * d2 / (n * (n * n - 1))
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(rho, [alpha, 1 - alpha], method="inverted_cdf")
    return float(low), float(high)
