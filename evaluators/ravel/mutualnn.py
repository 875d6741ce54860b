"""MutualNN (Huh et al., 2024) on pooled features, with the Appendix J post-processing variants.

Each space is post-processed independently (fitted on the calibration sample only), row-L2
normalised, and the top-k cosine neighbourhoods are compared (binary overlap / k, ties → lower
index, self excluded) — no patch matching, rank weighting, hub correction or chance adjustment.
``variant="raw"`` is the original MutualNN; ``"whiten"`` is pooled RAVEL (Table 2, row 2).
"""
from __future__ import annotations

from mmbench.evaluators.ravel.neighbours import mutual_knn_score
from mmbench.evaluators.ravel.whitening import EPS_DEFAULT, postprocess


def mutualnn_score(visual, text, *, k: int = 100, variant: str = "raw", text_variant: str | None = None,
                   eps: float = EPS_DEFAULT, q: int = 4) -> float:
    zv = postprocess(visual, variant, eps=eps, q=q)
    zt = postprocess(text, text_variant or variant, eps=eps, q=q)
    return mutual_knn_score(zv @ zv.T, zt @ zt.T, k)[0]
