"""Percentile bootstrap confidence intervals (seeded numpy Generator).

Resampling draws ``rng.integers(0, n, (resamples, n))`` row by row from
``numpy.random.default_rng(seed)`` — the same draws as ``scipy.stats.bootstrap(...,
method="percentile", rng=np.random.default_rng(seed))`` — and the interval is the
``(1-confidence)/2`` and ``(1+confidence)/2`` linear quantiles of the resampled means.
Work is chunked so memory stays bounded; the draws do not depend on the chunking.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmbench.evaluators.stats._base import Values, StatResult, as_pair, as_vector

DEFAULT_RESAMPLES = 1_000          # per-metric CIs (seed 003: 1,000 resamples)
DEFAULT_DIFF_RESAMPLES = 10_000    # CI of a paired mean difference (seed 002: 10,000 resamples)
DEFAULT_CONFIDENCE = 0.95
_MAX_CELLS = 4_000_000             # resampled values held in memory at once


@dataclass
class BootstrapCI(StatResult):
    """Mean of a sample and its percentile bootstrap CI."""

    estimate: float
    low: float
    high: float
    n: int
    resamples: int
    confidence: float
    seed: int | None
    method: str = "percentile"


def resampled_means(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of `resamples` bootstrap resamples of `values` (drawn in chunks, same draws as one call)."""
    n = values.size
    chunk = max(1, min(resamples, _MAX_CELLS // max(n, 1)))
    out = np.empty(resamples, dtype=float)
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        idx = rng.integers(0, n, (size, n))
        out[start:start + size] = values[idx].mean(axis=1)
    return out


def _interval(dist: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(dist, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _check(resamples: int, confidence: float) -> None:
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def bootstrap_ci(values: Values, *, resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
                 confidence: float = DEFAULT_CONFIDENCE) -> BootstrapCI:
    """Percentile bootstrap CI of the mean of `values` (e.g. per-query R@1 for a CI of R@1)."""
    _check(resamples, confidence)
    x = as_vector(values)
    if x.size == 0:
        raise ValueError("bootstrap_ci: empty sample")
    dist = resampled_means(x, resamples, np.random.default_rng(seed))
    low, high = _interval(dist, confidence)
    return BootstrapCI(float(x.mean()), low, high, int(x.size), int(resamples), float(confidence), seed)


def bootstrap_mean_diff_ci(a: Values, b: Values, *, resamples: int = DEFAULT_DIFF_RESAMPLES,
                           seed: int | None = 0, confidence: float = DEFAULT_CONFIDENCE) -> BootstrapCI:
    """Paired percentile bootstrap CI of mean(a - b): queries are resampled together, keeping pairs."""
    _check(resamples, confidence)
    x, y = as_pair(a, b)
    return bootstrap_ci(x - y, resamples=resamples, seed=seed, confidence=confidence)
