"""Gromov–Wasserstein compatibility (Li et al., 2026): −GW discrepancy between the two modalities' geometries.

Angular distance matrices arccos(clip(cos, ±(1−1e-7))) of the row-normalised pooled features; the
visual matrix is rescaled so its off-diagonal median equals the text one (median-ratio scaling);
uniform marginals. Score = −GW discrepancy (higher is better).

Two losses:
- ``square`` (default): POT's conditional-gradient solver on the square loss.
- ``l1``: the authors' absolute-difference objective Σ |Cv[i,k] − Ct[j,l]| T[i,j] T[k,l], solved here by
  the same conditional-gradient scheme (linear-OT direction with POT's exact `emd`, exact line search —
  the objective is quadratic in T), in O(n⁴) per iteration: meant for the paper's sample sizes (n ≲ 200).

Convergence: from the uniform product coupling the square-loss solver can stop after a couple of
iterations at a poor stationary point (that coupling is stationary for symmetric problems). Each solve
therefore also starts from an entropic-GW warm start (ε = 0.05, 30 outer iterations, projected to the
nearest exact coupling) and keeps the lower objective; `n_starts` seeded random permutation plans can be
added (off by default: on test problems they did not beat the warm start). Deterministic.
"""
from __future__ import annotations

import warnings

import numpy as np

from mmbench.evaluators.ravel.whitening import postprocess

LOSSES = ("square", "l1")


def angular_distance(z) -> np.ndarray:
    z = postprocess(z, "raw").numpy()
    c = np.clip(z @ z.T, -1 + 1e-7, 1 - 1e-7)
    d = np.arccos(c)
    d = 0.5 * (d + d.T)
    np.fill_diagonal(d, 0.0)
    return d


def gw_score(visual, text, *, variant: str = "raw", loss: str = "square", max_iter: int = 1000, tol: float = 1e-9,
             n_starts: int = 0, seed: int = 0, return_plan: bool = False):
    if loss not in LOSSES:
        raise ValueError(f"GW loss must be one of {LOSSES}, got {loss!r}")
    zv = postprocess(visual, variant) if variant != "raw" else visual
    zt = postprocess(text, variant) if variant != "raw" else text
    cv, ct = angular_distance(zv), angular_distance(zt)
    off = ~np.eye(len(cv), dtype=bool)
    cv = cv * (np.median(ct[off]) / max(np.median(cv[off]), 1e-12))
    best, plan = best_gw_plan(cv, ct, loss=loss, max_iter=max_iter, tol=tol, n_starts=n_starts, seed=seed)
    score = -float(best)
    return (score, plan) if return_plan else score


def start_plans(cv: np.ndarray, ct: np.ndarray, n_starts: int, seed: int) -> list[np.ndarray]:
    """Initial couplings: the product coupling, an entropic-GW plan, and seeded permutation plans."""
    import ot

    n, m = len(cv), len(ct)
    p, q = np.full(n, 1.0 / n), np.full(m, 1.0 / m)
    plans = [np.outer(p, q)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an unconverged Sinkhorn is fine for a warm start
            ent = ot.gromov.entropic_gromov_wasserstein(cv, ct, p, q, loss_fun="square_loss", epsilon=5e-2,
                                                        max_iter=30)
        if np.all(np.isfinite(ent)) and ent.sum() > 0:
            plans.append(ot.emd(p, q, -ent))  # the nearest exact coupling (Sinkhorn's marginals are approximate)
    except (ValueError, FloatingPointError, ZeroDivisionError):
        pass  # an entropic warm start that fails is simply not used
    if n == m:
        rng = np.random.default_rng(seed)
        for _ in range(max(0, n_starts)):
            perm = np.zeros((n, n))
            perm[np.arange(n), rng.permutation(n)] = 1.0 / n
            plans.append(perm)
    return plans


def best_gw_plan(cv: np.ndarray, ct: np.ndarray, *, loss: str = "square", max_iter: int = 1000, tol: float = 1e-9,
                 n_starts: int = 0, seed: int = 0) -> tuple[float, np.ndarray]:
    """(lowest GW objective over the starts, its plan)."""
    results = []
    for g0 in start_plans(cv, ct, n_starts, seed):
        if loss == "square":
            value, plan = _square_gw(cv, ct, g0, max_iter, tol)
        else:
            value, plan = l1_gw(cv, ct, g0, max_iter=max_iter, tol=tol)
        results.append((value, plan))
    return min(results, key=lambda r: r[0])


def _square_gw(cv, ct, g0, max_iter, tol):
    import ot

    p, q = np.full(len(cv), 1.0 / len(cv)), np.full(len(ct), 1.0 / len(ct))
    plan, log = ot.gromov.gromov_wasserstein(cv, ct, p, q, loss_fun="square_loss", G0=g0, max_iter=max_iter,
                                             tol_rel=tol, tol_abs=tol, log=True)
    return float(log["gw_dist"]), plan


def l1_objective(cv: np.ndarray, ct: np.ndarray, plan: np.ndarray) -> float:
    """Σ_{i,j,k,l} |Cv[i,k] − Ct[j,l]| T[i,j] T[k,l]."""
    return float(np.sum(l1_gradient(cv, ct, plan) * plan))


def l1_gradient(cv: np.ndarray, ct: np.ndarray, plan: np.ndarray) -> np.ndarray:
    """G[i,j] = Σ_{k,l} |Cv[i,k] − Ct[j,l]| T[k,l], one row i at a time (n³ memory)."""
    out = np.empty((len(cv), len(ct)))
    for i in range(len(cv)):
        diff = np.abs(cv[i][None, :, None] - ct[:, None, :])  # (j, k, l)
        out[i] = np.einsum("jkl,kl->j", diff, plan)
    return out


def l1_gw(cv: np.ndarray, ct: np.ndarray, g0: np.ndarray, *, max_iter: int = 200,
          tol: float = 1e-9) -> tuple[float, np.ndarray]:
    """Conditional gradient on the L1 GW objective (quadratic in T): linear-OT direction, exact line search."""
    import ot

    p, q = np.full(len(cv), 1.0 / len(cv)), np.full(len(ct), 1.0 / len(ct))
    plan = g0.copy()
    grad = l1_gradient(cv, ct, plan)
    value = float(np.sum(grad * plan))
    for _ in range(max_iter):
        target = ot.emd(p, q, 2.0 * grad)
        d = target - plan
        slope = 2.0 * float(np.sum(grad * d))
        if slope >= -tol * max(abs(value), 1e-12):
            break  # no descent direction left: a stationary point
        curv = float(np.sum(l1_gradient(cv, ct, d) * d))
        step = 1.0 if curv <= 0 else min(1.0, -slope / (2.0 * curv))
        plan = plan + step * d
        grad = l1_gradient(cv, ct, plan)
        new = float(np.sum(grad * plan))
        done = abs(value - new) <= tol * max(abs(value), 1e-12)
        value = new
        if done:
            break
    return value, plan


def pair_accuracy(plan: np.ndarray) -> float:
    """Fraction of samples whose maximum-mass GW assignment is their true partner (Appendix H.2)."""
    return float(np.mean(np.argmax(plan, axis=1) == np.arange(len(plan))))
