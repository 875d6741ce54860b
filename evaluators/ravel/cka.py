"""Linear centred kernel alignment (Kornblith et al., 2019) on row-L2-normalised features.

G = H Z Zᵀ H, CKA(X, Y) = ⟨G_X, G_Y⟩_F / (‖G_X‖_F ‖G_Y‖_F). Invariant to orthogonal transforms,
isotropic scaling and zero-padding of feature dimensions.
"""
from __future__ import annotations

import numpy as np


def centered_gram(z, normalize_rows: bool = True) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    if normalize_rows:
        z = z / np.linalg.norm(z, axis=1, keepdims=True).clip(1e-12)
    g = z @ z.T
    g = g - g.mean(0, keepdims=True)
    return g - g.mean(1, keepdims=True)


def cka_from_grams(gx: np.ndarray, gy: np.ndarray) -> float:
    return float((gx * gy).sum() / (np.linalg.norm(gx) * np.linalg.norm(gy)).clip(1e-30))


def linear_cka(x, y, normalize_rows: bool = True) -> float:
    return cka_from_grams(centered_gram(x, normalize_rows), centered_gram(y, normalize_rows))


def cka_matrix(features: list) -> np.ndarray:
    grams = [centered_gram(z) for z in features]
    m = len(grams)
    out = np.eye(m)
    for i in range(m):
        for j in range(i + 1, m):
            out[i, j] = out[j, i] = cka_from_grams(grams[i], grams[j])
    return out
