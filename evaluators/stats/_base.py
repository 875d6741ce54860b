"""Shared helpers: result dataclasses that serialise to plain JSON, and input checks."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

Values = Sequence[float] | np.ndarray  # a sample: a list of numbers or a 1-d array


def jsonable(obj: Any) -> Any:
    """Plain-JSON form: numpy scalars and arrays to Python, non-finite floats to None."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        return value if math.isfinite(value) else None
    return obj


@dataclass
class StatResult:
    """Base of every result dataclass: `to_dict()` gives JSON-ready values (NaN -> None)."""

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))


def as_vector(values: Values, name: str = "values") -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D sequence, got shape {arr.shape}")
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return arr


def as_pair(a: Values, b: Values) -> tuple[np.ndarray, np.ndarray]:
    """Two paired samples of equal length (query i of `a` is query i of `b`)."""
    x, y = as_vector(a, "a"), as_vector(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    if x.size == 0:
        raise ValueError("paired samples are empty")
    return x, y


# Scores are means of per-item metrics on a grid such as k/5: two equal means can differ by ~1e-17 after
# subtraction, so "does not vary" is an sd at or below this tolerance, never `sd == 0`.
SD_TOLERANCE = 1e-9


def sample_sd(values: Sequence[float] | np.ndarray) -> float:
    """The sample sd (ddof 1) of `values`, 0.0 for fewer than two or for values that do not vary (within
    `SD_TOLERANCE`), so every caller's "does not vary" branch sees an exact 0."""
    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        return 0.0
    sd = float(np.std(arr, ddof=1))
    return sd if sd > SD_TOLERANCE else 0.0
