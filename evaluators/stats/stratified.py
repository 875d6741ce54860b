"""The score of a `--limit` run: a stratified mean weighted back to the strata's sizes, with its standard error.

A limited run scores a proportional stratified random sample of the task's design cells
(`mmbench.data.selection.select_sample`): every item had the same chance of being chosen, and within a cell
the chosen items are a simple random sample. The estimate of the whole task's mean is the stratified mean

    y_hat = sum_g (N_g / N) * ybar_g

over estimation strata g (N_g items in the task, n_g chosen, ybar_g their mean), with the variance of
stratified simple random sampling, finite-population correction included (Cochran 1977, "Sampling
Techniques", 3rd ed., ch. 5):

    var(y_hat) = sum_g (N_g / N)^2 * (1 - n_g / N_g) * s_g^2 / n_g.

The estimation strata are the design cells when each holds at least two chosen items; otherwise cells are
collapsed (Cochran 5A.12) by dropping the last design axis, then the next, until every stratum that has items
holds two; a stratum left with none is merged into the whole. The CI is y_hat +- t * se with t at the
stratified degrees of freedom (Satterthwaite).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from mmbench.evaluators.stats._base import StatResult

DEFAULT_CONFIDENCE = 0.95


@dataclass
class StratifiedEstimate(StatResult):
    value: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    n: int                  # items scored
    n_total: int            # items in the task
    strata: int             # estimation strata after collapsing
    axes_used: list[str]    # the design axes the estimation strata keep
    df: float | None


def _keys(cells: Sequence[str], depth: int) -> list[str]:
    return ["|".join(c.split("|")[:depth]) for c in cells]


def stratified_mean(values: Sequence[float] | np.ndarray, cells: Sequence[str], cell_sizes: Mapping[str, int],
                    axes: Sequence[str] = (), confidence: float = DEFAULT_CONFIDENCE) -> StratifiedEstimate:
    """The stratified mean of `values` (one per chosen item, NaN items left out) whose design cells are `cells`
    (keys of `cell_sizes`, the task's items per cell, values joined by '|' in the order of `axes`)."""
    y = np.asarray(values, dtype=float)
    ok = np.isfinite(y)
    cell_arr = np.asarray([str(c) for c in cells], dtype=object)[ok]
    y = y[ok]
    total = int(sum(cell_sizes.values()))
    n_axes = max((len(k.split("|")) for k in cell_sizes), default=0)
    empty = StratifiedEstimate(None, None, None, None, confidence, int(len(y)), total, 0, [], None)
    if len(y) == 0 or total == 0:
        return empty
    for depth in range(n_axes, -1, -1):
        sizes: dict[str, int] = {}
        for key, size in zip(_keys(list(cell_sizes), depth), cell_sizes.values()):
            sizes[key] = sizes.get(key, 0) + int(size)
        keys = np.asarray(_keys(list(cell_arr), depth), dtype=object)
        counts = {k: int((keys == k).sum()) for k in sizes}
        if depth == 0 or all(c >= 2 for c in counts.values() if c > 0):
            break
    # strata with no chosen item: their weight goes to the whole (the plain mean stands in for them)
    have = [k for k in sizes if counts[k] > 0]
    missing = sum(sizes[k] for k in sizes if counts[k] == 0)
    value, var, dof_num, dof_den = 0.0, 0.0, 0.0, 0.0
    for k in have:
        part = y[keys == k]
        w = sizes[k] / total
        n_k = len(part)
        s2 = float(np.var(part, ddof=1)) if n_k > 1 else 0.0
        term = w * w * (1 - n_k / sizes[k]) * s2 / n_k if n_k > 1 else 0.0
        value += w * float(part.mean())
        var += term
        if n_k > 1:
            dof_num += term
            dof_den += term * term / (n_k - 1)
    if missing:
        w = missing / total
        value += w * float(y.mean())
        s2 = float(np.var(y, ddof=1)) if len(y) > 1 else 0.0
        var += w * w * s2 / len(y)
    se = float(np.sqrt(var))
    df = (dof_num ** 2 / dof_den) if dof_den > 0 else max(len(y) - len(have), 1)
    from scipy import stats  # only a --limit run estimates (the runner imports this module for every run)

    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
    return StratifiedEstimate(value, se, value - half, value + half, confidence, int(len(y)), total, len(have),
                              list(axes[:depth]), float(df))


def limit_estimates(per_query: Any, items: Sequence[Any], selection: Mapping[str, Any],
                    metrics: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per metric, the stratified estimate of a limited run (`per_query` rows matched to the chosen `PoolItem`s
    `items` by item id; `selection` from `selection_record`); {} for a run of all items."""
    from mmbench.data.selection import cell_key, cell_of

    if selection.get("limit") is None or not selection.get("cell_sizes"):
        return {}
    axes = list(selection["cell_axes"])
    cell_by_id = {p.id: cell_key(cell_of(p, axes)) for p in items}
    cells = [cell_by_id[str(i)] for i in per_query["item_id"]]
    failed = per_query["error"].notna().to_numpy() if "error" in per_query.columns else np.zeros(len(per_query), bool)
    return {m: stratified_mean(np.where(failed, np.nan, per_query[m].to_numpy(dtype=float)), cells,
                               selection["cell_sizes"], axes).to_dict()
            for m in metrics if m in per_query.columns}
