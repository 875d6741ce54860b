"""Pooled visual features: the mean over each image's valid patch tokens (the pooled baselines' input)."""
from __future__ import annotations

from typing import Any

import numpy as np


def pooled(patches: Any, lengths: Any = None) -> np.ndarray:
    """Mean over (valid) patch tokens -> (n, d), float64."""
    x = np.asarray(patches, dtype=np.float64)
    if lengths is None:
        out: np.ndarray = x.mean(1)
        return out
    m = (np.arange(x.shape[1])[None, :] < np.asarray(lengths)[:, None])[..., None]
    mean: np.ndarray = (x * m).sum(1) / m.sum(1)
    return mean
