"""Each task's default sample: its items and candidates, and how long BM25 and MiniLM take on it on this CPU.

Usage: python perf/sample_runtimes.py [--tasks T,T] [--limit 16] [--write leaderboards/data/sample_runtimes.json]

Per task: builds the default sample (seed 0) into a temporary folder (timed: the first run's build), counts its
items (pools) and candidates, then loads each model and runs it on one item (timed: weights in, caches warm), then times it with a fresh
cache: BM25 over the whole sample; MiniLM over a `--limit` run's stratified items, divided by the distinct documents
(queries and candidates) those items hold (encoding dominates a neural model's run, and items share candidates:
Visual Grounding's 7,200 items share 25-candidate corpora), times every document of the sample. The estimate
`mmbench list tasks` prints is that, plus the first item, the sample already built (a first run adds
`build_seconds`); it is a rough figure (the machine, its load and the documents' lengths move it), so the file records the
machine and the date with the figures. `--write` stores them for `list tasks` (which builds nothing to print them).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from datetime import date
from pathlib import Path

MODELS = ("bm25", "minilm")
WHOLE = {"bm25"}  # cheap enough to time over the whole sample; the others are timed per document


def measure(task: str, limit: int, root: Path) -> dict:
    from mmbench.data.poolset import load_poolset
    from mmbench.data.selection import select_sample
    from mmbench.models.registry import load_model
    from mmbench.running.runner import RunOptions, run_poolset
    from mmbench.tasks import get_task

    start = time.perf_counter()
    get_task(task).build("sample", root / task, seed=0, progress=False)
    build_s = time.perf_counter() - start
    ps = load_poolset(root / task)
    out = {"version": ps.task_version, "items": len(ps.pools), "candidates": len(ps.candidates),
           "queries": len(ps.queries), "build_seconds": round(build_s, 1), "models": {}}
    docs = len(ps.queries) + len(ps.candidates)
    sample = select_sample(ps.pools, limit, 0)  # the items a --limit run evaluates (stratified, seeded)
    touched = len({p.query_id for p in sample} | {c for p in sample for c in p.candidate_ids})
    for name in MODELS:
        start = time.perf_counter()  # the model loads and runs one item: weights in, caches warm
        model = load_model(name)
        run_poolset(ps, model, RunOptions(use_cache=False, progress=False, limit=1))
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        if name in WHOLE:
            run_poolset(ps, model, RunOptions(use_cache=False, progress=False))
            total, how = first_s + time.perf_counter() - start, "the whole sample"
        else:
            run_poolset(ps, model, RunOptions(use_cache=False, progress=False, limit=limit))
            per_doc = (time.perf_counter() - start) / touched
            total, how = first_s + per_doc * docs, f"{per_doc:.4f} s per document over {touched} of {docs}"
        out["models"][name] = {"first_item_seconds": round(first_s, 2), "estimate_seconds": round(total, 1),
                               "how": how}
        print(f"{task} {name}: first item {first_s:.2f} s; {how} -> about {total:.0f} s", flush=True)
    return out


def main() -> None:
    from mmbench.tasks import task_specs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", help="comma-separated (default: every registered task)")
    ap.add_argument("--limit", type=int, default=16, help="items run per model and task")
    ap.add_argument("--write", type=Path, help="JSON file to write the figures to")
    args = ap.parse_args()
    tasks = args.tasks.split(",") if args.tasks else [t.name for t in task_specs()]
    with tempfile.TemporaryDirectory(prefix="sample-runtimes-") as tmp:
        figures = {t: measure(t, args.limit, Path(tmp)) for t in tasks}
    record = {"measured": str(date.today()), "by": "perf/sample_runtimes.py",
              "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores (shared with other jobs), no GPU",
              "limit": args.limit, "tasks": figures}
    if args.write:
        args.write.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"written to {args.write}")
    else:
        print(json.dumps(record, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
