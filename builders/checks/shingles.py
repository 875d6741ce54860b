"""Pairwise shingle overlap of a few documents: one sparse product gives every intersection count.

Shared by the pool-aware medoid baseline (`pool_aware`) and the learned probe's pool-overlap feature
(`probe_features`), which each cut documents into their own shingles (sorted distinct uint64 codes per document).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def intersections(sets: Sequence[np.ndarray]) -> np.ndarray:
    """(n x n) float64 counts |A_i & A_j| of n sets of distinct codes (exact: counts are far below 2^53)."""
    from scipy import sparse  # only when an audit runs (the task registry imports the checks)

    codes, column = np.unique(np.concatenate(list(sets)), return_inverse=True)
    rows = np.repeat(np.arange(len(sets)), [len(a) for a in sets])
    incidence = sparse.csr_matrix((np.ones(len(column)), (rows, column.ravel())), shape=(len(sets), len(codes)))
    return (incidence @ incidence.T).toarray()
