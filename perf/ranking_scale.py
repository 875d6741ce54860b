"""Rank intervals and tiers for dozens of models: time against two models on the same items.

Usage: python perf/ranking_scale.py [--models 40] [--resamples 1000] [--repeats 3]
Per-item 0/1 scores for --models models on five tasks of 7,200, 144, 500, 300 and 1,000 items (the sizes
of the sample builds), ranked by `rank_models` (bootstrap rank intervals and Holm tiers over every pair).
The baseline is the same call for 2 models in the same process: the ratio is what the other models and
their pairs cost (the pairs grow as models², the bootstrap as models). Best of --repeats each.
This was a test asserting under 20 s for 40 models; tests do not time, so it is measured here.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def _tasks(rng: np.random.Generator, models: int) -> list[np.ndarray]:
    return [(rng.random((models, n)) < rng.random((models, 1))).astype(float) for n in (7200, 144, 500, 300, 1000)]


def _best(models: int, resamples: int, repeats: int) -> float:
    from mmbench.evaluators.stats.ranking import rank_models

    tasks = _tasks(np.random.default_rng(5), models)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        r = rank_models([f"m{i}" for i in range(models)], tasks, resamples=resamples, seed=0)
        best = min(best, time.perf_counter() - start)
        assert len(r.tiers) == models
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", type=int, default=40)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    _best(2, 10, 1)   # warm-up: imports and first-call costs stay out of both timings
    base = _best(2, args.resamples, args.repeats)
    many = _best(args.models, args.resamples, args.repeats)
    print(f"rank_models, {args.resamples} resamples, 5 tasks (9,144 items), best of {args.repeats}:")
    print(f"  2 models (baseline)   {base:7.3f} s")
    print(f"  {args.models} models           {many:7.3f} s")
    print(f"ratio {args.models} models / 2 models = {many / base:.1f}x "
          f"({args.models * (args.models - 1) // 2} pairs against 1; the former test's budget was 20 s)")


if __name__ == "__main__":
    main()
