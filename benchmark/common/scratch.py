"""Hidden working folders beside an output folder, and the rule for replacing that output.

A build works in `.NAME.scratch.XXXX` (media, intermediate files) and writes the finished
pool set into `.NAME.building.XXXX` before renaming it to `NAME`; a previous pool set is
moved to `.NAME.old.XXXX` for the moment of the swap. A build killed at any point can leave
such folders behind, so each new build of the same output removes the stale ones first:

* only folders whose name follows these three patterns for this very output name;
* a scratch or building folder only when no live process holds its lock (each one holds
  an exclusive `flock` on the folder's lock file for as long as it works in it; the kernel
  drops the lock when the process dies, SIGKILL included), or, without a lock file, when
  it is older than `STALE_SECONDS`;
* an old folder only when it is a pool set mmbench wrote (or empty).

An output folder itself is only ever replaced when it is recognisably a pool set mmbench
wrote (its manifest names the format `mmbench-poolset/...`) or an empty folder.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from mmbench.common import flocks

log = logging.getLogger(__name__)

LOCK_NAME = ".mmbench-lock"
STALE_SECONDS = 600  # a lock-less working folder older than this is a leftover (its lock is taken at once)
POOLSET_FORMAT_PREFIX = "mmbench-poolset/"
KINDS = ("scratch", "building", "old")


class OutputRefused(RuntimeError):
    """The output path holds something mmbench did not write; it is left untouched."""


def absolute(path: Path) -> Path:
    """`path` made absolute without resolving links, so `--out .` has a name and a parent."""
    return Path(os.path.abspath(path))


def is_mmbench_poolset(folder: Path) -> bool:
    """True when `folder` holds a manifest that names the mmbench pool set format."""
    manifest = Path(folder) / "manifest.json"
    if manifest.is_symlink() or not manifest.is_file():
        return False
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and str(data.get("format", "")).startswith(POOLSET_FORMAT_PREFIX)


def check_replaceable(out: Path) -> None:
    """Raise OutputRefused unless `out` is absent, an empty folder, or a pool set mmbench wrote."""
    out = absolute(out)
    if out.is_symlink():
        raise OutputRefused(f"--out {out} is a symbolic link; give the folder itself")
    if not out.exists():
        return
    if not out.is_dir():
        raise OutputRefused(f"--out {out} exists and is not a folder; refusing to replace it")
    if is_mmbench_poolset(out):
        return
    if any(out.iterdir()):
        raise OutputRefused(f"--out {out} is not empty and is not a pool set mmbench wrote "
                            "(no manifest.json with format mmbench-poolset/...); refusing to replace it; "
                            "choose a new or empty folder")


def _pattern(out: Path, kind: str) -> re.Pattern[str]:
    return re.compile(rf"\.{re.escape(out.name)}\.{kind}\.[A-Za-z0-9_]+")


@contextmanager
def locked_workdir(out: Path, kind: str) -> Iterator[Path]:
    """A new hidden folder `.NAME.KIND.XXXX` beside `out`, locked while the block runs.

    The folder is not removed here (the caller renames or removes it); when it is renamed to become
    the output, the caller removes the lock file from there with `release_lock_file` (the lock itself
    is held until the block ends).
    """
    out = absolute(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.{kind}."))
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        flocks.hold(fd, wait=False)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield folder
    finally:
        os.close(fd)  # releases the lock


def release_lock_file(folder: Path) -> None:
    """Remove the lock file (the lock itself stays held through the open descriptor)."""
    try:
        os.unlink(Path(folder) / LOCK_NAME)
    except FileNotFoundError:
        pass


def _abandoned(folder: Path, now: float) -> bool:
    """A scratch or building folder no live process works in."""
    lock = folder / LOCK_NAME
    if not lock.is_file() or lock.is_symlink():
        try:
            return now - folder.stat().st_mtime > STALE_SECONDS
        except OSError:
            return False
    if not flocks.SUPPORTED:
        return now - lock.stat().st_mtime > STALE_SECONDS
    return flocks.is_free(lock)  # False while a live build holds it


def clean_stale(out: Path) -> list[Path]:
    """Remove the leftovers of killed builds of `out` (see the module notes); return what was removed."""
    out = absolute(out)
    if not out.parent.is_dir():
        return []
    now = time.time()
    removed = []
    for entry in sorted(out.parent.iterdir()):
        if entry.is_symlink() or not entry.is_dir():
            continue
        kind = next((k for k in KINDS if _pattern(out, k).fullmatch(entry.name)), None)
        if kind is None:
            continue
        if kind == "old":
            stale = is_mmbench_poolset(entry) or not any(entry.iterdir())
        else:
            stale = _abandoned(entry, now)
        if stale:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
            log.warning("removed %s, left by an interrupted build of %s", entry, out)
    return removed
