"""Time and memory of a reduced long-context build, and the speed of token counting at 64K and 128K.

Usage: python perf/long_build.py [--lengths 131072] [--needles-per-kind 2] [--out DIR]

Builds Visual Grounding's long cells (`--param lengths=[...] --param depths=[0.5] --param needles_per_kind=N`,
text and image backgrounds as the sample does), validates the result, and prints:
  * wall time of the build and of validation, peak RSS of this process (getrusage), disk use of the pool set;
  * unified token counting (mmbench.data.tokens.UnifiedTokenCounter) of one text of each length: seconds per
    call and tokens per second, and the traced peak of Python allocations during one count (tracemalloc),
    which shows how many copies of the text a count holds (a 128K-token text is about 0.5 MB of characters).
Figures vary between machines; compare them on one machine.
"""
from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path


def _mb(n: float) -> str:
    return f"{n / 2**20:.1f} MB"


def count_speed(lengths: list[int]) -> None:
    from mmbench.builders.sources.needles import sample_background_text
    from mmbench.data.tokens import UnifiedTokenCounter

    counter = UnifiedTokenCounter.default()
    ids = counter.tokenizer.encode(sample_background_text())
    for n in lengths:
        reps = -(-n // len(ids))
        text = counter.tokenizer.decode((ids * reps)[:n])
        counter.text(text)  # warm-up
        t0 = time.perf_counter()
        got = counter.text(text)
        dt = time.perf_counter() - t0
        tracemalloc.start()
        counter.text(text)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"count {n:>7d} tokens (counted {got}): {dt * 1000:8.1f} ms, {got / dt / 1e6:6.2f} M tokens/s, "
              f"text {_mb(len(text.encode()))}, traced peak during the count {_mb(peak)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lengths", type=int, nargs="+", default=[131072])
    ap.add_argument("--needles-per-kind", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="keep the pool set here (default: a temporary folder)")
    args = ap.parse_args()

    from mmbench.tasks import get_task
    from mmbench.tasks.validation import validate

    count_speed(sorted({65536, 131072, *args.lengths}))
    tmp = None if args.out else Path(tempfile.mkdtemp(prefix="mmbench-long-"))
    out = args.out or tmp / "vg_long"
    try:
        t0 = time.perf_counter()
        get_task("visual_grounding").build("sample", out, seed=0, lengths=tuple(args.lengths), depths=(0.5,),
                                           needles_per_kind=args.needles_per_kind, progress=False)
        build_s = time.perf_counter() - t0
        from mmbench.data.poolset import load_poolset

        t0 = time.perf_counter()
        ps = load_poolset(out, verify=True)
        report = validate(ps)
        check_s = time.perf_counter() - t0
        disk = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        tokens = [d.tokens for d in ps.candidates]
        print(f"build lengths={args.lengths} needles_per_kind={args.needles_per_kind}: {build_s:.1f} s; "
              f"load+verify+validate {check_s:.1f} s; {len(ps.candidates)} candidates of {min(tokens)}-{max(tokens)} "
              f"unified tokens; {len(ps.pools)} items; disk {_mb(disk)}; valid: {report.ok} ({report.summary_line()})")
        print(f"peak RSS of this process: {_mb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)}")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
