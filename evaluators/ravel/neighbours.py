"""Top-k neighbourhoods and the MutualNN / RAVEL overlap score (eqs. 3–4).

Tie-breaking (deterministic, stated): neighbours are ordered by decreasing similarity and, among
exactly equal similarities, by increasing sample index (a stable sort of −similarity). The sample
itself is always excluded. Similarities are compared in float64 as given.
"""
from __future__ import annotations

import numpy as np
import torch


def _np(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def topk_neighbours(sim, k: int) -> np.ndarray:
    """(n, k) indices of each row's k most similar *other* samples (ties → lower index)."""
    s = _np(sim).copy()
    n = s.shape[0]
    if s.shape != (n, n):
        raise ValueError(f"similarity must be square, got {s.shape}")
    if not 0 < k < n:
        raise ValueError(f"k must be in [1, n-1] (n={n}), got {k}")
    if np.isnan(s).any():
        raise ValueError("NaN in similarity matrix")
    np.fill_diagonal(s, -np.inf)
    order = np.argsort(-s, axis=1, kind="stable")
    # the self index sorts last unless a row is all −inf; remove it explicitly either way
    rows = np.arange(n)[:, None]
    not_self = order != rows
    return order[not_self].reshape(n, n - 1)[:, :k].astype(np.int64)


def overlap_counts(nv: np.ndarray, nt: np.ndarray) -> np.ndarray:
    """|N_v(i) ∩ N_t(i)| per sample."""
    n = nv.shape[0]
    member = np.zeros((n, n), dtype=bool)
    rows = np.arange(n)[:, None]
    member[rows, nt] = True
    return member[rows, nv].sum(1)


def mutual_knn_score(sim_v, sim_t, k: int) -> tuple[float, np.ndarray]:
    """Mean top-k overlap / k between two similarity matrices over the same paired samples."""
    nv, nt = topk_neighbours(sim_v, k), topk_neighbours(sim_t, k)
    counts = overlap_counts(nv, nt)
    return float(counts.mean() / k), counts


def chance_level(n: int, k: int) -> float:
    """Expected score for independent random neighbourhoods: k/(n−1)."""
    return k / (n - 1)


def cosine_similarity(x) -> torch.Tensor:
    x = torch.as_tensor(x).to(torch.float64)
    x = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return x @ x.T
