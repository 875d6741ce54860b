"""Draws of a task: several builds from the same sources and parameters with other seeds, and runs over them.

A draw's pool set lives under MMBENCH_HOME/draws/<task>-v<version>-<source>-<parameters digest>/seed<k>
(the digest is of the canonical JSON of the build parameters, so other parameters are other draws) and is
built once; each run over a draw goes to <out>/<model>/<content hash> and is reused when that folder already
holds the same run, as `mmbench run` reuses a finished results folder (vectors come from the embedding cache).
`mmbench draws` and `mmbench overfit` make several draws at once through `mmbench.running.draw_pool`, with these
same two steps.

Fresh draws (the overfitting test) carry `draw` in their protocol's evaluation part, so their protocol id
differs from any public-draw result and `compare`, `report` and the board refuse to join them.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Sequence

from mmbench.common.home import mmbench_home
from mmbench.data.poolset import PoolSet, PoolSetError, check_integrity, load_poolset
from mmbench.models.base import EmbeddingModel
from mmbench.results.protocol import protocol_id
from mmbench.results.store import RunResults, load_results, write_results
from mmbench.tasks import TaskSpec

FRESH_DRAW = "fresh (secret seed)"


def params_digest(source: str, params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps({"source": source, "params": params}, sort_keys=True, default=str)
                          .encode()).hexdigest()[:12]


def draws_root(spec: TaskSpec, source: str, params: dict[str, Any]) -> Path:
    return mmbench_home() / "draws" / f"{spec.name}-v{spec.version}-{source}-{params_digest(source, params)}"


def parse_seeds(text: str) -> list[int]:
    """`0..4` (inclusive), `0,3,7` or `5`: the seeds of the draws."""
    try:
        if ".." in text:
            lo, hi = (int(p) for p in text.split("..", 1))
            seeds = list(range(lo, hi + 1))
        else:
            seeds = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise ValueError(f"seeds {text!r}: expected A..B, a comma-separated list or one seed") from None
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds {text!r}: expected distinct non-negative seeds")
    return seeds


def build_draws(spec: TaskSpec, seeds: Sequence[int], source: str = "sample", params: dict[str, Any] | None = None,
                progress: bool = False, announce: Callable[[str], Any] | None = None) -> list[PoolSet]:
    """The draws of `spec` for `seeds`, built on first use, one after another in this process."""
    params = dict(params or {})
    root = draws_root(spec, source, params)
    return [build_draw(spec, seed, root / f"seed{seed}", source, params, progress, announce) for seed in seeds]


def build_draw(spec: TaskSpec, seed: int, folder: Path, source: str, params: dict[str, Any], progress: bool = False,
               announce: Callable[[str], Any] | None = None) -> PoolSet:
    """The draw `seed` of `spec` in `folder`: built there unless a finished build (its manifest) is there already,
    then loaded and its integrity checked. A build writes its folder whole or not at all (`write_poolset`), so
    a build killed part-way leaves no manifest and is built again, and a finished one is never rebuilt."""
    if not (folder / "manifest.json").is_file():
        if announce is not None:
            announce(f"building draw {seed} of {spec.name} into {folder}")
        spec.build(source, folder, seed=seed, progress=progress, **params)
    try:
        ps = load_poolset(folder)
        check_integrity(ps)
    except PoolSetError as exc:
        raise PoolSetError(f"draw {seed} of {spec.name} ({folder}): {exc}") from None
    return ps


def mark_fresh(res: RunResults, tag: str = FRESH_DRAW) -> RunResults:
    """Give a fresh-draw result its own protocol id (the evaluation part names the draw)."""
    info = res.summary["mmbench"]
    if info.get("protocol"):
        info["protocol"]["evaluation"]["draw"] = tag
        info["protocol_id"] = protocol_id(info["protocol"])
    return res


def run_over_draws(model: EmbeddingModel, requested: str, spec: TaskSpec, poolsets: Sequence[PoolSet], out: Path,
                   options: Any, fresh: bool = False, announce: Callable[[str], Any] | None = None) -> list[RunResults]:
    """`model` on every draw, each into <out>/<content hash> (reused when it already holds this run)."""
    from mmbench.results.reruns import differences, previous_summary
    from mmbench.running.evaluation import evaluate_in_memory

    results = []
    for ps in poolsets:
        folder = Path(out) / ps.content_hash[:16]
        prev = previous_summary(folder)
        if prev is not None and not differences(prev, ps.content_hash, model.card.identity(), requested, options.limit,
                                                options.seed):
            if announce is not None:
                announce(f"{folder}: this run is already there; reused")
            results.append(load_results(folder))
            continue
        res = evaluate_in_memory(spec.name, ps, model, options, requested)
        if fresh:
            mark_fresh(res)
        write_results(folder, res.per_query, res.seen, res.summary)
        results.append(load_results(folder))
    return results
