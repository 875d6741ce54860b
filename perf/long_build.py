"""Time and memory of a reduced long-context build, and the speed of token counting at 64K and 128K.

Usage: python perf/long_build.py [--lengths 131072] [--needles-per-kind 2] [--depths 0.5] [--full] [--out DIR]

Builds Visual Grounding's long cells (`--param lengths=[...] --param depths=[0.5] --param needles_per_kind=N`,
text and image backgrounds as the sample does), validates the result, and prints:
  * wall time of the build and of loading + verifying + validating it, and disk use of the pool set;
  * the peak RSS of each phase, and that growth divided by one copy of the documents (their serialised
    segments): the number of copies of the documents a phase holds at its worst, comparable across machines;
  * unified token counting (mmbench.data.tokens.UnifiedTokenCounter) of one text of each length: seconds per
    call and tokens per second, and the traced peak of Python allocations during one count (tracemalloc),
    which shows how many copies of the text a count holds (a 128K-token text is about 0.5 MB of characters).
Figures vary between machines; compare them on one machine.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from mmbench.running.efficiency import current_rss_mb, peak_rss_mb


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


def build_phase(out: Path, lengths: list[int], depths: list[float], needles_per_kind: int) -> dict:
    from mmbench.tasks import get_task

    t0, start = time.perf_counter(), current_rss_mb() * 2**20
    get_task("visual_grounding").build("sample", out, seed=0, lengths=tuple(lengths), depths=tuple(depths),
                                       needles_per_kind=needles_per_kind, progress=False)
    return {"seconds": time.perf_counter() - t0, "start": start, "peak": peak_rss_mb() * 2**20}


def check_phase(out: Path) -> dict:
    from mmbench.data.poolset import load_poolset
    from mmbench.tasks.validation import validate

    t0, start = time.perf_counter(), current_rss_mb() * 2**20
    ps = load_poolset(out, verify=True)
    report = validate(ps)
    seconds, peak = time.perf_counter() - t0, peak_rss_mb() * 2**20
    tokens = [d.tokens for d in ps.candidates]
    # one copy of the documents, as their serialised records: the baseline both phases' growth is divided by
    one_copy = sum(len(d.to_record()["segments"]) for d in ps.queries + ps.candidates)
    return {"seconds": seconds, "start": start, "peak": peak, "one_copy": one_copy,
            "candidates": len(ps.candidates), "items": len(ps.pools), "min_tokens": min(tokens),
            "max_tokens": max(tokens), "valid": report.ok, "summary": report.summary_line()}


def _in_child(*args: str) -> dict:
    """Run one phase in a fresh interpreter: the process's peak RSS (getrusage, kept by the kernel) is then
    that phase's peak, measured from the RSS the phase started at."""
    done = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lengths", type=int, nargs="+", default=[131072])
    ap.add_argument("--needles-per-kind", type=int, default=2)
    ap.add_argument("--depths", type=float, nargs="+", default=[0.5])
    ap.add_argument("--full", action="store_true",
                    help="the full sample with all ten bins (256 ... 128K), every depth, 25 needles per kind")
    ap.add_argument("--out", type=Path, default=None, help="keep the pool set here (default: a temporary folder)")
    ap.add_argument("--phase", choices=["build", "check"], help=argparse.SUPPRESS)  # a child's one phase
    args = ap.parse_args()
    if args.full:
        args.lengths = [256 * 2 ** i for i in range(10)]
        args.needles_per_kind, args.depths = 25, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    if args.phase == "build":
        print(json.dumps(build_phase(args.out, args.lengths, args.depths, args.needles_per_kind)))
        return
    if args.phase == "check":
        print(json.dumps(check_phase(args.out)))
        return

    count_speed(sorted({65536, 131072, *args.lengths}))
    tmp = None if args.out else Path(tempfile.mkdtemp(prefix="mmbench-long-"))
    out = args.out or tmp / "vg_long"
    try:
        shape = ["--lengths", *map(str, args.lengths), "--depths", *map(str, args.depths),
                 "--needles-per-kind", str(args.needles_per_kind)]
        built = _in_child("--phase", "build", "--out", str(out), *shape)
        checked = _in_child("--phase", "check", "--out", str(out), *shape)
        disk = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        print(f"build lengths={args.lengths} depths={args.depths} needles_per_kind={args.needles_per_kind}: "
              f"{built['seconds']:.1f} s; load+verify+validate {checked['seconds']:.1f} s; {checked['candidates']} "
              f"candidates of {checked['min_tokens']}-{checked['max_tokens']} unified tokens; {checked['items']} "
              f"items; disk {_mb(disk)}; valid: {checked['valid']} ({checked['summary']})")
        one_copy = checked["one_copy"]
        print(f"one copy of the documents (serialised segments): {_mb(one_copy)}")
        for name, mem in (("build", built), ("load+verify+validate", checked)):
            grown = mem["peak"] - mem["start"]
            print(f"{name} (own process): peak RSS {_mb(mem['peak'])} ({_mb(grown)} above its start) = "
                  f"{grown / max(one_copy, 1):.2f}x one copy of the documents")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
