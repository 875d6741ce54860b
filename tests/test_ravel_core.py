"""RAVEL core: whitening, blocked Chamfer, neighbourhoods and the score against brute force."""

import numpy as np
import pytest
import torch

from mmbench.evaluators.ravel import chamfer, neighbours, score, whitening


def _brute_whiten(x, eps):
    x = np.asarray(x, dtype=np.float64)
    mu = x.mean(0)
    c = np.cov(x - mu, rowvar=False, ddof=1)
    lam, u = np.linalg.eigh(c)
    keep = lam > max(1e-10, lam.max() * x.shape[1] * np.finfo(float).eps)
    q = (x - mu) @ u[:, keep] / np.sqrt(lam[keep] + eps)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _brute_ravel(patches, text, k, eps):
    """Direct transcription of Algorithm 1 with Python loops and sets."""
    n, p, d = patches.shape
    t = _brute_whiten(text, eps)
    v = _brute_whiten(patches.reshape(n * p, d), eps).reshape(n, p, -1)
    st = t @ t.T
    sv = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            s = v[i] @ v[j].T
            sv[i, j] = 0.5 * (s.max(1).mean() + s.max(0).mean())

    def topk(s, i):
        cands = sorted((j for j in range(n) if j != i), key=lambda j: (-s[i, j], j))
        return set(cands[:k])

    return np.mean([len(topk(sv, i) & topk(st, i)) / k for i in range(n)])


def test_ravel_equals_brute_force():
    rng = np.random.default_rng(0)
    n, p, d, dt = 24, 5, 6, 9
    patches = rng.normal(size=(n, p, d))
    text = rng.normal(size=(n, dt))
    for k in (1, 3, 7):
        got = score.ravel_score(patches, text, k=k, eps=1e-4, dtype=torch.float64).score
        assert got == pytest.approx(_brute_ravel(patches, text, k, 1e-4), abs=1e-12)
        got32 = score.ravel_score(patches.astype(np.float32), text, k=k, tile=4).score
        assert got32 == pytest.approx(_brute_ravel(patches, text, k, 1e-4), abs=1e-12)


@pytest.mark.parametrize("tile", [1, 3, 5, 40])
def test_blocked_chamfer_matches_naive(tile):
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.normal(size=(13, 7, 4)))
    x = x / x.norm(dim=-1, keepdim=True)
    ref = chamfer.chamfer_similarity_naive(x)
    got = chamfer.chamfer_similarity_matrix(x, dtype=torch.float64, tile=tile)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    assert torch.equal(got, got.T)
    got32 = chamfer.chamfer_similarity_matrix(x.float(), tile=tile)
    torch.testing.assert_close(got32.double(), ref, rtol=0, atol=1e-5)


def test_blocked_chamfer_ragged_and_budget():
    rng = np.random.default_rng(2)
    sets = [rng.normal(size=(int(m), 5)) for m in rng.integers(2, 9, size=11)]
    padded, lengths = chamfer.pad_patch_sets(sets, dtype=torch.float64)
    ref = chamfer.chamfer_similarity_naive(padded, lengths)
    stats = {}
    got = chamfer.chamfer_similarity_matrix(padded, lengths, dtype=torch.float64,
                                            memory_budget_bytes=3 * 64 * 8 * 2 * 9, stats=stats)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    assert 1 <= stats["tile"] < 11
    # only upper-triangle tile pairs are computed
    nb = -(-11 // stats["tile"])
    assert stats["tile_pairs"] == nb * (nb + 1) // 2


def test_choose_tile_respects_budget():
    for n, p, budget in [(1000, 576, 2**28), (1000, 256, 2**30), (10, 4, 10**9), (50, 1024, 1)]:
        t = chamfer.choose_tile(n, p, budget)
        assert 1 <= t <= n
        if t > 1:
            assert (t * p) ** 2 * 4 <= budget


def test_whitening_matches_numpy_and_is_rotation_invariant():
    rng = np.random.default_rng(3)
    # anisotropic, correlated, and rank-deficient (d=12, rank 8)
    x = rng.normal(size=(200, 8)) @ rng.normal(size=(8, 12)) * np.linspace(0.1, 30, 12) + 5.0
    w = whitening.StabilizedWhitening(eps=1e-4).fit(x)
    z = w.transform(x, dtype=torch.float64).numpy()
    assert w.pca.rank == 8
    np.testing.assert_allclose(np.abs(z @ z.T), np.abs(_brute_whiten(x, 1e-4) @ _brute_whiten(x, 1e-4).T), atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-12)
    q, _ = np.linalg.qr(rng.normal(size=(12, 12)))
    zr = whitening.whiten(x @ q + 3.0, 1e-4, dtype=torch.float64).numpy()
    np.testing.assert_allclose(zr @ zr.T, z @ z.T, atol=1e-9)
    # whitened (before L2) coordinates have ~unit variance: λ/(λ+ε)
    wn = whitening.StabilizedWhitening(eps=1e-4, normalize=False).fit(x)
    cov = np.cov(wn.transform(x, dtype=torch.float64).numpy(), rowvar=False)
    np.testing.assert_allclose(np.diag(cov), (w.pca.eigenvalues / (w.pca.eigenvalues + 1e-4)).numpy(), rtol=1e-8)


def test_ravel_score_rotation_invariant():
    rng = np.random.default_rng(4)
    n, p, d = 40, 6, 10
    patches = rng.normal(size=(n, p, d)) * np.linspace(0.5, 5, d)
    text = rng.normal(size=(n, 16))
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    a = score.ravel_score(patches, text, k=5, dtype=torch.float64).score
    b = score.ravel_score(patches @ q, text, k=5, dtype=torch.float64).score
    assert a == b


def test_aligned_spaces_score_near_one_and_shuffled_near_chance():
    rng = np.random.default_rng(5)
    n, p, d, k = 300, 4, 16, 10
    latent = rng.normal(size=(n, d))
    patches = latent[:, None, :] + 0.05 * rng.normal(size=(n, p, d))
    # text = a rank-16 linear image of the same latent in 24 dims (zero-variance directions are
    # dropped by the positive-eigenvalue restriction)
    text = latent @ rng.normal(size=(d, 24))
    aligned = score.ravel_score(patches, text, k=k).score
    assert aligned > 0.9
    shuffled = [score.ravel_score(patches, text[rng.permutation(n)], k=k).score for _ in range(5)]
    chance = neighbours.chance_level(n, k)
    assert abs(np.mean(shuffled) - chance) < 0.02


def test_topk_tie_breaking_and_self_exclusion():
    s = np.array([[9, 1, 1, 1], [1, 9, 0, 2], [1, 0, 9, 0], [5, 5, 5, 5.0]])
    nb = neighbours.topk_neighbours(s, 2)
    assert nb.tolist() == [[1, 2], [3, 0], [0, 1], [0, 1]]
    for i, row in enumerate(neighbours.topk_neighbours(np.random.default_rng(0).normal(size=(9, 9)), 8)):
        assert sorted(row) == [j for j in range(9) if j != i]


def test_overlap_counts_brute():
    rng = np.random.default_rng(6)
    a = np.array([rng.permutation(20)[:5] for _ in range(20)])
    b = np.array([rng.permutation(20)[:5] for _ in range(20)])
    ref = [len(set(x) & set(y)) for x, y in zip(a, b)]
    assert neighbours.overlap_counts(a, b).tolist() == ref


def test_postprocess_variants():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(50, 8)) * np.arange(1, 9) + 2
    for v in whitening.POSTPROCESS_VARIANTS:
        z = whitening.postprocess(x, v, q=2).numpy()
        np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-12)
    assert whitening.postprocess(x, "abtt", q=2).shape[1] == 6
    with pytest.raises(ValueError):
        whitening.postprocess(x, "nope")
