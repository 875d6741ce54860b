"""One intra-op thread count for every forward pass, whichever executor runs it.

A float32 forward pass sums in an order that can depend on how many threads split the work (MKL and
ATen reductions chunk by thread count on some CPUs: an Intel Xeon gave 0.31520957 in one process and
0.31520953 in a Ray actor that Ray had limited to one thread). So every batch is encoded with torch's
intra-op thread count set to `ENCODE_THREADS`, in this process, in a sharded sweep job and in each Ray
actor alike, and the caller's count is restored afterwards. The count is recorded in each run's protocol
(`mmbench.protocol.numerics.encode_threads`), so a reader knows what a byte-identical rerun needs.

What this guarantees: the same vectors, hence the same `per_query.parquet` bytes, for the same batch on the
same kind of CPU and libraries, whatever `OMP_NUM_THREADS`, `torch.set_num_threads`, `--executor` or
`--cpus-per-worker` say. What it cannot: another CPU family (AVX-512 against AVX2 kernels) or another
torch/BLAS build computes other last bits; rounding the stored scores would not hide that either (two
values either side of a rounding boundary still differ), so mmbench does not pretend to.
Models that do not use torch (BM25, API models) are untouched: torch is not imported for them.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

ENCODE_THREADS = 4  # fixed, not the machine's core count: a count that depends on the machine is what broke


@contextmanager
def encode_threads(threads: int = ENCODE_THREADS) -> Iterator[None]:
    """Run the body with torch's intra-op thread count (this thread's OpenMP and MKL ones too) at `threads`;
    the count before is restored after. Nothing happens when torch was never imported."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "set_num_threads"):
        yield
        return
    before = torch.get_num_threads()
    if before != threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
