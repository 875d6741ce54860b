"""The prefetching batch loader against none: the same cold encode, with the next batch prepared (tokenised, its
media read) in a background thread while the model forwards this one, and with every batch prepared in turn.

Usage: python perf/prefetch_overlap.py [--lengths 256,2048] [--needles 10] [--model minilm|tiny-gme] [--rounds 3]

Builds a reduced Visual Grounding sample (outside the timing), loads the model once, then runs `run_poolset`
without the cache `--rounds` times each way, alternating, in this process. "Without" is the same executor with
its prefetcher handing out nothing, so every batch goes through the adapter's plain `encode` (prepare, then
forward). Checks the two ways give byte-identical per-query results and seen records, and prints the medians,
the ratio, and how much of the plain way's time went to preparing batches (the most overlap can hide).

`--model tiny-gme` is a random-weight Qwen2-VL of about 200k parameters (tests/tiny_models.py) behind the real
GME adapter, on the image needles too: its forward pass is cheap next to reading, resizing and processing the
images, the balance a GPU gives the real model. On this CPU MiniLM's forward passes dwarf its tokenising.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cold_run_share import Timer  # perf/ is on sys.path when this script runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="256,2048", help="length bins of the reduced sample (unified tokens)")
    ap.add_argument("--needles", type=int, default=10, help="needles per kind of the reduced sample")
    ap.add_argument("--model", default="minilm", help="a model mmbench knows whose adapter prepares batches ahead")
    ap.add_argument("--rounds", type=int, default=3, help="runs each way, alternated")
    args = ap.parse_args()

    from mmbench.data.poolset import load_poolset
    from mmbench.models.registry import load_model
    from mmbench.running.executors import prefetch
    from mmbench.running.runner import RunOptions, run_poolset
    from mmbench.tasks import get_task

    data = Path(tempfile.mkdtemp(prefix="mmbench-prefetch-")) / "vg"
    get_task("visual_grounding").build("sample", data, seed=0, lengths=tuple(int(x) for x in args.lengths.split(",")),
                                       needles_per_kind=args.needles, progress=False)
    ps = load_poolset(data)
    if args.model == "tiny-gme":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from tiny_models import build_qwen2vl

        model = load_model("gme-2b", model_path=str(build_qwen2vl(data.parent / "tiny-gme")), device="cpu",
                           dtype="float32")
    else:
        model = load_model(args.model)
    if model.prepare([], "document", None) is None:
        sys.exit(f"{args.model}'s adapter does everything in encode: nothing to prepare ahead")
    prepare_timer = Timer()
    model.prepare = prepare_timer.wrap(model.prepare)  # type: ignore[method-assign]
    real_take = prefetch.Prefetcher.take

    def run(ahead: bool) -> tuple[float, float, bytes]:
        prefetch.Prefetcher.take = real_take if ahead else (lambda self, index: None)  # type: ignore[method-assign]
        before = prepare_timer.seconds
        start = time.perf_counter()
        per_query, seen, _ = run_poolset(ps, model, RunOptions(use_cache=False, progress=False))
        took = time.perf_counter() - start
        return took, prepare_timer.seconds - before, per_query.to_csv().encode() + seen.to_csv().encode()

    run(True)  # warm-up: first-call costs (allocator, kernels) out of both timings
    timings: dict[bool, list[float]] = {True: [], False: []}
    preparing: list[float] = []
    outputs = set()
    for _ in range(args.rounds):
        for ahead in (False, True):
            took, prep, out = run(ahead)
            timings[ahead].append(took)
            outputs.add(out)
            if not ahead:
                preparing.append(prep)
    prefetch.Prefetcher.take = real_take  # type: ignore[method-assign]
    if len(outputs) != 1:
        sys.exit("the two ways gave different results: the prefetcher changed what was encoded")
    plain, ahead = statistics.median(timings[False]), statistics.median(timings[True])
    print(f"{args.model} on a Visual Grounding sample (lengths {args.lengths}), cold encode + score, "
          f"{args.rounds} alternating rounds; results byte-identical both ways")
    print(f"  every batch prepared in turn   {plain:6.2f} s  (runs {', '.join(f'{t:.2f}' for t in timings[False])}; "
          f"preparing {statistics.median(preparing):.2f} s of it)")
    print(f"  next batch prepared ahead      {ahead:6.2f} s  (runs {', '.join(f'{t:.2f}' for t in timings[True])})")
    print(f"without / with prefetching: {plain / ahead:.2f}x "
          f"(at most {plain / max(plain - statistics.median(preparing), 1e-9):.2f}x if all preparing were hidden)")


if __name__ == "__main__":
    main()
