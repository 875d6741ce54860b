"""Advisory `flock` locks that say "a live process works in this folder".

A writer takes an exclusive lock on a file or folder for as long as it works and never releases it
by hand: the kernel drops it when the process ends, SIGKILL included. A cleaner asks `is_free` before
touching a leftover: a lock it can take itself belongs to nobody alive. Build folders
(`mmbench.common.scratch`) lock a file inside the folder; board staging folders (`leaderboards.store`) lock
the folder itself. What to do where `flock` does not exist (not POSIX) is each caller's own rule
(an age), so `SUPPORTED` tells them.
"""
from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

SUPPORTED = fcntl is not None


def hold(fd: int, *, wait: bool) -> None:
    """Take the exclusive lock on open descriptor `fd` (blocking when `wait`); a no-op without flock.
    Raises OSError when `wait` is False and another process holds it."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)


def is_free(path: Path) -> bool:
    """True when no process holds an flock on `path` (a file or a folder); False when one does, when
    `path` cannot be opened, or where this system has no flock (callers check `SUPPORTED` first)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True  # taken by us: nobody else had it (closing the descriptor releases it)
    except OSError:
        return False
    finally:
        os.close(fd)
