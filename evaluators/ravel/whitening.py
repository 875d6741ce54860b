"""Stabilized PCA whitening (RAVEL eq. 5) and the post-processing variants of Appendix J.

The transform is fitted per representation space on the calibration data only:

    q = (Λ + εI)^(-1/2) Uᵀ (z − μ),   ẑ = q / ‖q‖₂

with U, Λ the eigenvectors / eigenvalues of the (unbiased, 1/(N−1)) covariance matrix,
restricted to the *positive* eigenvalues (λ > max(floor, λ_max·d·eps₆₄)), ε = 1e-4.

Numerics: the mean and covariance are accumulated in float64 in chunks (two passes: mean,
then centred scatter, so no E[x²]−E[x]² cancellation), the eigendecomposition is float64.
Only the final projection is done in the working dtype (float32 by default) in chunks, so an
(N × d) matrix of all patch tokens never needs to be duplicated in float64.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import torch

EPS_DEFAULT = 1e-4
EIGENVALUE_FLOOR = 1e-10
POSTPROCESS_VARIANTS = ("raw", "centered", "standardized", "pca", "abtt", "whiten")


def _as_tensor(x, device=None) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x if device is None else x.to(device)
    return torch.from_numpy(np.ascontiguousarray(x)).to(device or "cpu")


def _chunks(n: int, size: int) -> Iterable[slice]:
    for s in range(0, n, size):
        yield slice(s, min(n, s + size))


def l2_normalize(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps)


@dataclass
class PCAFit:
    """Mean, retained eigenvectors (columns, descending eigenvalue) and eigenvalues, float64."""

    mean: torch.Tensor
    components: torch.Tensor
    eigenvalues: torch.Tensor
    n_samples: int
    dropped: int = 0
    meta: dict = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return int(self.eigenvalues.numel())


def fit_pca(x, *, chunk_rows: int = 65536, floor: float = EIGENVALUE_FLOOR, device=None) -> PCAFit:
    """Fit PCA on rows of ``x`` (N × d, or anything reshapeable to it), float64 throughout.

    Only directions with positive eigenvalue are kept (``λ > max(floor, λ_max·d·eps)``, the
    numerical-rank threshold), ordered by decreasing eigenvalue; eigenvector signs are fixed
    so that the largest-magnitude coordinate of each eigenvector is positive (deterministic).
    """
    x = _as_tensor(x, device)
    x = x.reshape(-1, x.shape[-1])
    n, d = x.shape
    if n < 2:
        raise ValueError(f"PCA needs at least 2 rows, got {n}")
    if not torch.isfinite(x).all():
        raise ValueError("non-finite features given to PCA")
    dev = x.device
    total = torch.zeros(d, dtype=torch.float64, device=dev)
    for sl in _chunks(n, chunk_rows):
        total += x[sl].to(torch.float64).sum(0)
    mean = total / n
    scatter = torch.zeros(d, d, dtype=torch.float64, device=dev)
    for sl in _chunks(n, chunk_rows):
        c = x[sl].to(torch.float64) - mean
        scatter += c.T @ c
    cov = scatter / (n - 1)
    cov = 0.5 * (cov + cov.T)
    evals, evecs = torch.linalg.eigh(cov)  # ascending
    evals = evals.flip(0)
    evecs = evecs.flip(1)
    tol = max(floor, float(evals[0].clamp_min(0)) * d * np.finfo(np.float64).eps)
    keep = evals > tol
    evals, evecs = evals[keep], evecs[:, keep]
    if evals.numel() == 0:
        raise ValueError("PCA has no positive-variance direction (constant features)")
    idx = evecs.abs().argmax(0)
    signs = torch.sign(evecs[idx, torch.arange(evecs.shape[1], device=dev)])
    signs[signs == 0] = 1
    evecs = evecs * signs
    return PCAFit(mean=mean, components=evecs, eigenvalues=evals, n_samples=n, dropped=int((~keep).sum()),
                  meta={"tolerance": tol, "dim": d})


@dataclass
class StabilizedWhitening:
    """``(Λ+εI)^(-1/2) Uᵀ(z−μ)`` followed by L2 normalisation, fitted with :meth:`fit`."""

    eps: float = EPS_DEFAULT
    normalize: bool = True
    floor: float = EIGENVALUE_FLOOR
    pca: PCAFit | None = None

    def fit(self, x, **kw) -> "StabilizedWhitening":
        self.pca = fit_pca(x, floor=self.floor, **kw)
        return self

    @property
    def matrix(self) -> torch.Tensor:
        """d × r projection matrix U (Λ+εI)^(-1/2), float64."""
        assert self.pca is not None, "fit first"
        return self.pca.components / torch.sqrt(self.pca.eigenvalues + self.eps)

    def transform(self, x, *, dtype=torch.float32, chunk_rows: int = 65536) -> torch.Tensor:
        """Transform rows of ``x`` (…, d) → (…, r). Centering in float64, projection in ``dtype``."""
        assert self.pca is not None, "fit first"
        x = _as_tensor(x, self.pca.mean.device)
        lead = x.shape[:-1]
        flat = x.reshape(-1, x.shape[-1])
        w64 = self.matrix
        w = w64.to(dtype)
        out = torch.empty(flat.shape[0], w.shape[1], dtype=dtype, device=flat.device)
        for sl in _chunks(flat.shape[0], chunk_rows):
            c = flat[sl].to(torch.float64) - self.pca.mean
            q = (c @ w64) if dtype == torch.float64 else (c.to(dtype) @ w)
            if self.normalize:
                q = l2_normalize(q.to(torch.float64)).to(dtype)
            out[sl] = q
        return out.reshape(*lead, w.shape[1])

    def fit_transform(self, x, **kw) -> torch.Tensor:
        return self.fit(x).transform(x, **kw)


def whiten(x, eps: float = EPS_DEFAULT, *, fit_on=None, dtype=torch.float32) -> torch.Tensor:
    """One-shot stabilized whitening + L2 (fit on ``fit_on`` rows if given, else on ``x``)."""
    w = StabilizedWhitening(eps=eps).fit(x if fit_on is None else fit_on)
    return w.transform(x, dtype=dtype)


def postprocess(x, variant: str = "whiten", *, eps: float = EPS_DEFAULT, q: int = 4,
                std_eps: float = 1e-5, dtype=torch.float64) -> torch.Tensor:
    """Appendix J post-processing of pooled features (n × d); every variant ends with row-L2.

    raw: R(X) · centered: R(X−μ) · standardized: R((X−μ)/(σ+1e-5)) (population σ) ·
    pca: R(Z) with Z the PCA scores on the positive-eigenvalue subspace · abtt: R(Z[:, q:])
    (drop the q leading directions) · whiten: R(Z diag(λ+ε)^(-1/2)).
    """
    x = _as_tensor(x).to(torch.float64)
    if variant == "raw":
        out = x
    elif variant in ("centered", "center"):
        out = x - x.mean(0)
    elif variant in ("standardized", "std"):
        out = (x - x.mean(0)) / (x.std(0, correction=0) + std_eps)
    elif variant in ("pca", "abtt", "whiten", "pca_whiten"):
        fit = fit_pca(x)
        z = (x - fit.mean) @ fit.components
        if variant == "abtt":
            if q >= z.shape[1]:
                raise ValueError(f"ABTT q={q} removes all {z.shape[1]} directions")
            z = z[:, q:]
        elif variant in ("whiten", "pca_whiten"):
            z = z / torch.sqrt(fit.eigenvalues + eps)
        out = z
    else:
        raise ValueError(f"unknown post-processing variant {variant!r}; choose from {POSTPROCESS_VARIANTS}")
    return l2_normalize(out).to(dtype)
