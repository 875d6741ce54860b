"""Verdicts: "better", "worse" or "inconclusive" for each pair of models, at a family-wise level.

A pair (A, B) is "better" (A better than B) when its paired test rejects equality after the
family's multiple-comparison correction (Holm's step-down by default, Bonferroni optionally, both
over the m pairwise comparisons as `compare` computes them) and the mean difference A - B is
positive; "worse" when it rejects and the difference is negative; otherwise "inconclusive". Holm
(1979) controls the family-wise error rate at alpha, so the chance that any pair of equal models is
called better or worse is at most alpha. The directional call adds no error beyond that (Shaffer
1980: a rejected two-sided step-down test may be read in the direction of the estimate).
"""
from __future__ import annotations

from dataclasses import dataclass

from mmbench.evaluators.stats._base import StatResult

VERDICTS = ("better", "worse", "inconclusive")


@dataclass
class Verdict(StatResult):
    a: str
    b: str
    verdict: str            # of A relative to B
    mean_diff: float
    p_adjusted: float | None
    correction: str
    alpha: float


def verdict_of(mean_diff: float, p_adjusted: float | None, alpha: float) -> str:
    """The verdict of A against B from the mean difference A - B and its family-adjusted p-value."""
    if p_adjusted is None or p_adjusted > alpha or mean_diff == 0:
        return "inconclusive"
    return "better" if mean_diff > 0 else "worse"


def pair_verdict(a: str, b: str, mean_diff: float, p_adjusted: float | None, alpha: float,
                 correction: str = "holm") -> Verdict:
    return Verdict(a=a, b=b, verdict=verdict_of(mean_diff, p_adjusted, alpha), mean_diff=float(mean_diff),
                   p_adjusted=p_adjusted, correction=correction, alpha=float(alpha))
