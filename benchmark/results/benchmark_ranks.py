"""Ranks across a benchmark's tasks: simultaneous rank sets per task and over all tasks, and each model's
rank interval on a new task (mmbench.evaluators.stats.rank_sets), from results folders of several tasks."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from mmbench.evaluators.stats.rank_sets import DEFAULT_ALPHA, new_task_rank_interval, rank_sets
from mmbench.results.store import RunResults


class BenchmarkIncomplete(ValueError):
    """The runs do not give every model every task (or share no items); the message names what is missing."""


def task_matrices(runs: Sequence[RunResults], metric: str | Callable[[str], str]) -> tuple[list[str], list[str], list[np.ndarray]]:
    """Models, tasks and per task a (models x shared items) matrix of `metric` (a name, or task -> name); every
    model needs every task."""
    metric_of = metric if callable(metric) else (lambda task: metric)
    by_task: dict[str, dict[str, RunResults]] = {}
    for run in runs:
        model = str(run.model_name)
        if model in by_task.setdefault(run.task, {}):
            raise BenchmarkIncomplete(f"{run.root}: a second run of {model} on {run.task}; pass one per task")
        by_task[run.task][model] = run
    models = sorted({m for per in by_task.values() for m in per})
    mats = []
    for task, per in sorted(by_task.items()):
        missing = [m for m in models if m not in per]
        if missing:
            raise BenchmarkIncomplete(f"no run of {missing[0]} on {task}: every model needs a run on every task")
        frames, name = [], metric_of(task)
        for m in models:
            pq = per[m].per_query
            if name not in pq.columns:
                raise BenchmarkIncomplete(f"{per[m].root}: per-query metric {name!r} is missing")
            frames.append(pq.dropna(subset=[name]).drop_duplicates("item_id").set_index("item_id")[name])
        shared = sorted(set.intersection(*(set(f.index) for f in frames)))
        if len(shared) < 2:
            raise BenchmarkIncomplete(f"the runs on {task} share fewer than 2 scored items")
        mats.append(np.array([f.loc[shared].to_numpy(dtype=float) for f in frames]))
    return models, sorted(by_task), mats


def benchmark_ranks(runs: Sequence[RunResults], metric: str | Callable[[str], str], alpha: float = DEFAULT_ALPHA, resamples: int = 2_000,
                    seed: int = 0) -> dict[str, Any]:
    models, tasks, mats = task_matrices(runs, metric)
    sets = rank_sets(models, mats, tasks, alpha=alpha, resamples=resamples, seed=seed)
    pred = new_task_rank_interval(sets.ranks, models, alpha=alpha)
    return {"kind": "mmbench.ranks", "metric": metric if isinstance(metric, str) else "each task's main score", "n_items": [int(m.shape[1]) for m in mats],
            "rank_sets": sets.to_dict(), "new_task": pred.to_dict()}


def ranks_markdown(data: dict[str, Any]) -> str:
    s, p = data["rank_sets"], data["new_task"]
    level = 1 - s["alpha"]
    lines = ["# mmbench ranks across tasks", "",
             f"Metric {data['metric']}; {len(s['models'])} models on {len(s['tasks'])} tasks. Rank sets: {s['method']}, "
             f"{s['resamples']} resamples (seed {s['seed']}). Within a task, the sets of all models hold together with "
             f"{level:.0%} confidence; the benchmark-wide sets hold together over every task and model at once "
             f"(critical value {s['critical']:.2f}).", ""]
    header = "| model | " + " | ".join(f"{t}: rank [within task] [all tasks]" for t in s["tasks"]) + \
        " | rank on a new task |"
    lines += [header, "|" + "---|" * (len(s["tasks"]) + 2)]
    for j, model in enumerate(s["models"]):
        cells = [f"{s['ranks'][t][j]} [{s['per_task_low'][t][j]}–{s['per_task_high'][t][j]}] "
                 f"[{s['low'][t][j]}–{s['high'][t][j]}]" for t in range(len(s["tasks"]))]
        lines.append(f"| {model} | " + " | ".join(cells) + f" | {p['low'][j]}–{p['high'][j]} |")
    lines += ["", f"Rank on a new task: {p['method']}; it holds with probability at least {p['coverage']:.0%} if the "
              f"benchmark's tasks are exchangeable draws of its kind of task."
              + (f" With {p['n_tasks']} tasks no interval narrower than every rank guarantees {level:.0%} (at most "
                 f"{p['best_possible']:.0%} can be guaranteed), so it spans every rank." if p["coverage"] == 1.0 else ""), ""]
    return "\n".join(lines)
