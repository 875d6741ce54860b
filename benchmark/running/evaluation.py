"""One evaluation: a loaded model on a loaded pool set, results written to a folder.

`mmbench run` and every job of `mmbench sweep` go through these two functions, so a sweep's
results are byte-for-byte what the same `run` would write.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mmbench.models.base import EmbeddingModel
from mmbench.data.poolset import PoolSet
from mmbench.results.mteb_layout import summary_json
from mmbench.results.store import RunResults, write_results
from mmbench.running.efficiency import refresh_peak_rss
from mmbench.running.runner import RunOptions, run_poolset


def task_main_metric(task_name: str) -> str:
    """The task's main score (TaskSpec.main_score); P@1 for a task not in the registry."""
    from mmbench.evaluators.metrics import MAIN_METRIC
    from mmbench.tasks import UnknownTaskError, get_task

    try:
        return get_task(task_name).main_score
    except UnknownTaskError:
        return MAIN_METRIC


def evaluate_in_memory(task_name: str, ps: PoolSet, model: EmbeddingModel, options: RunOptions,
                       requested: str) -> RunResults:
    """Run `model` on `ps`: the per-query and seen tables and the summary results.json would hold.

    `requested` is the model as the user named it (registry name, path or hub id); it is recorded
    so a sweep can tell which of its jobs already have results.
    """
    start = time.perf_counter()
    per_query, seen, info = run_poolset(ps, model, options)
    from mmbench.running.provenance import provenance

    from mmbench.results.report_checks import design_of

    info = {**info, "seed": options.seed, "model_notes": model.card.notes, "model_request": requested,
            "provenance": {**provenance(model), **_poolset_folder(ps)}, "design": design_of(ps.builder)}
    if options.certificate is not None:
        from mmbench.running.verify_backend import run_block

        info["backend_certificate"] = run_block(options.certificate)
    summary = summary_json(task_name, ps.task_version, ps.content_hash, model.card.identity(), per_query, info,
                           time.perf_counter() - start, main_metric=task_main_metric(task_name))
    refresh_peak_rss(summary)   # the process's peak over the whole evaluation, tables and aggregates included
    return RunResults(per_query=per_query, seen=seen, summary=summary)


def _poolset_folder(ps: PoolSet) -> dict[str, str]:
    """Where the pool set was read from (for `mmbench inspect` to find it again), when it was read from a folder."""
    root = getattr(ps, "root", None)
    return {"poolset": str(Path(root).resolve())} if root else {}


def evaluate_to_folder(task_name: str, ps: PoolSet, model: EmbeddingModel, options: RunOptions, out: Path,
                       requested: str) -> dict[str, Any]:
    """`evaluate_in_memory`, written to the results folder `out`; returns what results.json holds."""
    res = evaluate_in_memory(task_name, ps, model, options, requested)
    refresh_peak_rss(res.summary)
    write_results(out, res.per_query, res.seen, res.summary)
    return res.summary
