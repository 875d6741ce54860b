"""Where a cold `mmbench run --task visual_grounding --model minilm` spends its time: the model's forward
passes, importing and loading the model, and mmbench's own share (everything else: reading the pool set,
preparing views, batching, tokenising for middle truncation, scoring, writing results).

Usage: python perf/cold_run_share.py [--lengths 256,2048] [--needles 10] [--model minilm] [--keep DIR]

Builds a reduced Visual Grounding sample (outside the timing), then runs the CLI once in this process with
a fresh MMBENCH_HOME (so nothing is cached and the model loads). Two timers are wrapped around the run:
`load_model_for_run` (imports of torch/transformers/sentence-transformers and the weights) and the
sentence-transformers model's `forward` (the forward passes, without the model's own tokeniser). The own
share is the wall time of the run less those two. On a GPU the forward passes shrink by orders of magnitude
and the rest does not, so the own share is what decides the speed there.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


class Timer:
    def __init__(self) -> None:
        self.seconds, self.calls = 0.0, 0

    def wrap(self, fn):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1
        return timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="256,2048", help="length bins of the reduced sample (unified tokens)")
    ap.add_argument("--needles", type=int, default=10, help="needles per kind of the reduced sample")
    ap.add_argument("--model", default="minilm", help="a sentence-transformers model mmbench knows")
    ap.add_argument("--keep", type=Path, default=None, help="keep the pool set and results in this folder")
    args = ap.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="mmbench-cold-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["MMBENCH_HOME"] = tempfile.mkdtemp(prefix="home-", dir=work)  # fresh: nothing cached or remembered
    data = work / "vg"
    if not data.exists():
        from mmbench.tasks import get_task

        lengths = tuple(int(x) for x in args.lengths.split(","))
        get_task("visual_grounding").build("sample", data, seed=0, lengths=lengths, needles_per_kind=args.needles,
                                           progress=False)

    from mmbench.cli import commands_run, main as cli_main

    load, forward = Timer(), Timer()
    real_load = commands_run.load_model_for_run

    def load_and_time_forward(*a, **kw):
        model = load.wrap(real_load)(*a, **kw)
        st = getattr(model, "_model", None)
        if st is None or not hasattr(st, "forward"):
            sys.exit(f"{args.model} is not a sentence-transformers model; this script times those")
        st.forward = forward.wrap(st.forward)  # ST.encode calls self.forward for every batch
        return model

    commands_run.load_model_for_run = load_and_time_forward
    out = Path(tempfile.mkdtemp(prefix="results-", dir=work))
    start = time.perf_counter()
    rc = cli_main(["run", "--task", "visual_grounding", "--model", args.model, "--data", str(data), "--output",
                   str(out), "--quiet", "--overwrite"])
    total = time.perf_counter() - start
    if rc != 0:
        sys.exit(f"the run failed (exit {rc})")
    info = json.loads((out / "results.json").read_text())["mmbench"]
    own = total - load.seconds - forward.seconds
    n_docs = info["encode"]["documents"]
    print(f"cold run of {args.model} on a Visual Grounding sample (lengths {args.lengths}): {n_docs} documents, "
          f"{info['encode']['batches']} batches, {total:.1f} s")
    for label, seconds in (("forward passes", forward.seconds), ("import and load the model", load.seconds),
                           ("mmbench's own", own)):
        print(f"  {label:28s} {seconds:7.1f} s  {100 * seconds / total:5.1f} %")
    print(f"own share: {100 * own / total:.1f} % (target: at most 5 %, issue 38)")


if __name__ == "__main__":
    main()
