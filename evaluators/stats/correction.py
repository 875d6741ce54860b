"""Multiple-comparison correction across pairwise tests: Bonferroni and Holm (step-down).

Bonferroni: p_adj = min(1, m p). Holm: sort p ascending, p_adj(i) = max_{j<=i} min(1, (m - j + 1) p_(j)).
Both control the family-wise error rate at `alpha`; Holm is uniformly more powerful.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mmbench.evaluators.stats._base import Values, StatResult, as_vector

METHODS = ("bonferroni", "holm")
DEFAULT_ALPHA = 0.05


@dataclass
class CorrectionResult(StatResult):
    method: str
    alpha: float
    m: int
    pvalues: list[float]
    adjusted: list[float]
    reject: list[bool]


def adjust_pvalues(pvalues: Values, method: str = "bonferroni") -> np.ndarray:
    p = as_vector(pvalues, "pvalues")
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    m = p.size
    if m == 0:
        return p.copy()
    if method == "bonferroni":
        return np.minimum(1.0, p * m)
    if method == "holm":
        order = np.argsort(p, kind="mergesort")
        steps = np.minimum(1.0, (m - np.arange(m)) * p[order])
        adj_sorted = np.maximum.accumulate(steps)
        out = np.empty(m)
        out[order] = adj_sorted
        return out
    raise ValueError(f"unknown correction {method!r}; choose from {METHODS}")


def correct_pvalues(pvalues: Sequence[float], method: str = "bonferroni", alpha: float = DEFAULT_ALPHA) -> CorrectionResult:
    """Adjusted p-values and reject decisions (adjusted p <= alpha) for one family of tests."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha}")
    p = as_vector(pvalues, "pvalues")
    adj = adjust_pvalues(p, method)
    return CorrectionResult(method=method, alpha=float(alpha), m=int(p.size), pvalues=p.tolist(), adjusted=adj.tolist(),
                            reject=[bool(v <= alpha) for v in adj])
