"""GW baseline: converges past the product coupling's stationary point, and the authors' L1 loss is exact."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from mmbench.evaluators.ravel.gw import angular_distance, best_gw_plan, gw_score, l1_gradient, l1_gw, l1_objective


def isometric_pair(n=30, d=16, seed=0):
    """Text features = an orthogonal rotation of the visual ones: identical geometry, GW discrepancy 0."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, d))
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return torch.tensor(v, dtype=torch.float32), torch.tensor(v @ q, dtype=torch.float32)


def noisy_pair(n=40, d=32, seed=0):
    """Partly shared geometry plus noise: the case where POT's product start stalls after a few iterations."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, d))
    t = v[:, :8] @ rng.normal(size=(8, d)) + 0.8 * rng.normal(size=(n, d))
    return torch.tensor(v, dtype=torch.float32), torch.tensor(t, dtype=torch.float32)


def test_the_product_start_alone_stalls_and_the_multi_start_does_not():
    import ot

    v, t = noisy_pair()
    cv, ct = angular_distance(v), angular_distance(t)
    off = ~np.eye(len(cv), dtype=bool)
    cv = cv * (np.median(ct[off]) / np.median(cv[off]))
    p = np.full(len(cv), 1.0 / len(cv))
    _, log = ot.gromov.gromov_wasserstein(cv, ct, p, p, loss_fun="square_loss", log=True, tol_rel=1e-9, tol_abs=1e-9)
    stalled = float(log["gw_dist"])
    best, plan = best_gw_plan(cv, ct, loss="square")
    assert len(log["loss"]) <= 5 and best < 0.85 * stalled  # seen: 0.159 from the product start, 0.100 here
    assert gw_score(v, t) == pytest.approx(-best)
    assert gw_score(v, t) == gw_score(v, t)  # seeded starts: deterministic
    iso_v, iso_t = isometric_pair()
    assert gw_score(iso_v, iso_t) == pytest.approx(0.0, abs=1e-6)


def test_l1_gradient_and_objective_equal_the_brute_force_sum():
    rng = np.random.default_rng(1)
    n = 5
    a, b = rng.random((n, n)), rng.random((n, n))
    cv, ct = (a + a.T) / 2, (b + b.T) / 2
    plan = rng.random((n, n))
    plan /= plan.sum()
    tensor = np.abs(cv[:, None, :, None] - ct[None, :, None, :])  # (i, j, k, l)
    np.testing.assert_allclose(l1_gradient(cv, ct, plan), np.einsum("ijkl,kl->ij", tensor, plan), rtol=1e-12)
    assert l1_objective(cv, ct, plan) == pytest.approx(float(np.einsum("ijkl,ij,kl->", tensor, plan, plan)))


def test_l1_gw_descends_and_finds_the_isometry():
    v, t = isometric_pair(n=14, seed=3)
    cv, ct = angular_distance(v), angular_distance(t)
    n = len(cv)
    start = np.full((n, n), 1.0 / n / n)
    value, plan = l1_gw(cv, ct, start + 0.0)
    assert value <= l1_objective(cv, ct, start) + 1e-12
    best, plan = best_gw_plan(cv, ct, loss="l1", n_starts=6)
    assert best < 1e-2 * l1_objective(cv, ct, start)
    np.testing.assert_allclose(plan.sum(axis=1), 1.0 / n, atol=1e-9)
    with pytest.raises(ValueError, match="loss"):
        gw_score(v, t, loss="kl")
