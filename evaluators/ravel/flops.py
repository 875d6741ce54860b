"""FLOPs accounting per method (Appendix G.2): feature extraction + post-processing + scoring.

Conventions (stated): one multiply-add = 2 FLOPs; a transformer forward costs 2·params·tokens
(attention's sequence-quadratic term ignored); a symmetric d×d eigendecomposition is counted as
9·d³ (tridiagonalisation + QR iterations, the usual textbook constant); top-k selection as
n²·log2(k) comparisons; each GW conditional-gradient iteration as 4·n³ (tensor–coupling products
for the square loss) + n³ (the exact OT linear subproblem), times the number of starts (`gw.start_plans`:
product and entropic warm start); an L1-GW iteration as 2·3·n⁴ (two gradient evaluations of
|Cv − Ct|·T) + n³. CCA runs on the full features (no PCA), as the authors' default. Max-reductions count 1
FLOP per element.
"""
from __future__ import annotations

import math

METHODS = ("ravel", "mutualnn", "mutualnn_whiten", "patch_raw", "rsa", "cca", "cka", "gw", "gw_l1")
GW_STARTS = 2  # product coupling + entropic warm start (the warm start's Sinkhorn cost not counted)


def pca_flops(rows: int, d: int, r: int | None = None) -> float:
    r = d if r is None else r
    return 2 * rows * d * d + 9 * d ** 3 + 2 * rows * d * r + 3 * rows * r


def chamfer_flops(n: int, p: int, d: int) -> float:
    pairs = n * (n - 1) / 2
    return pairs * (2 * p * p * d + 2 * p * p + 4 * p)


def extraction_flops(n: int, *, vision_params: float, image_tokens: int, llm_params: float, text_tokens: float) -> dict:
    return {"vision_forward": 2.0 * vision_params * image_tokens * n,
            "llm_forward": 2.0 * llm_params * text_tokens * n}


def method_flops(method: str, *, n: int, p: int, d_v: int, d_t: int, vision_params: float = 0.0,
                 image_tokens: int | None = None, llm_params: float = 0.0, text_tokens: float = 0.0,
                 k: int = 100, r_v: int | None = None, r_t: int | None = None, gw_iters: int = 100,
                 cca_components: int = 10) -> dict:
    """Breakdown dict (FLOPs) with a ``total`` entry."""
    method = method.replace("-", "_")
    if method in ("mutualnn_pca", "mutualnn_abtt"):
        method = "mutualnn_whiten"
    elif method in ("mutualnn_centered", "mutualnn_standardized"):
        method = "mutualnn"
    elif method.endswith("_whiten") and method != "mutualnn_whiten":
        method = method[: -len("_whiten")]
    out = extraction_flops(n, vision_params=vision_params, image_tokens=image_tokens or p,
                           llm_params=llm_params, text_tokens=text_tokens)
    r_v = min(d_v, n * p - 1) if r_v is None else r_v
    r_t = min(d_t, n - 1) if r_t is None else r_t
    topk = 2 * n * n * math.log2(max(k, 2))
    pool = n * p * d_v
    if method == "ravel":
        out.update(visual_pca=pca_flops(n * p, d_v, r_v), text_pca=pca_flops(n, d_t, r_t),
                   chamfer=chamfer_flops(n, p, r_v), text_similarity=2 * n * n * r_t, topk=topk)
    elif method == "patch_raw":
        out.update(normalise=3 * n * p * d_v, chamfer=chamfer_flops(n, p, d_v), text_similarity=2 * n * n * d_t,
                   topk=topk)
    elif method in ("mutualnn", "mutualnn_whiten"):
        out.update(pool=pool, similarity=2 * n * n * (d_v + d_t), topk=topk)
        if method == "mutualnn_whiten":
            out.update(visual_pca=pca_flops(n, d_v, min(d_v, n - 1)), text_pca=pca_flops(n, d_t, r_t))
    elif method == "rsa":
        out.update(pool=pool, similarity=2 * n * n * (d_v + d_t), correlation=4 * n * n)
    elif method == "cka":
        out.update(pool=pool, gram=2 * n * n * (d_v + d_t), centering=4 * n * n, inner=3 * n * n)
    elif method == "cca":
        dv, dt = d_v, d_t
        fits = 6 + 1  # alpha grid + final refit
        per_fit = 2 * n * (dv * dv + dt * dt + dv * dt) + 9 * (dv ** 3 + dt ** 3) + 4 * min(dv, dt) ** 2 * max(dv, dt)
        out.update(pool=pool, fits=fits * per_fit, project=2 * n * cca_components * (dv + dt))
    elif method == "gw":
        out.update(pool=pool, distances=2 * n * n * (d_v + d_t) + 2 * n * n,
                   solver=GW_STARTS * gw_iters * 5.0 * n ** 3)
    elif method == "gw_l1":
        out.update(pool=pool, distances=2 * n * n * (d_v + d_t) + 2 * n * n,
                   solver=GW_STARTS * gw_iters * (6.0 * n ** 4 + n ** 3))
    else:
        raise ValueError(f"unknown method {method!r}; choose from {METHODS}")
    out["total"] = float(sum(out.values()))
    return out
