"""Representational similarity analysis (Kriegeskorte et al., 2008).

Within-modality cosine similarity matrices of the (post-processed, row-L2) pooled features;
score = correlation of their strict upper triangles (Pearson by default, as in the authors'
released RSA; ``method="spearman"`` for the rank version).
"""
from __future__ import annotations

import numpy as np
from scipy import stats

from mmbench.evaluators.ravel.whitening import postprocess


def rsa_score(visual, text, *, variant: str = "raw", method: str = "pearson", eps: float = 1e-4) -> float:
    zv = postprocess(visual, variant, eps=eps).numpy()
    zt = postprocess(text, variant, eps=eps).numpy()
    iu = np.triu_indices(len(zv), 1)
    a, b = np.clip((zv @ zv.T)[iu], -1, 1), np.clip((zt @ zt.T)[iu], -1, 1)
    if method == "spearman":
        return float(stats.spearmanr(a, b).statistic)
    return float(stats.pearsonr(a, b).statistic)
