"""Rank intervals, tiers and resolution floors of the main board (see `mmbench.evaluators.stats.ranking`
and `floors`): per task over the items every ranked model scored, and for the cross-task mean over the
models that ran every task, resampling items within each task."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from mmbench.evaluators.metrics import metric_range
from mmbench.evaluators.stats.floors import design_floor
from mmbench.evaluators.stats.ranking import rank_models

PLACE_WORDS = ("Rank interval: the range of ranks a model takes in 95 % of paired bootstrap resamples of the items "
               "(items resampled within each task for the mean). Tier: tier 1 is the best model and every model a "
               "paired test cannot tell from it (α = 0.05, Holm-corrected); the rest are tiered the same way, so "
               "models sharing a tier are statistically tied. Resolution floor: the smallest difference in the "
               "column's score two models need to be told apart with 80 % power at α = 0.05 (design-time, from the "
               "number of items, on the metric's own range)")


def _scored(frames: Sequence[pd.DataFrame], metric: str) -> tuple[list[pd.DataFrame], list[str]]:
    """Each frame's rows scored without error, indexed by item id, and the item ids all of them share (sorted)."""
    ok = [f[f["error"].isna()] if "error" in f.columns else f for f in frames]
    ok = [f.assign(_item=(f["item_id"] if "item_id" in f.columns else f.index.to_series()).astype(str).to_numpy())
          .dropna(subset=[metric]).set_index("_item") for f in ok]
    return ok, (sorted(set.intersection(*(set(f.index) for f in ok))) if ok else [])


def aligned(frames: Sequence[pd.DataFrame], metric: str) -> np.ndarray:
    """(models x items) of `metric` over the items every frame scored without error (sorted by item id)."""
    ok, shared = _scored(frames, metric)
    return np.array([f.loc[shared, metric].to_numpy(dtype=float) for f in ok]).reshape(len(ok), len(shared))


def group_floors(rows_by_key: dict[str, pd.DataFrame], metric: str, axis: str,
                 values: Sequence[str]) -> dict[str, float | None]:
    """The design-time floor of each `axis` value's column (e.g. difficulty Easy/Hard), over the items of that
    value every model scored, as the task's own floor is over all the items they share."""
    ok, shared = _scored([rows_by_key[k] for k in sorted(rows_by_key)], metric)
    if not ok or axis not in ok[0].columns:
        return {}
    labels = ok[0].loc[shared, axis].astype("string").str.lower()
    ceiling = _range(ok[0], metric)
    return {v: design_floor(int((labels == v.lower()).sum()), ceiling=ceiling).mde for v in values}


def _range(frame: pd.DataFrame, metric: str) -> float:
    """The upper end of `metric`'s per-item range on these items (design floors scale with it)."""
    return metric_range(metric, frame["relevant_ids"]) if "relevant_ids" in frame.columns else 1.0


def places(keys: Sequence[str], matrices: Sequence[np.ndarray], resamples: int, seed: int) -> dict[str, dict[str, Any]]:
    """Row key -> {low, high, tier} (empty when no item is shared)."""
    if not keys or any(m.shape[1] == 0 for m in matrices):
        return {}
    r = rank_models(list(keys), list(matrices), resamples=resamples, seed=seed)
    return {k: {"low": lo, "high": hi, "tier": t, "tier_size": r.tiers.count(t)}
            for k, lo, hi, t in zip(keys, r.rank_low, r.rank_high, r.tiers)}


def task_places(rows_by_key: dict[str, pd.DataFrame], metric: str, resamples: int,
                seed: int) -> tuple[dict[str, dict[str, Any]], float | None, int]:
    """Places of the models on one task, the task's design-time floor and the number of shared items."""
    keys = sorted(rows_by_key)
    mat = aligned([rows_by_key[k] for k in keys], metric)
    ceiling = _range(rows_by_key[keys[0]], metric) if keys else 1.0
    return places(keys, [mat], resamples, seed), design_floor(mat.shape[1], ceiling=ceiling).mde, int(mat.shape[1])


def mean_places(per_task: dict[str, dict[str, pd.DataFrame]], metrics: dict[str, str], keys: Sequence[str],
                resamples: int, seed: int) -> dict[str, dict[str, Any]]:
    """Places on the mean of task means, for the row keys that ran every task."""
    keys = sorted(keys)
    mats = [aligned([per_task[t][k] for k in keys], metrics[t]) for t in sorted(per_task)]
    return places(keys, mats, resamples, seed)
