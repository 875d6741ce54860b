"""One evaluation: a loaded model on a loaded pool set, results written to a folder.

`mmbench run` and every job of `mmbench sweep` go through these two functions, so a sweep's
results are byte-for-byte what the same `run` would write.
"""
from __future__ import annotations

import sys
import time
import types
from pathlib import Path
from typing import Any

from .models.base import EmbeddingModel
from .poolset import PoolSet
from .results import RunResults, summary_json, write_results
from .runner import RunOptions, run_poolset


class ModelUnavailable(RuntimeError):
    """A model name is unknown, or its weights cannot be reached; the message says how to fix it."""


def load_model_explained(name: str, options: dict[str, Any]) -> EmbeddingModel:
    """`load_model`, with unknown names and unreachable weights turned into one-line explanations."""
    from .models.registry import UnknownModelError, load_model

    try:
        return load_model(name, **options)
    except UnknownModelError as exc:
        raise ModelUnavailable(str(exc)) from None
    except TypeError as exc:  # an option the adapter's constructor does not take (paths, hub ids, mteb names)
        if "keyword argument" not in str(exc) and "multiple values" not in str(exc):
            raise
        raise ModelUnavailable(f"model {name!r}: {exc}") from None
    except OSError as exc:  # weights or tokenizer not reachable: say how to point at a local copy
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = "--model mteb:DIR" if name.startswith("mteb:") else "--model-path DIR"
        raise ModelUnavailable(f"could not load model {name!r}: {first} "
                               f"(offline? download the weights and pass {hint})") from None


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
    from .provenance import provenance

    info = {**info, "seed": options.seed, "model_notes": model.card.notes, "model_request": requested,
            "provenance": provenance(model)}
    summary = summary_json(task_name, ps.task_version, ps.content_hash, model.card.identity(), per_query, info,
                           time.perf_counter() - start, main_metric=task_main_metric(task_name))
    return RunResults(per_query=per_query, seen=seen, summary=summary)


def evaluate_to_folder(task_name: str, ps: PoolSet, model: EmbeddingModel, options: RunOptions, out: Path,
                       requested: str) -> dict[str, Any]:
    """`evaluate_in_memory`, written to the results folder `out`; returns what results.json holds."""
    res = evaluate_in_memory(task_name, ps, model, options, requested)
    write_results(out, res.per_query, res.seen, res.summary)
    return res.summary


class _CallableModule(types.ModuleType):
    """`mmbench.evaluate` names both this module and the API function `mmbench.api.evaluate`; whichever of
    the two the package attribute holds (the import system sets it to the module when it first loads it),
    calling it runs the evaluation."""

    def __call__(self, *args: Any, **kwargs: Any):
        from .api import evaluate

        return evaluate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
