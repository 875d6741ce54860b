"""A second identical `mmbench run` against the first: the embedding cache's speed-up.

Usage: python perf/cache_rerun.py [--model minilm] [--lengths 256,2048,16384|default] [--warm-runs 3] [--no-breakdown]
Builds a Visual Grounding sample (reduced by --lengths), runs the CLI with a fresh cache in a temporary
MMBENCH_HOME, then the identical run again --warm-runs times (each into a new folder, so none is skipped
as already done); checks the warm runs encoded nothing, loaded no model and wrote the same per-query and
seen tables as the first, and prints the ratio of the first run to the median warm run, with the spread.
The breakdown is one more warm run under cProfile (slower than the timed ones; its shares are what matter).
"""
from __future__ import annotations

import argparse
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = [  # (label, function of the warm path, as pstats names it)
    ("load and check the pool set", "resolve_poolset"),
    ("model card (no weights)", "load_model_for_run"),
    ("cache lookups (packs)", "get_many"),
    ("scoring", "_score_item"),
    ("results written", "write_results"),
    ("summary printed", "format_summary"),
]


def build_cut_sample(tmp: Path, lengths: str) -> tuple[Path, dict[str, str]]:
    """The Visual Grounding sample cut to `lengths` ("256,2048,16384", or "default": the builder's own) in
    tmp/ps, and the environment of the runs: MMBENCH_HOME in `tmp`, and Python writing its compiled modules (as an
    installed package has them: recompiling mmbench's modules in every process is not a run's cost)."""
    env = {**os.environ, "MMBENCH_HOME": str(tmp)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    data = tmp / "ps"
    param = [] if lengths == "default" else ["--param", f"lengths=[{lengths}]"]
    subprocess.run([sys.executable, "-m", "mmbench", "build", "--task", "visual_grounding", "--out", str(data), *param],
                   env=env, check=True, capture_output=True)
    return data, env


def _run(args: list[str], env: dict[str, str], prefix: list[str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run([*(prefix or [sys.executable]), "-m", "mmbench", *args], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def _breakdown(profile: Path, total: float) -> None:
    cumulative: dict[str, float] = {}
    module = 0.0
    for (path, _, name), (_, _, _, cum, _) in pstats.Stats(str(profile)).stats.items():  # type: ignore[attr-defined]
        cumulative[name] = max(cumulative.get(name, 0.0), cum)
        if name == "<module>" and path.endswith(os.path.join("benchmark", "__main__.py")):
            module = cum
    print(f"breakdown (one more warm run under cProfile, {total:.2f}s wall; profiling slows it):")
    print(f"  {'interpreter start-up, cProfile':30s} {total - module:6.2f}s")
    print(f"  {'imports before the command':30s} {module - cumulative.get('main', 0.0):6.2f}s")
    for label, fn in PHASES:
        print(f"  {label:30s} {cumulative.get(fn, 0.0):6.2f}s")
    shown = sum(cumulative.get(fn, 0.0) for _, fn in PHASES)
    print(f"  {'the rest of the command':30s} {cumulative.get('main', 0.0) - shown:6.2f}s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--lengths", default="256,2048,16384", help="length bins of the sample, or 'default' for the "
                                                                 "builder's own (the whole VG sample)")
    ap.add_argument("--warm-runs", type=int, default=3)
    ap.add_argument("--no-breakdown", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data, env = build_cut_sample(Path(tmp), args.lengths)
        base = ["run", "--task", "visual_grounding", "--model", args.model, "--data", str(data), "--quiet"]
        times, infos = [], []
        for k in range(1 + args.warm_runs):
            out = Path(tmp) / f"run{k}"
            times.append(_run([*base, "--output", str(out)], env))
            info = json.loads((out / "results.json").read_text())["mmbench"]
            infos.append({**info["encode"], "model_loaded": info.get("model_loaded", True)})
            print(f"{'first' if k == 0 else f'warm {k}':7s} run: {times[-1]:6.2f}s  views encoded={infos[-1]['encoded']}  "
                  f"documents from the cache={infos[-1]['cache_hits']} of {infos[-1]['documents']}  "
                  f"model loaded={infos[-1]['model_loaded']}  encode step={infos[-1]['seconds']:.2f}s")
            if k:
                assert infos[k]["encoded"] == 0, "a warm run re-encoded documents"
                assert not infos[k]["model_loaded"], "a warm run loaded the model although every vector was cached"
                for table in ("per_query.parquet", "seen.parquet"):
                    same = (out / table).read_bytes() == (Path(tmp) / "run0" / table).read_bytes()
                    assert same, f"the warm run's {table} differs from the first run's"
        warm = times[1:]
        median = statistics.median(warm)
        print(f"warm runs: median {median:.2f}s, min {min(warm):.2f}s, max {max(warm):.2f}s; the second run is "
              f"{times[0] / median:.1f}x faster (first {times[0]:.1f}s / median warm; "
              f"{times[0] / max(warm):.1f}x-{times[0] / min(warm):.1f}x over the warm runs), whole CLI process")
        if not args.no_breakdown:
            profile = Path(tmp) / "warm.prof"
            total = _run([*base, "--output", str(Path(tmp) / "profiled")], env,
                         prefix=[sys.executable, "-m", "cProfile", "-o", str(profile)])
            _breakdown(profile, total)


if __name__ == "__main__":
    main()
