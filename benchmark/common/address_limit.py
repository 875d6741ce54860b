"""Running under an address-space limit (`ulimit -v`, RLIMIT_AS): finish or fail in one line, never hang.

OpenBLAS reserves a memory buffer per thread when it loads (numpy's and scipy's copies each); under a low limit
that reservation fails and its loader can spin for good inside the import, with no error and no progress. When
a limit is set, the BLAS and OpenMP thread counts default to one (a variable the user set is kept), so the
libraries load within the limit. What still does not fit (a shared library that cannot be mapped, a
`MemoryError`) is reported by `out_of_memory_message` in one line naming the limit. Below `MIN_ADDRESS_SPACE`
the scientific libraries cannot even load (at 400 MB a C++ extension of scipy aborts the process while it
loads, which no handler can catch), so a command is refused before it starts (`too_small_message`).

An allocation that fails later is named as memory wherever it happens: `is_out_of_memory` tells such an error
from any other (a `MemoryError`, pyarrow's `ArrowMemoryError`, a shared object that cannot be mapped, torch's
"can't allocate memory"), and every catch-all that turns errors into another message (an unreadable table, a
model that cannot be loaded, a damaged cache pack, a failed document) lets it through. `memory_step` names the
step it happened in; the line states the limits in force (`limits_in_force`: RLIMIT_AS and the cgroup's
memory.max).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, MutableMapping

from mmbench.common.errors import CLIError

MIN_ADDRESS_SPACE = 512 * 2**20   # measured: numpy, scipy, pyarrow and PIL loaded, before any data
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
NO_ROOM = ("failed to map segment", "cannot allocate memory", "can't allocate memory", "cannot map zero-fill pages",
            "out of memory", "std::bad_alloc")
# cgroup v2's memory.max, then v1's limit (v1 writes a huge number, not "max", when there is none)
CGROUP_LIMIT_FILES = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
_NO_CGROUP_LIMIT = 2**60



def address_limit_bytes() -> int | None:
    """The process's soft address-space limit in bytes, or None when there is none (or no way to read it)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def cap_threads_under_limit(environ: MutableMapping[str, str] = os.environ) -> int | None:
    """Under an address-space limit, default the BLAS/OpenMP thread counts to 1 (before numpy or scipy loads
    them); returns the limit, or None when there is none and nothing was changed."""
    limit = address_limit_bytes()
    if limit is not None:
        for var in THREAD_VARIABLES:
            environ.setdefault(var, "1")
    return limit


def too_small_message(limit: int | None) -> str | None:
    """One line when `limit` (bytes) is too small for mmbench's libraries to load, else None."""
    if limit is None or limit >= MIN_ADDRESS_SPACE:
        return None
    return (f"not enough memory: the address-space limit of {limit / 2**20:.0f} MB (ulimit -v) is below the "
            f"{MIN_ADDRESS_SPACE / 2**20:.0f} MB mmbench needs to load numpy, scipy and pyarrow; raise it")


def cgroup_memory_limit(files: tuple[Path, ...] = CGROUP_LIMIT_FILES) -> int | None:
    """The memory limit of this process's cgroup in bytes (memory.max), or None when there is none."""
    for path in files:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text == "max" or not text.isdigit() or int(text) >= _NO_CGROUP_LIMIT:
            return None
        return int(text)
    return None


def limits_in_force() -> str:
    """The memory limits that apply to this process, in words."""
    limit, cgroup = address_limit_bytes(), cgroup_memory_limit()
    parts = ([f"the address-space limit of {limit / 2**20:.0f} MB (ulimit -v)"] if limit is not None else []) + \
            ([f"the cgroup memory limit of {cgroup / 2**20:.0f} MB (memory.max)"] if cgroup is not None else [])
    return " and ".join(parts) or "the memory available (no address-space or cgroup limit)"


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` means an allocation failed (and not that the input is bad)."""
    if isinstance(exc, (MemoryError, OutOfMemory)):
        return True
    text = str(exc).lower()
    return isinstance(exc, (OSError, ImportError, RuntimeError, ValueError)) and any(s in text for s in NO_ROOM)


class OutOfMemory(CLIError):
    """Memory ran out; the message says in which step and under which limits (exit 2)."""


def out_of_memory_message(exc: BaseException, step: str | None = None) -> str | None:
    """One line for an error that means the process ran out of memory, or None for any other error."""
    if isinstance(exc, OutOfMemory):
        return str(exc)
    if not is_out_of_memory(exc):
        return None
    text = " ".join(str(exc).split())
    during = f" while {step}" if step else ""
    return (f"out of memory{during} under {limits_in_force()}: {type(exc).__name__}: {text[:200] or 'no detail'}; "
            "raise the limit or work on a smaller input")


@contextmanager
def memory_step(step: str) -> Iterator[None]:
    """Run a step whose failed allocation is raised as `OutOfMemory` naming `step` (the innermost step names it)."""
    try:
        yield
    except OutOfMemory:
        raise
    except BaseException as exc:
        message = out_of_memory_message(exc, step)
        if message is None:
            raise
        raise OutOfMemory(message) from exc
