"""Hyperparameter sweeps (k, ε, n) and the patch-level vs pooled ablation (Table 2)."""
from __future__ import annotations

import numpy as np
import torch

from mmbench.evaluators.ravel.pooling import pooled
from mmbench.evaluators.ravel.neighbours import chance_level
from mmbench.evaluators.ravel.score import score_from_similarities, text_similarity, visual_similarity
from mmbench.evaluators.ravel.whitening import EPS_DEFAULT


def sweep_k(patches, text, ks, *, eps: float = EPS_DEFAULT, lengths=None, device=None) -> list[dict]:
    sv, _ = visual_similarity(patches, lengths, eps=eps, device=device)
    st, _ = text_similarity(text, eps=eps)
    return [{"param": "k", "value": k, "score": score_from_similarities(sv, st, k)[0],
             "chance": chance_level(len(text), k)} for k in ks if 0 < k < len(text)]


def sweep_eps(patches, text, epss, *, k: int = 100, lengths=None, device=None) -> list[dict]:
    out = []
    for e in epss:
        sv, _ = visual_similarity(patches, lengths, eps=e, device=device)
        st, _ = text_similarity(text, eps=e)
        out.append({"param": "eps", "value": e, "score": score_from_similarities(sv, st, k)[0]})
    return out


def sweep_n(patches, text, ns, *, k: int = 100, eps: float = EPS_DEFAULT, seed: int = 0, lengths=None,
            device=None) -> list[dict]:
    """Random subsets of size n (seeded) of the calibration pairs; whitening re-fitted on each."""
    out = []
    total = len(text)
    for n in ns:
        if n > total or k >= n:
            continue
        idx = np.sort(np.random.default_rng(seed).choice(total, n, replace=False))
        sub_len = None if lengths is None else np.asarray(lengths)[idx]
        sv, _ = visual_similarity(np.asarray(patches)[idx], sub_len, eps=eps, device=device)
        st, _ = text_similarity(np.asarray(text)[idx], eps=eps)
        out.append({"param": "n", "value": n, "score": score_from_similarities(sv, st, k)[0],
                    "chance": chance_level(n, k)})
    return out


def patch_pooled_ablation(patches, text, *, k: int = 100, eps: float = EPS_DEFAULT, lengths=None,
                          device=None) -> dict:
    """Table 2: pooled raw (MutualNN), pooled + whitening, patch w/o whitening, patch + whitening (RAVEL)."""
    pv = torch.from_numpy(pooled(patches, lengths))[:, None, :]
    res = {}
    for name, src, white in (("mutualnn", pv, False), ("mutualnn+whiten", pv, True),
                             ("patch", patches, False), ("patch+whiten", patches, True)):
        sv, _ = visual_similarity(src, None if src is pv else lengths, eps=eps, whiten=white, device=device)
        st, _ = text_similarity(text, eps=eps, whiten=white)
        res[name] = score_from_similarities(sv, st, k)[0]
    return res
