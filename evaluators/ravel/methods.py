"""Name → scorer dispatch used by the CLI: RAVEL and every training-free baseline.

All scorers take patch features (n, P, d) (+ optional lengths) and text features (n, d_t) and
return one float, higher = better. Pooled baselines use the mean over valid patch tokens.
"""
from __future__ import annotations

from mmbench.evaluators.ravel.cca import cca_score
from mmbench.evaluators.ravel.cka import linear_cka
from mmbench.evaluators.ravel.pooling import pooled
from mmbench.evaluators.ravel.gw import gw_score
from mmbench.evaluators.ravel.mutualnn import mutualnn_score
from mmbench.evaluators.ravel.rsa import rsa_score
from mmbench.evaluators.ravel.score import ravel_score, score_from_similarities, text_similarity, visual_similarity

POST = ("centered", "standardized", "pca", "abtt", "whiten")
OPT_IN = ("gw-l1",)  # exact L1 GW is O(n^4) per iteration: named explicitly, never part of all/baselines
METHODS = ("ravel", "mutualnn", *(f"mutualnn-{v}" for v in POST), "patch-raw", "rsa", "rsa-whiten", "cca",
           "cca-whiten", "cka", "gw", "gw-whiten", *OPT_IN)
BASELINES = tuple(m for m in METHODS if m != "ravel" and m not in OPT_IN)


def parse_methods(spec: str) -> list[str]:
    out = []
    for m in spec.split(","):
        m = m.strip()
        if m == "all":
            out.extend(m for m in METHODS if m not in OPT_IN)
        elif m == "baselines":
            out.extend(BASELINES)
        elif m in METHODS:
            out.append(m)
        elif m:
            raise ValueError(f"unknown method {m!r}; choose from {', '.join(METHODS)}, all, baselines")
    return list(dict.fromkeys(out))


def compute(method: str, patches, text, *, lengths=None, k: int = 100, eps: float = 1e-4, q: int = 4,
            device=None) -> float:
    if method == "ravel":
        return ravel_score(patches, text, k=k, eps=eps, lengths=lengths, device=device).score
    if method == "patch-raw":
        sv, _ = visual_similarity(patches, lengths, whiten=False, device=device)
        st, _ = text_similarity(text, whiten=False)
        return score_from_similarities(sv, st, k)[0]
    v = pooled(patches, lengths)
    if method == "mutualnn":
        return mutualnn_score(v, text, k=k, variant="raw")
    if method.startswith("mutualnn-"):
        return mutualnn_score(v, text, k=k, variant=method.split("-", 1)[1], eps=eps, q=q)
    variant = "whiten" if method.endswith("-whiten") else "raw"
    base = method.split("-")[0]
    if base == "rsa":
        return rsa_score(v, text, variant=variant, eps=eps)
    if base == "cca":
        return cca_score(v, text, variant=variant)
    if base == "cka":
        return linear_cka(v, text)
    if method == "gw-l1":
        return gw_score(v, text, loss="l1")  # the authors' absolute-difference objective (O(n^4) per iteration)
    if base == "gw":
        return gw_score(v, text, variant=variant)
    raise ValueError(f"unknown method {method!r}")
