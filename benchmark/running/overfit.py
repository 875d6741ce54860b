"""The fresh-draw overfitting test: a model on the public draw of a task and on fresh draws from a secret seed.

The fresh draws' seeds come from the secret (SHA-256 of "mmbench-fresh:<secret>:<i>"), so whoever keeps the
secret can rebuild them and nobody else can predict them. The public draw is the task built with the
public seed and the same source and parameters. Fresh-draw results are written with their own protocol id
(mmbench.running.draws.mark_fresh) under <out>/fresh, apart from the public-draw results under <out>/public;
the gap and its test are `mmbench.evaluators.stats.overfit_gap`.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from mmbench.data.poolset import PoolSet
from mmbench.evaluators.stats.overfit_gap import DEFAULT_ALPHA, overfit_gap
from mmbench.models.base import EmbeddingModel
from mmbench.results.store import RunResults
from mmbench.running.draws import run_over_draws
from mmbench.tasks import TaskSpec

DEFAULT_FRESH = 5


def fresh_seeds(secret: str, n: int, public: int) -> list[int]:
    """`n` distinct build seeds derived from `secret`, none equal to the public seed."""
    if not str(secret):
        raise ValueError("the secret seed must not be empty")
    seeds: list[int] = []
    i = 0
    while len(seeds) < n:
        digest = hashlib.sha256(f"mmbench-fresh:{secret}:{i}".encode()).digest()
        seed = int.from_bytes(digest[:4], "big") % (2 ** 31)
        if seed != public and seed not in seeds:
            seeds.append(seed)
        i += 1
    return seeds


def score_of(run: RunResults, metric: str) -> float:
    values = run.per_query[metric].to_numpy(dtype=float)
    return float(np.nanmean(values))


def overfit_test(model: EmbeddingModel, requested: str, spec: TaskSpec, public: PoolSet, fresh: Sequence[PoolSet],
                 out: Path, options: Any, metric: str, alpha: float = DEFAULT_ALPHA,
                 announce: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Run `model` on the public draw and the fresh draws; the public − fresh gap and its test, JSON-ready."""
    pub = run_over_draws(model, requested, spec, [public], Path(out) / "public", options, announce=announce)[0]
    runs = run_over_draws(model, requested, spec, fresh, Path(out) / "fresh", options, fresh=True, announce=announce)
    for run in (pub, *runs):
        if metric not in run.per_query.columns:
            raise ValueError(f"per-query metric {metric!r} is missing from {run.root}")
    gap = overfit_gap(score_of(pub, metric), [score_of(r, metric) for r in runs], alpha)
    return {"kind": "mmbench.overfit", "task": spec.name, "model": model.card.name, "metric": metric,
            "public": {"content_hash": pub.content_hash, "protocol_id": pub.info.get("protocol_id"),
                       "score": gap.public, "results": str(pub.root)},
            "fresh": [{"content_hash": r.content_hash, "protocol_id": r.info.get("protocol_id"),
                       "score": score_of(r, metric), "results": str(r.root)} for r in runs],
            "gap": gap.to_dict()}


def overfit_markdown(data: dict[str, Any]) -> str:
    g = data["gap"]
    verdict = ("**flagged**: the public score is higher than draw variance alone explains (the model may have been "
               "fitted to the public draw)" if g["flagged"] else
               "not flagged: draw variance alone explains the gap" if g["gap"] <= g["expected_high"] else "")
    if not g["flagged"] and g["gap"] < g["expected_low"]:
        verdict = "not flagged: the public score is lower than the fresh draws' (no sign of overfitting)"
    return "\n".join([
        f"# mmbench overfit: {data['model']} on {data['task']}", "",
        f"Metric {data['metric']}. Public draw `{data['public']['content_hash'][:16]}` (protocol "
        f"`{data['public']['protocol_id']}`): {g['public']:.4f}. {g['n_fresh']} fresh draws from the secret seed "
        f"(their own protocol ids, never joined with public results): mean {g['fresh_mean']:.4f}, sd {g['fresh_sd']:.4f}.",
        "",
        f"Gap public − fresh: {g['gap']:+.4f}, {1 - g['alpha']:.0%} CI [{g['ci_low']:+.4f}, {g['ci_high']:+.4f}]; "
        f"the gap draw variance alone gives lies in [{g['expected_low']:+.4f}, {g['expected_high']:+.4f}] "
        f"(p = {g['p_value'] if g['p_value'] is None else format(g['p_value'], '.3g')}; {g['method']}).", "",
        verdict, ""])
