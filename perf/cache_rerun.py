"""A second identical `mmbench run` against the first: the embedding cache's speed-up.

Usage: python perf/cache_rerun.py [--model minilm] [--lengths 256,2048,16384]
Builds a Visual Grounding sample (reduced by --lengths), runs the CLI twice with a fresh
cache in a temporary MMBENCH_HOME, checks the second run encoded nothing, prints the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--lengths", default="256,2048,16384")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MMBENCH_HOME": tmp}
        data = Path(tmp) / "ps"
        subprocess.run([sys.executable, "-m", "mmbench", "build", "--task", "visual_grounding", "--out", str(data),
                        "--param", f"lengths=[{args.lengths}]"], env=env, check=True, capture_output=True)
        times, infos = [], []
        for run in ("first", "second"):
            out = Path(tmp) / run
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "mmbench", "run", "--task", "visual_grounding", "--model", args.model,
                            "--data", str(data), "--output", str(out), "--quiet"], env=env, check=True,
                           capture_output=True)
            times.append(time.perf_counter() - start)
            info = json.loads((out / "results.json").read_text())["mmbench"]
            infos.append({**info["encode"], "model_loaded": info.get("model_loaded", True)})
            print(f"{run:6s} run: {times[-1]:6.1f}s  views encoded={infos[-1]['encoded']}  "
                  f"documents from the cache={infos[-1]['cache_hits']} of {infos[-1]['documents']}  "
                  f"model loaded={infos[-1]['model_loaded']}  encode step={infos[-1]['seconds']:.2f}s")
        assert infos[1]["encoded"] == 0, "the second run re-encoded documents"
        assert not infos[1]["model_loaded"], "the second run loaded the model although every vector was cached"
        print(f"second run is {times[0] / times[1]:.1f}x faster (whole CLI process, model loading included)")


if __name__ == "__main__":
    main()
