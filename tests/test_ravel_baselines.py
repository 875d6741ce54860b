"""Baselines (MutualNN variants, RSA, CCA, linear CKA, GW), CKA-X, sweeps and FLOPs accounting."""
import numpy as np
import pytest

from mmbench.evaluators.ravel import cca, cka, ckax, flops, gw, methods, mutualnn, neighbours, rsa, sweeps


@pytest.fixture(scope="module")
def pair():
    rng = np.random.default_rng(0)
    n = 150
    lat = rng.normal(size=(n, 8))
    v = lat @ rng.normal(size=(8, 24))
    t = lat @ rng.normal(size=(8, 20))
    return v, t, rng.normal(size=(n, 20))


def test_aligned_beats_unrelated_for_every_baseline(pair):
    v, t, noise = pair
    for name, f in [("mutualnn", lambda a, b: mutualnn.mutualnn_score(a, b, k=10)),
                    ("rsa", rsa.rsa_score), ("cca", cca.cca_score), ("cka", cka.linear_cka), ("gw", gw.gw_score)]:
        margin = 0.01 if name == "gw" else 0.05  # GW discrepancies live on a smaller scale
        assert f(v, t) > f(v, noise) + margin, name
    for var in ("raw", "centered", "standardized", "pca", "abtt", "whiten"):
        # ABTT deletes informative leading directions of this 8-dim latent, so it scores lower
        floor = 0.3 if var == "abtt" else 0.5
        assert mutualnn.mutualnn_score(v, t, k=10, variant=var, q=2) > floor, var


def test_mutualnn_raw_matches_definition(pair):
    v, t, _ = pair
    cv = v / np.linalg.norm(v, axis=1, keepdims=True)
    ct = t / np.linalg.norm(t, axis=1, keepdims=True)
    ref = neighbours.mutual_knn_score(cv @ cv.T, ct @ ct.T, 7)[0]
    assert mutualnn.mutualnn_score(v, t, k=7) == pytest.approx(ref)


def test_cka_invariances(pair):
    v, t, _ = pair
    q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(24, 24)))
    assert cka.linear_cka(v, t) == pytest.approx(cka.linear_cka(v @ q * 3.0, t))
    assert cka.linear_cka(v, t) == pytest.approx(cka.linear_cka(np.hstack([v, np.zeros((len(v), 5))]), t))
    assert cka.linear_cka(v, v) == pytest.approx(1.0)


def test_gw_pair_accuracy_identity_for_identical_spaces():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(40, 6))
    score, plan = gw.gw_score(x, x, return_plan=True)
    assert score == pytest.approx(0.0, abs=1e-6)
    assert gw.pair_accuracy(plan) == 1.0


def test_methods_dispatch_covers_all(pair):
    v, t, _ = pair
    patches = np.repeat(v[:, None, :], 3, axis=1) + 0.01 * np.random.default_rng(3).normal(size=(len(v), 3, 24))
    assert methods.parse_methods("all") == [m for m in methods.METHODS if m not in methods.OPT_IN]
    assert "gw-l1" not in methods.parse_methods("baselines") and methods.parse_methods("gw-l1") == ["gw-l1"]
    with pytest.raises(ValueError):
        methods.parse_methods("nope")
    for m in methods.parse_methods("all"):  # gw-l1 (O(n^4)) has its own small tests in test_ravel_gw.py
        assert np.isfinite(methods.compute(m, patches, t, k=10, q=2)), m


def test_sweeps_and_ablation(pair):
    v, t, _ = pair
    patches = np.repeat(v[:, None, :], 2, axis=1)
    ks = sweeps.sweep_k(patches, t, [5, 10, 500])
    assert [r["value"] for r in ks] == [5, 10]
    assert len(sweeps.sweep_eps(patches, t, [1e-4, 1e-2], k=5)) == 2
    assert [r["value"] for r in sweeps.sweep_n(patches, t, [50, 150, 999], k=5)] == [50, 150]
    abl = sweeps.patch_pooled_ablation(patches, t, k=5)
    assert set(abl) == {"mutualnn", "mutualnn+whiten", "patch", "patch+whiten"}


def test_ckax_loo_and_budget():
    rng = np.random.default_rng(4)
    n = 80
    lat = rng.normal(size=(n, 6))
    text = lat @ rng.normal(size=(6, 12))
    feats, y = {}, []
    for m in range(10):
        a = m / 9
        feats[f"e{m}"] = a * lat @ rng.normal(size=(6, 10)) + (1 - a) * rng.normal(size=(n, 10))
        y.append(a)
    inp = ckax.CKAXInputs.from_features(feats, text)
    assert inp.cka.shape == (10, 10) and np.allclose(np.diag(inp.cka), 1)
    assert inp.descriptors([0, 1], [2, 3, 4]).shape == (2, 5)
    loo = ckax.leave_one_out(inp, y)
    assert loo["spearman"] > 0.5
    sw = ckax.budget_sweep(inp, y, budgets=(4, 6, 9), repeats=5)
    assert [r["budget"] for r in sw] == [4, 6]
    assert ckax.GBDT_PARAMS == dict(max_depth=2, n_estimators=50, learning_rate=0.05, subsample=0.8, random_state=0)


def test_flops_accounting():
    kw = dict(n=1000, p=576, d_v=1024, d_t=2048, vision_params=3e8, llm_params=1.7e9, text_tokens=64)
    r = flops.method_flops("ravel", **kw)
    assert r["chamfer"] == pytest.approx(1000 * 999 / 2 * (2 * 576 ** 2 * 1024 + 2 * 576 ** 2 + 4 * 576))
    assert r["total"] == pytest.approx(sum(v for k, v in r.items() if k != "total"))
    m = flops.method_flops("mutualnn", **kw)
    assert m["total"] < r["total"]
    for name in methods.METHODS:
        assert flops.method_flops(name, **kw)["total"] > 0
