"""A warm `mmbench run` against the import floor: how close a fully cached re-run is to start-up alone.

Usage: python perf/warm_floor.py [--model minilm] [--lengths 256,2048,16384|default] [--runs 3]
Builds the same cut Visual Grounding sample as perf/cache_rerun.py, runs the CLI once to fill a fresh cache in a
temporary MMBENCH_HOME, then alternates --runs warm CLI runs with --runs processes that only import numpy, pandas,
pyarrow and mmbench (the floor). Checks each warm run encoded nothing and wrote the same per-query and seen tables as
the first, and prints the medians and the ratio warm / floor (issue 38 asks for at most 2x). Machines are noisy:
read the medians, not single runs.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cache_rerun import _run, build_cut_sample  # perf/ is on sys.path when this script runs

FLOOR = "import numpy, pandas, pyarrow, mmbench"


def _floor(env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", FLOOR], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--lengths", default="256,2048,16384", help="length bins of the sample, or 'default'")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    measure(args.model, args.lengths, args.runs)


def measure(model: str = "minilm", lengths: str = "256,2048,16384", runs: int = 3) -> float:
    """Print the pairs and the medians; return warm / floor."""
    with tempfile.TemporaryDirectory() as tmp:
        data, env = build_cut_sample(Path(tmp), lengths)
        base = ["run", "--task", "visual_grounding", "--model", model, "--data", str(data), "--quiet"]
        first = _run([*base, "--output", str(Path(tmp) / "run0")], env)
        print(f"first (cold cache) run: {first:.2f}s")
        warm, floor = [], []
        for k in range(1, 1 + runs):
            out = Path(tmp) / f"run{k}"
            warm.append(_run([*base, "--output", str(out)], env))
            floor.append(_floor(env))
            info = json.loads((out / "results.json").read_text())["mmbench"]["encode"]
            assert info["encoded"] == 0, "a warm run re-encoded documents"
            for table in ("per_query.parquet", "seen.parquet"):
                same = (out / table).read_bytes() == (Path(tmp) / "run0" / table).read_bytes()
                assert same, f"the warm run's {table} differs from the first run's"
            print(f"pair {k}: warm run {warm[-1]:.2f}s, import floor {floor[-1]:.2f}s")
        w, f = statistics.median(warm), statistics.median(floor)
        print(f"warm run median {w:.2f}s, import floor median {f:.2f}s ({FLOOR!r}): warm / floor = {w / f:.2f}x "
              f"(issue 38 target: at most 2x)")
        return w / f


if __name__ == "__main__":
    main()
