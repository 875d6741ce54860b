"""Paired t-test on per-query scores, with a bootstrap CI of the mean difference and Cohen's d_z.

Effect size: **Cohen's d_z**, the standardised mean of the paired differences,
``d_z = mean(a - b) / sd(a - b)`` with the sample standard deviation (ddof = 1).
It equals ``t / sqrt(n)``. (It is not Cohen's d_av, which divides by the average of the
two groups' standard deviations.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from mmbench.evaluators.stats._base import SD_TOLERANCE, StatResult, Values, as_pair, sample_sd
from mmbench.evaluators.stats.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_DIFF_RESAMPLES, bootstrap_mean_diff_ci

EFFECT_SIZE_KIND = "cohen_dz: mean(a-b) / sd(a-b), sd with ddof=1 (Cohen's d for paired differences)"


@dataclass
class PairedTTestResult(StatResult):
    """Two-sided paired t-test of mean(a) = mean(b); difference is a - b."""

    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    sd_diff: float
    t: float
    df: int
    p_value: float
    ci_low: float            # percentile bootstrap CI of mean_diff
    ci_high: float
    ci_resamples: int
    confidence: float
    cohens_dz: float
    effect_size: str = EFFECT_SIZE_KIND
    note: str = ""


def cohens_dz(a: Values, b: Values) -> float:
    """Cohen's d_z for paired data: mean of differences over their sample sd (ddof=1)."""
    x, y = as_pair(a, b)
    d = x - y
    if d.size < 2:
        return float("nan")
    sd = sample_sd(d)
    if sd == 0.0:
        return 0.0 if abs(float(d.mean())) <= SD_TOLERANCE else math.copysign(math.inf, float(d.mean()))
    return float(d.mean()) / sd


def _single_pair(x: np.ndarray, y: np.ndarray, resamples: int, confidence: float) -> PairedTTestResult:
    """One pair: means and difference only; t, p, d_z and the CI are not defined (NaN)."""
    nan = float("nan")
    return PairedTTestResult(
        n=int(x.size), mean_a=float(x.mean()), mean_b=float(y.mean()), mean_diff=float((x - y).mean()), sd_diff=nan,
        t=nan, df=0, p_value=nan, ci_low=nan, ci_high=nan, ci_resamples=int(resamples), confidence=float(confidence),
        cohens_dz=nan, note=f"n/a: the t-test needs at least 2 paired observations (n = {x.size})")


def paired_ttest(a: Sequence[float], b: Sequence[float], *, resamples: int = DEFAULT_DIFF_RESAMPLES, seed: int | None = 0,
                 confidence: float = DEFAULT_CONFIDENCE) -> PairedTTestResult:
    """`scipy.stats.ttest_rel(a, b)` plus a paired bootstrap CI of the mean difference and d_z.

    Degenerate cases: when every difference is zero, scipy returns NaN; here t = 0, p = 1
    and d_z = 0 (the samples are identical) and `note` says so. With a single pair the test,
    d_z and the CI are undefined: they are NaN (None in JSON) and `note` says why.
    """
    x, y = as_pair(a, b)
    if x.size < 2:
        return _single_pair(x, y, resamples, confidence)
    d = x - y
    sd = sample_sd(d)
    note = ""
    if sd == 0.0:
        if abs(float(d.mean())) <= SD_TOLERANCE:
            t, p, note = 0.0, 1.0, "all paired differences are zero"
        else:
            t, p, note = math.copysign(math.inf, float(d.mean())), 0.0, "constant non-zero difference"
    else:
        res = stats.ttest_rel(x, y)
        t, p = float(res.statistic), float(res.pvalue)
    ci = bootstrap_mean_diff_ci(x, y, resamples=resamples, seed=seed, confidence=confidence)
    return PairedTTestResult(
        n=int(x.size), mean_a=float(x.mean()), mean_b=float(y.mean()), mean_diff=float(d.mean()), sd_diff=sd,
        t=t, df=int(x.size - 1), p_value=p, ci_low=ci.low, ci_high=ci.high, ci_resamples=int(resamples),
        confidence=float(confidence), cohens_dz=cohens_dz(x, y), note=note)
