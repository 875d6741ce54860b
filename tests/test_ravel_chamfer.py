"""Blocked Chamfer kernel: task plan, worker threads, ragged sets, thread-count invariance."""

import numpy as np
import pytest
import torch

from mmbench.evaluators.ravel import chamfer


def _unit(rng, *shape):
    x = torch.from_numpy(rng.normal(size=shape))
    return x / x.norm(dim=-1, keepdim=True)


@pytest.mark.parametrize("n,t", [(1, 1), (2, 1), (7, 3), (9, 4), (10, 10), (5, 8), (13, 1)])
def test_plan_covers_every_pair_once(n, t):
    seen = np.zeros((n, n), dtype=int)
    for bi, ei, bj, ej in chamfer.plan_tasks(n, t):
        assert 0 <= bi < ei <= n and 0 <= bj < ej <= n and ei - bi <= t and ej - bj <= t
        seen[bi:ei, bj:ej] += 1
    np.testing.assert_array_equal(seen, np.triu(np.ones((n, n), dtype=int)))


@pytest.mark.parametrize("n,tile,workers", [(11, 3, 1), (11, 3, 2), (11, 4, 3), (7, 1, 2), (1, None, 2)])
def test_blocked_matches_naive_odd_n_uneven_tiles_and_workers(n, tile, workers):
    x = _unit(np.random.default_rng(n * 10 + workers), n, 6, 5)
    ref = chamfer.chamfer_similarity_naive(x)
    stats = {}
    got = chamfer.chamfer_similarity_matrix(x, dtype=torch.float64, tile=tile, workers=workers, stats=stats)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    assert torch.equal(got, got.T)
    # no diagonal-tile waste: exactly the n(n+1)/2 pairs i <= j are multiplied
    assert stats["gemm_macs"] == n * (n + 1) // 2 * 6 * 6 * 5
    assert stats["workers"] == min(workers, stats["tasks"])
    got32 = chamfer.chamfer_similarity_matrix(x.float(), tile=tile, workers=workers)
    torch.testing.assert_close(got32.double(), ref, rtol=0, atol=1e-5)


@pytest.mark.parametrize("workers", [1, 2])
def test_ragged_sets_ignore_padding_contents(workers):
    rng = np.random.default_rng(5)
    lengths = torch.tensor([1, 7, 3, 7, 2, 5, 7, 4, 1])
    x = _unit(rng, 9, 7, 4)
    ref = chamfer.chamfer_similarity_naive(x, lengths)
    # padded rows hold large values: only the masking keeps them out of the maxima
    garbage = x.clone()
    for i, m in enumerate(lengths.tolist()):
        garbage[i, m:] = 50.0
    got = chamfer.chamfer_similarity_matrix(garbage, lengths, dtype=torch.float64, tile=2, workers=workers)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    # the list form (a different P per image) pads and gives the same matrix
    sets = [x[i, :m].numpy() for i, m in enumerate(lengths.tolist())]
    got_list = chamfer.chamfer_similarity_matrix(sets, dtype=torch.float64, tile=4, workers=workers)
    torch.testing.assert_close(got_list, ref, rtol=0, atol=1e-12)


def test_bad_lengths_are_refused():
    x = torch.zeros(3, 4, 2)
    with pytest.raises(ValueError, match="at least one patch"):
        chamfer.chamfer_similarity_matrix(x, torch.tensor([4, 0, 2]))
    with pytest.raises(ValueError, match="exceeds the 4 patches"):
        chamfer.chamfer_similarity_matrix(x, torch.tensor([4, 5, 2]))


def test_same_result_for_every_thread_count_and_threads_restored():
    """Each task runs single-threaded whichever worker takes it: bit-identical across thread and
    worker counts (the tolerance is zero), and the caller's thread count is left as it was."""
    x = _unit(np.random.default_rng(9), 17, 12, 16).float()
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            for workers in (None, 1, 4):
                results.append(chamfer.chamfer_similarity_matrix(x, tile=3, workers=workers))
                assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)
    for r in results[1:]:
        assert torch.equal(r, results[0])


def test_worker_error_propagates_and_restores_threads(monkeypatch):
    def boom(self, *task):
        raise RuntimeError("task failed")

    monkeypatch.setattr(chamfer._BlockReducer, "run", boom)
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="task failed"):
        chamfer.chamfer_similarity_matrix(torch.ones(6, 2, 3), tile=2, workers=2)
    assert torch.get_num_threads() == before


def test_default_cpu_tile_fits_the_cache_budget():
    t = chamfer.choose_tile(1000, 196, chamfer.DEFAULT_CPU_BUDGET)
    assert t == 2 and ((t * 196) ** 2 + 2 * t * t * 196) * 4 <= chamfer.DEFAULT_CPU_BUDGET
    assert chamfer.choose_tile(1000, 576, chamfer.DEFAULT_CPU_BUDGET) == 1  # a pair's block is the floor


def test_a_tile_larger_than_the_images_allocates_for_the_images_only():
    """An explicit tile above n is capped at n (as the chosen tile is): the per-worker buffers are sized
    from the tile, so tile=10**6 on 5 images asked for a (10**6·P)² block (tens of TB) and failed."""
    x = _unit(np.random.default_rng(3), 5, 4, 8)
    stats: dict = {}
    got = chamfer.chamfer_similarity_matrix(x, dtype=torch.float64, tile=10**6, workers=1, stats=stats)
    assert stats["tile"] == 5
    torch.testing.assert_close(got, chamfer.chamfer_similarity_naive(x), rtol=0, atol=1e-12)


@pytest.mark.parametrize("tile", [-1, 2.5, True])
def test_a_tile_that_is_not_a_positive_integer_is_refused(tile):
    """tile=-1 planned no task at all and returned a matrix of zeros without a word."""
    with pytest.raises(ValueError, match="tile"):
        chamfer.chamfer_similarity_matrix(torch.ones(4, 2, 3), tile=tile)


@pytest.mark.parametrize("lengths", [[4, 2], [4, 2, 3, 1], [4, 4]])
def test_lengths_must_give_one_count_per_image(lengths):
    """Two counts for three images were a broadcasting error from inside torch, or (all counts full)
    taken without a word; now one line says what is wrong."""
    with pytest.raises(ValueError, match=rf"{len(lengths)} lengths for 3 images"):
        chamfer.chamfer_similarity_matrix(torch.ones(3, 4, 2), torch.tensor(lengths))
