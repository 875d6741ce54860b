"""Readers of precomputed RAVEL features and score tables: `.npy`/`.npz` arrays and CSV/JSON(L) tables.

Arrays: `.npy` (n, P, d) patch arrays or (n, d) pooled arrays, or `.npz` with `patches` (and optional
`lengths`), stand in for a vision encoder (`read_patch_array`); `.npy` (n, d_t) arrays for a language model
(`read_text_array`). Tables: a score file or a ground-truth table (`read_table`); the shipped Table 7
(`table7_path`). Every error is one line naming the file (and the member or the shape).
"""
from __future__ import annotations

import zipfile
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from mmbench.common.errors import CLIError

TABLE7 = "ravel_downstream_table7.csv"


class FeatureFileError(CLIError):
    """A feature array or table file is missing or malformed; the message names the file."""


def table7_path() -> Path:
    """The shipped Table 7 of the RAVEL paper (210 MLLMs: 70 encoders x 3 language models)."""
    return Path(str(resources.files("mmbench.evaluators").joinpath("data", TABLE7)))


def _np_load(path: Path, flag: str) -> np.ndarray | np.lib.npyio.NpzFile:
    if not path.is_file():
        raise FeatureFileError(f"{flag} {path}: no such file")
    try:
        loaded: np.ndarray | np.lib.npyio.NpzFile = np.load(path, allow_pickle=False)
        return loaded
    except (ValueError, EOFError, zipfile.BadZipFile):  # numpy takes other files for pickles: no detail helps
        raise FeatureFileError(f"{flag} {path}: not a numpy .npy/.npz array (or a damaged one)") from None
    except OSError as exc:
        raise FeatureFileError(f"{flag} {path}: cannot read ({exc.strerror or exc})") from None


def read_patch_array(path: str | Path) -> tuple[np.ndarray, np.ndarray | None]:
    """Patch features (n, P, d) float32 and optional lengths; (n, d) is one token per image."""
    path = Path(path)
    loaded = _np_load(path, "--features")
    lengths = None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded as z:
            if not z.files:
                raise FeatureFileError(f"--features {path}: the .npz holds no array")
            x = z["patches"] if "patches" in z else z[z.files[0]]
            lengths = z["lengths"] if "lengths" in z else None
    else:
        x = loaded
    if x.ndim == 2:
        x = x[:, None, :]
    if x.ndim != 3 or not np.issubdtype(x.dtype, np.number):
        raise FeatureFileError(f"--features {path}: expected (n, P, d) or (n, d) numbers, got {x.dtype} {x.shape}")
    if lengths is not None and (lengths.shape != (x.shape[0],) or not np.issubdtype(lengths.dtype, np.integer)):
        raise FeatureFileError(f"--features {path}: member 'lengths' must be {x.shape[0]} integers, got "
                               f"{lengths.dtype} {lengths.shape}")
    return x.astype(np.float32, copy=False), lengths


def read_text_array(path: str | Path) -> np.ndarray:
    """Text features (n, d_t) as float32."""
    path = Path(path)
    x = _np_load(path, "--text-features")
    if isinstance(x, np.lib.npyio.NpzFile) or x.ndim != 2 or not np.issubdtype(x.dtype, np.number):
        what = "an .npz archive" if isinstance(x, np.lib.npyio.NpzFile) else f"{x.dtype} {x.shape}"
        raise FeatureFileError(f"--text-features {path}: expected an .npy array (n, d_t) of numbers, got {what}")
    return x.astype(np.float32)


def read_table(path: str | Path, flag: str) -> pd.DataFrame:
    """A CSV, JSON (records) or JSONL table; `flag` names the option in errors."""
    path = Path(path)
    if not path.is_file():
        raise FeatureFileError(f"{flag} {path}: no such file")
    try:
        if str(path).endswith(".csv"):
            return pd.read_csv(path)
        return pd.read_json(path, lines=str(path).endswith(".jsonl"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise FeatureFileError(f"{flag} {path}: {' '.join(str(exc).split())}") from None
