"""Gromov–Wasserstein compatibility (Li et al., 2026) via POT.

Angular distance matrices arccos(clip(cos, ±(1−1e-7))) of the row-normalised pooled features;
the visual matrix is rescaled so its off-diagonal median equals the text one (median-ratio
scaling); uniform marginals, POT's conditional-gradient solver with the square loss from the
uniform (product) coupling. Score = −GW discrepancy (higher is better).

Deviation, stated: the authors solve the L1 (absolute-difference) GW objective with their own
solver; POT exposes the square and KL losses, so this baseline uses the square loss.
"""
from __future__ import annotations

import numpy as np

from .whitening import postprocess


def angular_distance(z) -> np.ndarray:
    z = postprocess(z, "raw").numpy()
    c = np.clip(z @ z.T, -1 + 1e-7, 1 - 1e-7)
    d = np.arccos(c)
    d = 0.5 * (d + d.T)
    np.fill_diagonal(d, 0.0)
    return d


def gw_score(visual, text, *, variant: str = "raw", max_iter: int = 1000, tol: float = 1e-9,
             return_plan: bool = False):
    import ot

    zv = postprocess(visual, variant) if variant != "raw" else visual
    zt = postprocess(text, variant) if variant != "raw" else text
    cv, ct = angular_distance(zv), angular_distance(zt)
    off = ~np.eye(len(cv), dtype=bool)
    cv = cv * (np.median(ct[off]) / max(np.median(cv[off]), 1e-12))
    p = np.full(len(cv), 1.0 / len(cv))
    plan, log = ot.gromov.gromov_wasserstein(cv, ct, p, p, loss_fun="square_loss", max_iter=max_iter,
                                             tol_rel=tol, tol_abs=tol, log=True)
    score = -float(log["gw_dist"])
    return (score, plan) if return_plan else score


def pair_accuracy(plan: np.ndarray) -> float:
    """Fraction of samples whose maximum-mass GW assignment is their true partner (Appendix H.2)."""
    return float(np.mean(np.argmax(plan, axis=1) == np.arange(len(plan))))
