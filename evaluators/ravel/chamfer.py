"""Symmetric Chamfer patch-set similarity (RAVEL eq. 6, Algorithm 1 lines 23–26).

For images i, j with (whitened, L2-normalised) patch sets A (Pᵢ×d) and B (Pⱼ×d), S = A Bᵀ:

    chamfer(i, j) = ½ ( mean_a max_b S_ab + mean_b max_a S_ab )

which is symmetric, so each unordered pair is computed once and mirrored.

Work plan. Images are grouped into tiles of ``t`` images. Every tile pair (I, J) with J > I is
one task: a GEMM (t·P × d)·(d × t·P) into a reused buffer, then both max-reductions of that one
similarity block (rows: best match of each of I's patches in each image of J; columns: the
reverse), summed per image pair. A diagonal tile is split into strips (image i against images
i…end of the tile), so no pair is computed twice and only the n self-pairs (the diagonal of the
result) are computed beyond the n(n−1)/2 useful pairs.

``t`` is the largest tile whose block (t·P)² (plus the two reduction outputs) fits the memory
budget. On CPU the default budget is 1 MiB, a typical per-core L2, so the block is still in cache
when the two reductions read it; on CUDA it is a share of the free memory. Peak extra memory is
the budget per worker plus two n×n accumulators, whatever n.

Threads (CPU): with ``torch.get_num_threads()`` = w > 1, w Python worker threads take tasks from
a shared queue and run each task single-threaded (torch releases the GIL inside its ops); the
intra-op thread count is restored afterwards. Dynamic scheduling keeps both cores busy when a
neighbour process takes one, where a fork-join GEMM waits for its slowest thread. Each task is
computed the same way, single-threaded, by whichever worker runs it (one worker included), so the
result is bit-identical for every thread count and worker count (same machine and torch build).
Fork-join GEMMs on cache-sized tiles were the slow alternative: on this loaded 2-core machine one
worker with 2 intra-op threads spent 6.4 s of CPU on work that takes 0.6 s single-threaded.

float32 GEMMs by default; TF32 is not enabled here (the caller's global torch setting applies on
CUDA, where one worker runs the tasks in order on the current stream).
"""
from __future__ import annotations

import math
import numbers
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np
import torch

DEFAULT_CPU_BUDGET = 2**20  # per worker: the similarity block stays in a 1 MiB L2 for the reductions
DEFAULT_GPU_BUDGET = 2 * 2**30


def pad_patch_sets(sets: Sequence, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack ragged patch sets (list of Pᵢ×d) into (n, P_max, d) zero-padded + lengths (n,)."""
    tensors = [torch.as_tensor(np.asarray(s) if not isinstance(s, torch.Tensor) else s) for s in sets]
    d = tensors[0].shape[-1]
    pmax = max(t.shape[0] for t in tensors)
    out = torch.zeros(len(tensors), pmax, d, dtype=dtype)
    lengths = torch.empty(len(tensors), dtype=torch.long)
    for i, t in enumerate(tensors):
        out[i, : t.shape[0]] = t.to(dtype)
        lengths[i] = t.shape[0]
    return out, lengths


def chamfer_pair(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Chamfer similarity of two patch sets (Pa×d, Pb×d)."""
    s = a @ b.T
    return 0.5 * (s.amax(1).mean() + s.amax(0).mean())


def chamfer_similarity_naive(patches, lengths=None, dtype=torch.float64) -> torch.Tensor:
    """Straightforward per-pair reference (Python loop over i < j). Slow; for tests and perf."""
    x = torch.as_tensor(patches).to(dtype)
    n = x.shape[0]
    lens = [x.shape[1]] * n if lengths is None else [int(v) for v in lengths]
    out = torch.empty(n, n, dtype=dtype)
    for i in range(n):
        a = x[i, : lens[i]]
        out[i, i] = chamfer_pair(a, a)
        for j in range(i + 1, n):
            v = chamfer_pair(a, x[j, : lens[j]])
            out[i, j] = out[j, i] = v
    return out


def choose_tile(n: int, p: int, budget_bytes: int, elem_bytes: int = 4) -> int:
    """Largest tile t (images) whose task memory fits ``budget_bytes``: the similarity block
    (t·P)² plus the two reduction outputs 2·t²·P, times ``elem_bytes``; t ≥ 1 always (a single
    pair's P² block is the floor), t ≤ n."""
    per_t2 = (p * p + 2 * p) * elem_bytes
    t = int(math.floor(math.sqrt(max(budget_bytes, 1) / per_t2)))
    return max(1, min(n, t))


def default_budget(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(min(DEFAULT_GPU_BUDGET * 4, max(DEFAULT_GPU_BUDGET // 4, free * 0.5)))
    return DEFAULT_CPU_BUDGET


def plan_tasks(n: int, t: int) -> list[tuple[int, int, int, int]]:
    """Blocks (row start, row end, column start, column end) in images covering each pair i ≤ j
    exactly once: off-diagonal tile pairs whole, diagonal tiles as strips i × [i, tile end)."""
    tasks = []
    for bi in range(0, n, t):
        ei = min(n, bi + t)
        tasks.extend((i, i + 1, i, ei) for i in range(bi, ei))
        tasks.extend((bi, ei, bj, min(n, bj + t)) for bj in range(ei, n, t))
    return tasks


class _BlockReducer:
    """One worker's buffers; ``run`` computes one task's row/column max sums into the shared
    accumulators (tasks write disjoint blocks, so workers need no lock for them)."""

    def __init__(self, flat, p, t, fsum, bsum, mask):
        self.flat, self.p, self.fsum, self.bsum, self.mask = flat, p, fsum, bsum, mask
        kw = {"dtype": flat.dtype, "device": flat.device}
        self.sbuf = torch.empty(t * p * t * p, **kw)
        self.rbuf = torch.empty(t * p * t, **kw)
        self.cbuf = torch.empty(t * t * p, **kw)

    def run(self, bi, ei, bj, ej):
        p, flat = self.p, self.flat
        ti, tj = ei - bi, ej - bj
        s = torch.mm(flat[bi * p: ei * p], flat[bj * p: ej * p].T,
                     out=self.sbuf[: ti * p * tj * p].view(ti * p, tj * p))
        s4 = s.view(ti, p, tj, p)
        rows = self.rbuf[: ti * p * tj].view(ti, p, tj)
        cols = self.cbuf[: ti * tj * p].view(ti, tj, p)
        if self.mask is None:
            torch.amax(s4, 3, out=rows)
            torch.amax(s4, 1, out=cols)
        else:  # padded patches: -inf never wins a max; padded rows/columns add 0 to the sums
            valid, bias = self.mask
            s.add_(bias[bj * p: ej * p][None, :])
            torch.amax(s4, 3, out=rows).masked_fill_(~valid[bi:ei, :, None], 0)
            s.add_(bias[bi * p: ei * p][:, None])
            torch.amax(s4, 1, out=cols).masked_fill_(~valid[None, bj:ej, :], 0)
        torch.sum(rows, 1, out=self.fsum[bi:ei, bj:ej])
        torch.sum(cols, 2, out=self.bsum[bi:ei, bj:ej])


def _run_tasks(make_reducer, tasks, workers: int, cpu: bool) -> None:
    """Run ``tasks`` on ``workers`` threads taking them from one queue. On CPU every task runs
    single-threaded (also with one worker), so the bits do not depend on the thread count; the
    intra-op thread count is restored afterwards."""
    queue, lock = iter(tasks), threading.Lock()
    nthreads = torch.get_num_threads()

    def work():
        if cpu:
            torch.set_num_threads(1)
        red = make_reducer()
        while True:
            with lock:
                task = next(queue, None)
            if task is None:
                return
            red.run(*task)

    try:
        if workers <= 1:
            work()
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="chamfer") as pool:
                for fut in [pool.submit(work) for _ in range(workers)]:
                    fut.result()
    finally:
        if cpu:
            torch.set_num_threads(nthreads)


def chamfer_similarity_matrix(patches, lengths=None, *, device=None, dtype=torch.float32,
                              tile: int | None = None, memory_budget_bytes: int | None = None,
                              workers: int | None = None, out_device="cpu",
                              stats: dict | None = None) -> torch.Tensor:
    """n×n symmetric Chamfer similarity of (n, P, d) patch sets (zero-padded if ``lengths``).

    Each pair i ≤ j computed once (see the module docstring), mirrored. Returns ``dtype`` on
    ``out_device``. ``workers`` defaults to ``torch.get_num_threads()`` on CPU and 1 on CUDA. ``tile``
    (images per tile, a positive integer, capped at n) overrides the one chosen from the budget.
    ``stats`` (if a dict) receives the tile size, tile pairs (I ≤ J), tasks (GEMMs), workers and
    the GEMM multiply-adds issued against the useful ones.
    """
    if isinstance(patches, (list, tuple)):
        patches, lengths = pad_patch_sets(patches, dtype=dtype)
    x = torch.as_tensor(patches)
    dev = torch.device(device) if device is not None else x.device
    x = x.to(device=dev, dtype=dtype).contiguous()
    n, p, d = x.shape
    lens = torch.full((n,), p, dtype=torch.long, device=dev)
    given = None if lengths is None else torch.as_tensor(lengths)
    if given is not None and given.shape != (n,):
        raise ValueError(f"{given.numel()} lengths for {n} images: give one patch count per image")
    mask = None
    if given is not None and bool((given != p).any()):
        lens = given.to(dev).long()
        if int(lens.min()) < 1:
            raise ValueError("every image needs at least one patch")
        if int(lens.max()) > p:
            raise ValueError(f"a length exceeds the {p} patches per image")
        valid = torch.arange(p, device=dev)[None, :] < lens[:, None]  # (n, P)
        bias = torch.zeros(n, p, dtype=dtype, device=dev).masked_fill(~valid, float("-inf")).reshape(n * p)
        mask = (valid, bias)
    elem = torch.finfo(dtype).bits // 8
    budget = memory_budget_bytes or default_budget(dev)
    if tile is None:
        t = choose_tile(n, p, budget, elem)
    elif isinstance(tile, bool) or not isinstance(tile, numbers.Integral) or tile < 1:
        raise ValueError(f"tile must be a positive number of images, not {tile!r}")
    else:
        t = min(n, int(tile))  # buffers are sized from the tile: never larger than the images there are
    tasks = plan_tasks(n, t)
    if workers is None:
        workers = 1 if dev.type != "cpu" else torch.get_num_threads()
    workers = max(1, min(int(workers), len(tasks)))
    flat = x.reshape(n * p, d)
    fsum = torch.zeros(n, n, dtype=dtype, device=dev)  # Σ over i's patches of the best match in j
    bsum = torch.zeros(n, n, dtype=dtype, device=dev)  # Σ over j's patches of the best match in i
    _run_tasks(lambda: _BlockReducer(flat, p, t, fsum, bsum, mask), tasks, workers, dev.type == "cpu")
    lf = lens.to(dtype)
    upper = (0.5 * (fsum / lf[:, None] + bsum / lf[None, :])).triu()
    out = upper + upper.triu(1).T
    if stats is not None:
        nb = -(-n // t)
        stats.update({"tile": t, "tile_pairs": nb * (nb + 1) // 2, "tasks": len(tasks), "workers": workers,
                      "n": n, "P": p, "d": d,
                      "gemm_macs": sum((ei - bi) * (ej - bj) for bi, ei, bj, ej in tasks) * p * p * d,
                      "useful_macs": n * (n - 1) // 2 * p * p * d, "budget_bytes": budget})
    return out.to(out_device)
