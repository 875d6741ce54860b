"""Symmetric Chamfer patch-set similarity (RAVEL eq. 6, Algorithm 1 lines 23–26).

For images i, j with (whitened, L2-normalised) patch sets A (Pᵢ×d) and B (Pⱼ×d), S = A Bᵀ:

    chamfer(i, j) = ½ ( mean_a max_b S_ab + mean_b max_a S_ab )

which is symmetric, so only the upper triangle of the n×n matrix is computed and mirrored.

The blocked kernel groups images into tiles of ``t`` images. One tile pair is a single GEMM
(t·P × d)·(d × t·P) followed by two max-reductions; only tile pairs (I, J) with J ≥ I are
computed. ``t`` is chosen from a memory budget so that the similarity block (t·P)² floats (and,
with ragged patch counts, one masked copy) fits in it: peak extra memory is bounded by the
budget regardless of n. Works on any torch device; float32 GEMMs by default (TF32 is not
enabled here — the caller's global torch setting applies).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

DEFAULT_CPU_BUDGET = 32 * 2**20  # cache-friendly tiles measured faster on CPU than large ones
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


def choose_tile(n: int, p: int, budget_bytes: int, elem_bytes: int = 4, ragged: bool = False) -> int:
    """Largest tile t (images) with the tile-pair similarity block within ``budget_bytes``.

    Block memory ≈ (t·P)² · elem · (1 GEMM output [+1 masked copy if ragged]) + the two
    reduction outputs (2·t²·P·elem); t ≥ 1 always (a single pair's P² block is the floor).
    """
    copies = 2 if ragged else 1
    per_t2 = p * p * elem_bytes * copies + 2 * p * elem_bytes
    t = int(math.floor(math.sqrt(max(budget_bytes, 1) / per_t2)))
    return max(1, min(n, t))


def default_budget(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(min(DEFAULT_GPU_BUDGET * 4, max(DEFAULT_GPU_BUDGET // 4, free * 0.5)))
    return DEFAULT_CPU_BUDGET


def chamfer_similarity_matrix(patches, lengths=None, *, device=None, dtype=torch.float32,
                              tile: int | None = None, memory_budget_bytes: int | None = None,
                              out_device="cpu", stats: dict | None = None) -> torch.Tensor:
    """n×n symmetric Chamfer similarity of (n, P, d) patch sets (zero-padded if ``lengths``).

    Upper-triangle tiles only, mirrored. Returns float32 (or ``dtype`` if float64) on ``out_device``.
    ``stats`` (if a dict) receives tile size, number of tile pairs and GEMM multiply-adds.
    """
    if isinstance(patches, (list, tuple)):
        patches, lengths = pad_patch_sets(patches, dtype=dtype)
    x = torch.as_tensor(patches)
    dev = torch.device(device) if device is not None else x.device
    x = x.to(device=dev, dtype=dtype).contiguous()
    n, p, d = x.shape
    ragged = lengths is not None and bool((torch.as_tensor(lengths) != p).any())
    elem = torch.finfo(dtype).bits // 8
    budget = memory_budget_bytes or default_budget(dev)
    t = tile or choose_tile(n, p, budget, elem, ragged)
    flat = x.reshape(n * p, d)
    out = torch.empty(n, n, dtype=dtype, device=dev)
    if ragged:
        lens = torch.as_tensor(lengths, device=dev).long()
        valid = torch.arange(p, device=dev)[None, :] < lens[:, None]  # (n, P)
        if int(lens.min()) < 1:
            raise ValueError("every image needs at least one patch")
        bias = torch.zeros(n, p, dtype=dtype, device=dev).masked_fill(~valid, float("-inf")).reshape(n * p)
        validf = valid.to(dtype)
    pairs = 0
    # One similarity buffer for every tile pair: a fresh (t·P)² allocation per pair costs page faults
    # comparable to a fifth of the GEMM on CPU; `torch.mm(out=)` writes into a contiguous prefix of it.
    buf = torch.empty(min(n, t) * p * min(n, t) * p, dtype=dtype, device=dev)
    for bi in range(0, n, t):
        ei = min(n, bi + t)
        a = flat[bi * p: ei * p]
        for bj in range(bi, n, t):
            ej = min(n, bj + t)
            ti, tj = ei - bi, ej - bj
            s = torch.mm(a, flat[bj * p: ej * p].T, out=buf[: ti * p * tj * p].view(ti * p, tj * p))
            pairs += 1
            if not ragged:
                s4 = s.view(ti, p, tj, p)
                fwd = s4.amax(3).mean(1)  # (ti, tj): mean over i's patches of best match in j
                bwd = s4.amax(1).mean(2)  # (ti, tj): mean over j's patches of best match in i
            else:
                s4 = (s + bias[bj * p: ej * p][None, :]).view(ti, p, tj, p)
                fwd = (s4.amax(3) * validf[bi:ei, :, None]).sum(1) / lens[bi:ei, None]
                del s4
                s4 = (s + bias[bi * p: ei * p][:, None]).view(ti, p, tj, p)
                bwd = (s4.amax(1) * validf[None, bj:ej, :]).sum(2) / lens[None, bj:ej]
            sim = 0.5 * (fwd + bwd)
            out[bi:ei, bj:ej] = sim
            if bj != bi:
                out[bj:ej, bi:ei] = sim.T
            del s, s4
    if stats is not None:
        stats.update({"tile": t, "tile_pairs": pairs, "n": n, "P": p, "d": d,
                      "gemm_macs": sum(min(t, n - bi) * min(t, n - bj) * p * p * d
                                       for bi in range(0, n, t) for bj in range(bi, n, t)),
                      "useful_macs": n * (n - 1) // 2 * p * p * d, "budget_bytes": budget})
    # Enforce exact symmetry inside diagonal tiles too (fwd/bwd sums commute only up to rounding).
    out = 0.5 * (out + out.T)
    return out.to(out_device)
