"""The Python API behind `import mmbench`: find tasks, load models, evaluate in memory.

    import mmbench
    model = mmbench.load_model("bm25")
    ev = mmbench.evaluate(model, "visual_grounding", limit=20)
    ev["visual_grounding"].main_score, ev.aggregates, ev.write("runs/")

`evaluate` runs exactly what `mmbench run` runs (the same runner, the same results layout), but
keeps the results in memory until `write` is called.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import pandas as pd

from mmbench.models.base import EmbeddingModel
from mmbench.results.store import RunResults


def get_task(name: str):
    """The task's `TaskSpec` (built-in, from a plugin, or registered by a script)."""
    from mmbench.tasks import get_task as lookup

    return lookup(name)


def list_tasks() -> list[str]:
    """The names of every task: built-in, from installed plugins, and registered by the running script."""
    from mmbench.tasks import task_specs

    return [t.name for t in task_specs()]


def load_model(name: str, **options: Any) -> EmbeddingModel:
    """A model by registry name, plugin name, `module:Factory`, `mteb:<name>`, local folder or hub id.
    An unknown name or unreachable weights raise `ModelUnavailable` with a one-line explanation."""
    from mmbench.running.model_loading import load_model_explained

    return load_model_explained(name, options)


class ResultsExist(FileExistsError):
    """`write` was asked to replace another run's results without overwrite=True."""


@dataclass
class Result:
    """One task's evaluation: the per-query table, the aggregates, and the summary results.json holds."""

    task: str
    run: RunResults

    @property
    def per_query(self) -> pd.DataFrame:
        return self.run.per_query

    @property
    def summary(self) -> dict[str, Any]:
        return self.run.summary

    @property
    def main_metric(self) -> str:
        return self.summary["mmbench"]["main_metric"]

    @property
    def main_score(self) -> float | None:
        """The task's main metric over all scored items (what mteb's `get_score` also reports)."""
        return self.summary["scores"]["test"][0]["main_score"]

    @property
    def aggregates(self) -> pd.DataFrame:
        """One row per group ("all", "macro_over_subsets", "subset=...", "length_bin=...", ...)."""
        from mmbench.results.mteb_layout import group_entries

        rows = [{"group": g, **{k: v for k, v in e.items() if k not in ("hf_subset", "languages", "main_score")}}
                for g, e in group_entries(self.summary).items()]
        return pd.DataFrame(rows).set_index("group")

    def write(self, folder: Path | str, overwrite: bool = False) -> Path:
        """Write the results folder (per_query.parquet, seen.parquet, results.json) that `mmbench show`,
        `report` and the leaderboard read.

        As `mmbench run` does: a folder holding this very run's finished results is left as it is; one holding
        another run's results (another pool set, model, limit or seed) raises `ResultsExist` naming what
        differs, unless `overwrite`."""
        from mmbench.results.reruns import differences, previous_summary
        from mmbench.results.store import write_results

        folder = Path(folder)
        prev = previous_summary(folder)
        if prev is not None and not overwrite:
            info = self.summary["mmbench"]
            diffs = differences(prev, info["content_hash"], info.get("model"), info.get("model_request"),
                                info.get("limit"), info.get("seed"))
            if not diffs:
                return folder
            raise ResultsExist(f"{folder} already holds results of another run: {'; '.join(diffs)}. "
                               "Pass overwrite=True to replace them, or choose another folder")
        return write_results(folder, self.run.per_query, self.run.seen, self.run.summary)

    def to_mteb(self):
        """mteb's `TaskResult` of this evaluation."""
        from mteb import TaskResult

        from mmbench.results.aggregate import finite_json

        return TaskResult.from_dict(finite_json({k: v for k, v in self.summary.items() if k != "mmbench"}))


@dataclass
class Evaluation(Mapping[str, Result]):
    """Results of one model on several tasks, by task name."""

    model: str
    results: dict[str, Result] = field(default_factory=dict)

    def __getitem__(self, task: str) -> Result:
        return self.results[task]

    def __iter__(self) -> Iterator[str]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def main_scores(self) -> dict[str, float | None]:
        return {t: r.main_score for t, r in self.results.items()}

    @property
    def aggregates(self) -> pd.DataFrame:
        """The aggregates of every task, indexed by (task, group)."""
        return pd.concat({t: r.aggregates for t, r in self.results.items()}, names=["task", "group"])

    @property
    def per_query(self) -> pd.DataFrame:
        """Every task's per-query rows, with a `task` column first."""
        return pd.concat([r.per_query.assign(task=t)[["task", *r.per_query.columns]] for t, r in self.results.items()],
                         ignore_index=True)

    def write(self, folder: Path | str, overwrite: bool = False) -> dict[str, Path]:
        """One results folder per task: `<folder>/<task>`, with `Result.write`'s overwrite rules (every task's
        folder is checked before any is written)."""
        from mmbench.results.reruns import previous_summary

        if not overwrite:
            for t, r in self.results.items():
                if previous_summary(Path(folder) / t) is not None:
                    r.write(Path(folder) / t)  # raises for another run's results; the same run is left as it is
        return {t: r.write(Path(folder) / t, overwrite=overwrite) for t, r in self.results.items()}


def evaluate(model: EmbeddingModel | str, tasks: str | Sequence[Any], *, data: Any = None, limit: int | None = None,
             seed: int = 0, cache_dir: Path | str | None = None, batch_tokens: int = 32768, progress: bool = False,
             price_per_token: float | None = None, clock: Callable[[], float] = time.perf_counter,
             **model_options: Any) -> Evaluation:
    """Evaluate `model` (an `EmbeddingModel`, or a name for `load_model`) on `tasks`.

    `tasks`: a task or benchmark name ("mmlongembed"), a comma-separated list, a `TaskSpec`, or a list of
    these. `data`: a pool-set folder (one task), a mapping task -> folder or `PoolSet`, or None for each
    task's offline sample (built under MMBENCH_HOME on first use). Vectors are cached only when
    `cache_dir` is given (a model whose code changes under the same card would otherwise read stale
    vectors). `limit`, `seed` and `price_per_token` mean what they mean to `mmbench run` (the last adds the
    cost per 1,000 documents to each result's efficiency record).

    Each result's efficiency record holds the model's load time (`load_seconds`), as `mmbench run`'s does: measured
    here when the model is given by name, or by `load_model` when it came from there; None for a model object
    built otherwise (its load was not watched). `clock` (seconds, default `time.perf_counter`) is what the load
    and the encoding are timed with; tests pass a fake one.
    """
    from mmbench.running.evaluation import evaluate_in_memory
    from mmbench.running.model_loading import load_model_explained
    from mmbench.running.poolsets import resolve_poolset
    from mmbench.running.runner import RunOptions
    from mmbench.tasks import resolve_tasks

    if isinstance(model, str):
        requested, model = model, load_model_explained(model, model_options, clock)
    elif model_options:
        raise TypeError(f"model options {sorted(model_options)} apply only when the model is given by name")
    else:
        requested = model.card.name
    specs = resolve_tasks(tasks)
    if data is not None and not isinstance(data, Mapping) and len(specs) > 1:
        raise ValueError("one pool-set folder for several tasks: give data as a mapping task -> folder")
    options = RunOptions(batch_tokens=batch_tokens, cache_dir=Path(cache_dir) if cache_dir else None,
                         use_cache=cache_dir is not None, limit=limit, progress=progress, seed=seed,
                         price_per_token=price_per_token, clock=clock)
    out = Evaluation(model=model.card.name)
    for spec in specs:
        where = data.get(spec.name) if isinstance(data, Mapping) else data
        ps = resolve_poolset(spec, where, seed, progress=progress)
        out.results[spec.name] = Result(spec.name, evaluate_in_memory(spec.name, ps, model, options, requested))
    return out
