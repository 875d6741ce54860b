"""A run's aggregates: micro averages overall, per subset and per item metadata axis, and the macro average.

These rows are what results.json stores (`mmbench.results.mteb_layout`) and what `show` prints.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mmbench.evaluators.metrics import mean_metrics, metric_names
from mmbench.evaluators.ordering import label_key, subset_key

# Item metadata axes that get their own aggregate rows when a task provides them.
GROUP_AXES = ("length_bin", "depth", "difficulty", "background_modality", "anchor_kind", "dataset")


@dataclass
class AggregateRow:
    group: str
    n: int
    metrics: dict[str, float] = field(default_factory=dict)


def aggregate(per_query: pd.DataFrame) -> list[AggregateRow]:
    """Micro averages overall, per subset and per metadata axis; macro average over subsets.

    Each metric column is taken out of the frame once and each group is a mask over it: the mean of the masked
    values is `mean_metrics` of the group's rows (the same values in the same order, so the same bits), without
    a frame and a list of dicts per group."""
    names = [n for n in metric_names() if n in per_query.columns]
    if "error" in per_query.columns:  # failed items are reported by the runner, not averaged
        per_query = per_query[per_query["error"].isna()]
    columns = {n: per_query[n].to_numpy(dtype=float) for n in names}

    def row(group: str, mask: np.ndarray | None) -> AggregateRow:
        n_rows = len(per_query) if mask is None else int(mask.sum())
        if not n_rows:
            return AggregateRow(group, 0, mean_metrics([], names))
        return AggregateRow(group, n_rows, {n: float(np.mean(v if mask is None else v[mask])) for n, v in columns.items()})

    rows = [row("all", None)]
    subset = per_query["subset"].to_numpy()
    subsets = sorted(per_query["subset"].unique(), key=subset_key) if len(per_query) else []
    subset_rows = [row(f"subset={s}", subset == s) for s in subsets]
    if len(subset_rows) > 1:
        macro = {n: float(sum(r.metrics[n] for r in subset_rows) / len(subset_rows)) for n in names}
        rows.append(AggregateRow("macro_over_subsets", len(per_query), macro))
    rows.extend(subset_rows)
    for axis in GROUP_AXES:
        if axis not in per_query.columns:
            continue
        col = per_query[axis]
        values = col.to_numpy()
        for value in sorted(col.dropna().unique(), key=label_key):
            rows.append(row(f"{axis}={value}", values == value))
    return rows


def finite_json(obj: Any) -> Any:
    """JSON has no NaN: write None for non-finite floats."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj
