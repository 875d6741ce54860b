"""Values of deterministic scipy computations remembered across processes, so a warm run need not import scipy.

Importing scipy.stats takes longer than a whole warm `mmbench run` does without it (0.45 s of about 0.5 s on the
development machine), yet the run summary prints only a handful of its values: the design-time floors (a noncentral
t power solved by a root finder) and two or three normal quantiles. Those depend on their arguments and on scipy's
version alone, so they are kept under MMBENCH_HOME/scipy-values/<version>.json, one file per installed scipy
version: the stored float is the one scipy returned (JSON keeps a float's exact bits), hence the same printed
numbers. The file carries a SHA-256 of its values; a file that is unreadable or fails that check is ignored and
rewritten, never trusted. Writes are atomic (a temporary file and a rename), so concurrent processes at worst
compute a value twice.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import numbers
import os
import tempfile
from pathlib import Path
from typing import Callable

from mmbench.common.distributions import distribution_versions
from mmbench.common.home import mmbench_home

log = logging.getLogger(__name__)

FORMAT = "mmbench-scipy-values/1"
_copies: dict[Path | None, dict[str, float | None]] = {}  # this process's copy of each file it used


@functools.lru_cache(maxsize=None)
def _scipy_version() -> str | None:
    return distribution_versions(("scipy",))["scipy"]


def _path() -> Path | None:
    version = _scipy_version()
    return None if version is None else mmbench_home() / "scipy-values" / f"{version}.json"


def _check(values: dict[str, float | None]) -> str:
    return hashlib.sha256(json.dumps([FORMAT, values], sort_keys=True).encode()).hexdigest()


def _load(path: Path | None) -> dict[str, float | None]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        values = data["values"]
        if data["format"] != FORMAT or data["check"] != _check(values):
            raise ValueError("does not match its own digest")
        if not all(v is None or isinstance(v, float) for v in values.values()):
            raise ValueError("holds a value that is not a float")
        return values
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.info("ignoring the remembered scipy values in %s (%s: %s)", path, type(exc).__name__, exc)
        return {}


def _store(path: Path, values: dict[str, float | None]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"format": FORMAT, "check": _check(values), "values": values}, fh, sort_keys=True)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only home costs a recomputation next time, nothing else
        log.info("could not remember scipy values in %s (%s)", path, exc)


def remembered(name: str, args: tuple[float | int, ...], compute: Callable[[], float | None]) -> float | None:
    """`compute()` (a pure function of `name` and `args` under this scipy version), or the value it returned before."""
    path = _path()
    values = _copies.get(path)
    if values is None:
        values = _copies[path] = _load(path)
    key = json.dumps([name, *(int(a) if isinstance(a, numbers.Integral) else float(a) for a in args)])
    if key in values:
        return values[key]
    value = compute()
    value = None if value is None else float(value)
    values[key] = value
    if path is not None:
        _store(path, {**_load(path), key: value})
    return value


def forget() -> None:
    """Drop this process's copies (the next call reads the file again)."""
    _copies.clear()
    _scipy_version.cache_clear()
