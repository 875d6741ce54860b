"""Draws at the cost of one (issue 49): five draws of a task against one build and run, and the Visual Grounding
sample build with its checks' share.

Usage: python perf/draws_cost.py [--models bm25,minilm] [--seeds 0..4] [--jobs 1,2] [--task multi_source_reasoning]
                                 [--no-vg] [--keep DIR]

Smallest run (a smoke test, not figures): python perf/draws_cost.py --models bm25 --seeds 0..1 --jobs 1 --no-vg

Each measurement is one `mmbench` process (or two) run cold in a fresh MMBENCH_HOME (no pool sets, no embedding
cache, no work cache), timed whole: wall seconds and the children's user + system CPU seconds.

* one draw: `mmbench run --task TASK --model M` with no --data, which builds the task's sample (seed 0) and runs
  the model over it (what a user types first);
* the draws: `mmbench draws --task TASK --seeds 0..4 --model M --jobs J` for each J of --jobs (default 1 and 2:
  one draw after another in one process, and two worker processes at once), which builds and runs every draw (the
  command gains from whatever `draws` shares or runs side by side: the script only calls the CLI);
* the Visual Grounding sample build: `mmbench build --task visual_grounding`, and its checks' seconds from the
  manifest's `check_costs` (each check's wall and CPU seconds, as `mmbench build` prints them).

Prints the machine (CPU model, usable cores, load before and after), each figure, draws / one draw for each model
and each --jobs (issue 49 asks for at most 2.5x with BM25 on Multi-Source Reasoning on a 2-core machine) and the checks' share of the
Visual Grounding build. The figures move with the machine's load: compare ratios measured in one run.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 2.5


def machine() -> str:
    """CPU model and usable cores, as /proc/cpuinfo and the affinity mask say."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} usable cores"


def load() -> str:
    return "load %.1f %.1f %.1f" % os.getloadavg()


def timed(args: list[str], home: Path) -> tuple[float, float, str]:
    """Wall and CPU seconds (the child's user + system) of `mmbench ARGS` with MMBENCH_HOME=home, and its stdout."""
    env = {**os.environ, "MMBENCH_HOME": str(home)}
    cmd = [sys.executable, "-m", "mmbench", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"mmbench {' '.join(args)} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def one_draw(task: str, model: str, work: Path) -> tuple[float, float]:
    home = Path(tempfile.mkdtemp(prefix="one-", dir=work))
    wall, cpu, _ = timed(["run", "--task", task, "--model", model, "--output", str(home / "run"), "--quiet"], home)
    return wall, cpu


def draws(task: str, model: str, seeds: str, jobs: str, work: Path) -> tuple[float, float]:
    home = Path(tempfile.mkdtemp(prefix=f"draws-j{jobs}-", dir=work))
    wall, cpu, _ = timed(["draws", "--task", task, "--seeds", seeds, "--model", model, "--jobs", jobs,
                          "--out", str(home / "draws")], home)
    return wall, cpu


def job_counts(text: str) -> list[str]:
    """--jobs: a comma-separated list of `mmbench draws --jobs` values (N or auto)."""
    out = [j.strip() for j in text.split(",") if j.strip()]
    for j in out:
        if j != "auto" and not (j.isdigit() and int(j) >= 1):
            raise argparse.ArgumentTypeError(f"--jobs takes positive counts or auto, got {j!r}")
    if not out:
        raise argparse.ArgumentTypeError("--jobs needs at least one value")
    return out


def vg_build(work: Path) -> dict:
    home = Path(tempfile.mkdtemp(prefix="vg-", dir=work))
    out = home / "vg"
    wall, cpu, _ = timed(["build", "--task", "visual_grounding", "--out", str(out)], home)
    costs = json.loads((out / "manifest.json").read_text()).get("check_costs")   # None: a build before issue 49
    return {"wall": wall, "cpu": cpu, "checks": costs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="multi_source_reasoning")
    ap.add_argument("--models", default="bm25,minilm", help="comma-separated (default: %(default)s)")
    ap.add_argument("--seeds", default="0..4", help="the draws' seeds (default: %(default)s)")
    ap.add_argument("--jobs", type=job_counts, default=["1", "2"],
                    help="comma-separated `mmbench draws --jobs` values, each timed (default: 1,2)")
    ap.add_argument("--no-vg", action="store_true", help="leave out the Visual Grounding sample build")
    ap.add_argument("--keep", type=Path, help="keep the homes under this folder (default: a temporary folder)")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="mmbench-draws-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}; {load()} at the start")
    for model in [m for m in args.models.split(",") if m]:
        w1, c1 = one_draw(args.task, model, work)
        print(f"{args.task} {model}: one build + run {w1:.1f} s wall ({c1:.1f} s CPU)", flush=True)
        for jobs in args.jobs:
            wd, cd = draws(args.task, model, args.seeds, jobs, work)
            goal = model == "bm25" and args.task == "multi_source_reasoning" and args.seeds == "0..4"   # issue 49's
            verdict = f" (goal <= {GOAL}x: {'met' if wd / w1 <= GOAL else 'not met'})" if goal else ""
            print(f"{args.task} {model}: draws --seeds {args.seeds} --jobs {jobs} {wd:.1f} s wall ({cd:.1f} s CPU) = "
                  f"{wd / w1:.2f}x one draw's wall, {cd / c1:.2f}x its CPU{verdict}; {load()}", flush=True)
    if not args.no_vg:
        vg = vg_build(work)
        if vg["checks"] is None:
            print(f"visual_grounding sample build: {vg['wall']:.1f} s wall ({vg['cpu']:.1f} s CPU); {load()}")
        else:
            total = vg["checks"]["total"]
            each = ", ".join(f"{k} {v['wall']:.1f} s" for k, v in sorted(vg["checks"]["checks"].items(),
                                                                          key=lambda kv: -kv[1]["wall"]))
            print(f"visual_grounding sample build: {vg['wall']:.1f} s wall ({vg['cpu']:.1f} s CPU); checks "
                  f"{total['wall']:.1f} s wall = {total['wall'] / vg['wall']:.0%} of the build ({total['cpu']:.1f} s "
                  f"CPU, fits on {vg['checks']['threads']} threads): {each}; {load()}")
    if args.keep is None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
