"""Wilcoxon signed-rank test on paired continuous per-query scores (e.g. reciprocal rank).

Calls ``scipy.stats.wilcoxon(a, b, zero_method="wilcox", alternative="two-sided", method="auto")``:
zero differences are dropped (Wilcoxon's original treatment). scipy's "auto" uses the exact
null distribution when n <= 50 with no ties and no zeros, an exhaustive permutation test when
n <= 13 otherwise, and the normal approximation (with continuity correction off) beyond; the
reported `method` names which applied ("all differences zero" when no test is run, p = 1).
Effect size: the matched-pairs rank-biserial correlation
``r = (W+ - W-) / (W+ + W-)`` over the non-zero differences (positive: a > b).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from mmbench.evaluators.stats._base import StatResult, as_pair

ZERO_METHOD = "wilcox"
ALL_ZERO = "all differences zero"   # `method` when no test is run (nothing left after dropping zeros)


@dataclass
class WilcoxonResult(StatResult):
    n: int
    n_nonzero: int
    statistic: float          # scipy's two-sided statistic: min(W+, W-)
    p_value: float
    w_plus: float
    w_minus: float
    rank_biserial: float
    median_diff: float
    mean_diff: float
    zero_method: str = ZERO_METHOD
    method: str = "exact"
    note: str = ""


def _auto_method(d: np.ndarray) -> str:
    """Which null distribution scipy's method="auto" uses for differences `d`."""
    if d.size > 50:
        return "normal_approximation"
    nz = d[d != 0]
    if nz.size == d.size and np.unique(np.abs(nz)).size == nz.size:
        return "exact"
    return "exact_permutation" if d.size <= 13 else "normal_approximation"


def wilcoxon_signed_rank(a: Sequence[float], b: Sequence[float]) -> WilcoxonResult:
    x, y = as_pair(a, b)
    d = x - y
    nz = d[d != 0]
    n, n_nonzero, median_diff, mean_diff = int(d.size), int(nz.size), float(np.median(d)), float(d.mean())
    if nz.size == 0:
        return WilcoxonResult(statistic=0.0, p_value=1.0, w_plus=0.0, w_minus=0.0, rank_biserial=0.0,
                              method=ALL_ZERO, note="all paired differences are zero: no test is run, p = 1", n=n,
                              n_nonzero=n_nonzero, median_diff=median_diff, mean_diff=mean_diff)
    ranks = stats.rankdata(np.abs(nz))
    w_plus, w_minus = float(ranks[nz > 0].sum()), float(ranks[nz < 0].sum())
    method = _auto_method(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # scipy warns when it switches to the normal approximation
        res = stats.wilcoxon(x, y, zero_method=ZERO_METHOD, alternative="two-sided", method="auto")
    return WilcoxonResult(statistic=float(res.statistic), p_value=float(res.pvalue), w_plus=w_plus, w_minus=w_minus,
                          rank_biserial=(w_plus - w_minus) / (w_plus + w_minus), method=method, n=n,
                          n_nonzero=n_nonzero, median_diff=median_diff, mean_diff=mean_diff)
