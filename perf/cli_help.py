"""How long `mmbench --help` takes (a fresh interpreter each time, best and median of N runs).

    python perf/cli_help.py [N]

The target is under one second on an idle machine: command modules import pandas, pyarrow, torch and
the like inside the functions that need them, so listing the commands loads none of them.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time


def main(n: int = 5) -> None:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "mmbench", "--help"], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    print(f"mmbench --help: best {min(times):.2f} s, median {statistics.median(times):.2f} s over {n} runs")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
