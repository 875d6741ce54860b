"""Values of deterministic scipy computations remembered across processes, so a warm run need not import scipy.

Importing scipy.stats takes longer than a whole warm `mmbench run` does without it (0.45 s of about 0.5 s on the
development machine), yet the run summary prints only a handful of its values: the design-time floors (a noncentral
t power solved by a root finder) and two or three normal quantiles. Those depend on their arguments and on scipy's
version alone, so they are kept under MMBENCH_HOME/scipy-values/<version>.json, one file per installed scipy
version: the stored float is the one scipy returned (JSON keeps a float's exact bits), hence the same printed
numbers. The file carries a SHA-256 of its values; a file that is unreadable or fails that check is ignored and
rewritten. The digest only tells a damaged file from a whole one: anyone can edit a value and seal the file again.
So every value is also checked on read by its definition's own rule (`remembered`'s `valid`: finite, within the
bounds the definition allows, or equal to an independent computation where one is cheap) and recomputed, and the
entry replaced, when it fails. New entries are merged into the file under an flock on `<file>.lock` (as the digest
memo is), so concurrent writers keep each other's entries; the write goes to a temporary file renamed into place,
and a failed write (a full disk) leaves no temporary file behind.
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

from mmbench.common import flocks
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


def _write_text(path: Path, text: str) -> None:
    """`text` into `path` through a temporary sibling and a rename; the temporary file is removed if anything fails."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _store(path: Path, new: dict[str, float | None]) -> None:
    """Merge `new` into the file under its lock: entries other processes wrote meanwhile are kept."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:  # a read-only home costs a recomputation next time, nothing else
        log.info("could not remember scipy values in %s (%s)", path, exc)
        return
    try:
        flocks.hold(fd, wait=True)
        values = {**_load(path), **new}
        _write_text(path, json.dumps({"format": FORMAT, "check": _check(values), "values": values}, sort_keys=True))
    except OSError as exc:  # a full disk: the same, and no temporary file left
        log.info("could not remember scipy values in %s (%s)", path, exc)
    finally:
        os.close(fd)   # releases the lock


def remembered(name: str, args: tuple[float | int, ...], compute: Callable[[], float | None],
               valid: Callable[[float | None], bool]) -> float | None:
    """`compute()` (a pure function of `name` and `args` under this scipy version), or the value it returned before
    when `valid(value)` holds for it (the definition's range check); a remembered value that fails it is computed
    again and replaced. A computed value that fails it is returned but not remembered."""
    path = _path()
    values = _copies.get(path)
    if values is None:
        values = _copies[path] = _load(path)
    key = json.dumps([name, *(int(a) if isinstance(a, numbers.Integral) else float(a) for a in args)])
    if key in values:
        if _holds(valid, values[key]):
            return values[key]
        log.warning("the remembered value of %s in %s is %r, outside what its definition allows; computed again",
                    key, path, values[key])
    value = compute()
    value = None if value is None else float(value)
    if not _holds(valid, value):
        values.pop(key, None)
        return value
    values[key] = value
    if path is not None:
        _store(path, {key: value})
    return value


def _holds(valid: Callable[[float | None], bool], value: float | None) -> bool:
    try:
        return bool(valid(value))
    except (TypeError, ValueError, ArithmeticError):
        return False


def forget() -> None:
    """Drop this process's copies (the next call reads the file again)."""
    _copies.clear()
    _scipy_version.cache_clear()
