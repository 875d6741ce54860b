"""Running under an address-space limit (`ulimit -v`, RLIMIT_AS): finish or fail in one line, never hang.

OpenBLAS reserves a memory buffer per thread when it loads (numpy's and scipy's copies each); under a low limit
that reservation fails and its loader can spin for good inside the import, with no error and no progress. When
a limit is set, the BLAS and OpenMP thread counts default to one (a variable the user set is kept), so the
libraries load within the limit. What still does not fit (a shared library that cannot be mapped, a
`MemoryError`) is reported by `out_of_memory_message` in one line naming the limit. Below `MIN_ADDRESS_SPACE`
the scientific libraries cannot even load (at 400 MB a C++ extension of scipy aborts the process while it
loads, which no handler can catch), so a command is refused before it starts (`too_small_message`).
"""
from __future__ import annotations

import os
from typing import MutableMapping

MIN_ADDRESS_SPACE = 512 * 2**20   # measured: numpy, scipy, pyarrow and PIL loaded, before any data
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
_NO_ROOM = ("failed to map segment", "cannot allocate memory", "cannot map zero-fill pages", "out of memory")


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
    return (f"the address-space limit of {limit / 2**20:.0f} MB (ulimit -v) is below the "
            f"{MIN_ADDRESS_SPACE / 2**20:.0f} MB mmbench needs to load numpy, scipy and pyarrow; raise it")


def out_of_memory_message(exc: BaseException) -> str | None:
    """One line for an error that means the process ran out of address space, or None for any other error."""
    text = " ".join(str(exc).split())
    if not isinstance(exc, MemoryError) and not any(s in text.lower() for s in _NO_ROOM):
        return None
    limit = address_limit_bytes()
    where = (f"the address-space limit of {limit / 2**20:.0f} MB (ulimit -v)" if limit is not None
             else "the memory available")
    return (f"out of memory under {where}: {type(exc).__name__}: {text[:200] or 'no detail'}; "
            "raise the limit or work on a smaller input")
