"""A run's aggregates: micro averages overall, per subset and per item metadata axis, and the macro average.

These rows are what results.json stores (`mmbench.results.mteb_layout`) and what `show` prints.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

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
    """Micro averages overall, per subset and per metadata axis; macro average over subsets."""
    names = [n for n in metric_names() if n in per_query.columns]
    if "error" in per_query.columns:  # failed items are reported by the runner, not averaged
        per_query = per_query[per_query["error"].isna()]
    rows = [AggregateRow("all", len(per_query), mean_metrics(per_query[names].to_dict("records"), names))]
    subsets = sorted(per_query["subset"].unique(), key=subset_key) if len(per_query) else []
    subset_rows = []
    for s in subsets:
        part = per_query[per_query["subset"] == s]
        subset_rows.append(AggregateRow(f"subset={s}", len(part), mean_metrics(part[names].to_dict("records"), names)))
    if len(subset_rows) > 1:
        macro = {n: float(sum(r.metrics[n] for r in subset_rows) / len(subset_rows)) for n in names}
        rows.append(AggregateRow("macro_over_subsets", len(per_query), macro))
    rows.extend(subset_rows)
    for axis in GROUP_AXES:
        if axis not in per_query.columns:
            continue
        col = per_query[axis]
        for value in sorted(col.dropna().unique(), key=label_key):
            part = per_query[col == value]
            rows.append(AggregateRow(f"{axis}={value}", len(part), mean_metrics(part[names].to_dict("records"), names)))
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
