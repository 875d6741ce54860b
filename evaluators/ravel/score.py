"""RAVEL score (Algorithm 1): stabilized whitening per space → patch-level Chamfer visual
similarity and cosine textual similarity → top-k neighbourhood overlap."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from mmbench.evaluators.ravel.chamfer import chamfer_similarity_matrix, pad_patch_sets
from mmbench.evaluators.ravel.neighbours import chance_level, overlap_counts, topk_neighbours
from mmbench.evaluators.ravel.whitening import EPS_DEFAULT, StabilizedWhitening, l2_normalize, postprocess

K_DEFAULT = 100


@dataclass
class RavelResult:
    score: float
    k: int
    eps: float
    n: int
    chance: float
    visual_rank: int | None = None
    text_rank: int | None = None
    per_sample: np.ndarray | None = field(default=None, repr=False)
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("per_sample")
        return d


def _patches(patches, lengths):
    if isinstance(patches, (list, tuple)):
        return pad_patch_sets(patches)
    x = torch.as_tensor(patches)
    if x.ndim != 3:
        raise ValueError(f"visual patch features must be (n, P, d), got {tuple(x.shape)}")
    return x, (None if lengths is None else torch.as_tensor(lengths).long())


def whiten_patches(patches, lengths=None, *, eps: float = EPS_DEFAULT, device=None,
                   dtype=torch.float32) -> tuple[torch.Tensor, StabilizedWhitening]:
    """Fit the visual whitening over all (valid) patch tokens, transform and L2-normalise them."""
    x, lengths = _patches(patches, lengths)
    dev = torch.device(device) if device else torch.device("cpu")
    x = x.to(dev)
    n, p, d = x.shape
    if lengths is not None and bool((lengths != p).any()):
        valid = (torch.arange(p)[None, :] < lengths[:, None]).to(dev)
        fit_rows = x[valid]
    else:
        valid, fit_rows = None, x.reshape(n * p, d)
    w = StabilizedWhitening(eps=eps).fit(fit_rows)
    out = w.transform(x, dtype=dtype)
    if valid is not None:
        out = out * valid[..., None].to(dtype)
    return out, w


def visual_similarity(patches, lengths=None, *, eps: float = EPS_DEFAULT, whiten: bool = True,
                      device=None, dtype=torch.float32, **chamfer_kw) -> tuple[torch.Tensor, int | None]:
    """n×n Chamfer similarity of (whitened, L2-normalised) patch sets; returns (sim, rank)."""
    x, lengths = _patches(patches, lengths)
    if whiten:
        z, w = whiten_patches(x, lengths, eps=eps, device=device, dtype=dtype)
        rank = w.pca.rank
    else:
        z, rank = l2_normalize(x.to(torch.float64)).to(dtype), None
        if lengths is not None:
            z = z * (torch.arange(x.shape[1])[None, :] < lengths[:, None])[..., None].to(dtype)
    sim = chamfer_similarity_matrix(z, lengths, device=device, dtype=dtype, **chamfer_kw)
    return sim, rank


def text_similarity(text, *, eps: float = EPS_DEFAULT, whiten: bool = True) -> tuple[torch.Tensor, int | None]:
    """n×n cosine similarity of (whitened) mean-pooled text features, float64."""
    t = torch.as_tensor(np.asarray(text) if not isinstance(text, torch.Tensor) else text)
    if whiten:
        w = StabilizedWhitening(eps=eps).fit(t)
        z = w.transform(t, dtype=torch.float64)
        return z @ z.T, w.pca.rank
    z = postprocess(t, "raw")
    return z @ z.T, None


def score_from_similarities(sim_v, sim_t, k: int = K_DEFAULT) -> tuple[float, np.ndarray]:
    nv, nt = topk_neighbours(sim_v, k), topk_neighbours(sim_t, k)
    counts = overlap_counts(nv, nt)
    return float(counts.mean() / k), counts


def ravel_score(patches, text, *, k: int = K_DEFAULT, eps: float = EPS_DEFAULT, lengths=None,
                device=None, dtype=torch.float32, whiten_visual: bool = True, whiten_text: bool = True,
                text_sim=None, **chamfer_kw) -> RavelResult:
    """RAVEL score of one encoder (patch features (n,P,d) or ragged list) for one LLM (text (n,d_t)).

    ``text_sim`` may carry a precomputed text similarity matrix (shared across encoders).
    """
    n = len(patches)
    if text_sim is None and len(text) != n:
        raise ValueError(f"{n} images but {len(text)} texts")
    if not 0 < k < n:
        raise ValueError(f"k must be in [1, n-1] (n={n}), got {k}")
    sim_v, v_rank = visual_similarity(patches, lengths, eps=eps, whiten=whiten_visual, device=device,
                                      dtype=dtype, **chamfer_kw)
    t_rank = None
    if text_sim is None:
        text_sim, t_rank = text_similarity(text, eps=eps, whiten=whiten_text)
    score, counts = score_from_similarities(sim_v, text_sim, k)
    return RavelResult(score=score, k=k, eps=eps, n=n, chance=chance_level(n, k), visual_rank=v_rank,
                       text_rank=t_rank, per_sample=counts,
                       meta={"visual_similarity": "symmetric_chamfer", "text_similarity": "cosine",
                             "whiten_visual": whiten_visual, "whiten_text": whiten_text})
