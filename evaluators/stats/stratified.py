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
holds two; a stratum left with none is merged into the whole.

That textbook variance collapses when a stratum's few chosen items happen to score alike (s_g = 0 although the
stratum's items vary): at `--limit 30` on a reduced Visual Grounding build it printed a zero-width interval and
covered the full score in a third of the limits. The interval therefore rests on two guards:

* each stratum's variance is raised toward the pooled within-stratum variance s_p^2 (the strata's sample
  variances pooled with their n_g - 1 degrees of freedom), with PRIOR_DF prior degrees of freedom, never lowered:
  s~_g^2 = max(s_g^2, ((n_g - 1) s_g^2 + PRIOR_DF s_p^2) / (n_g - 1 + PRIOR_DF)), so a constant small stratum
  borrows the spread the other strata show (`se`; the textbook value is kept as `se_cochran`);
* the CI is the Wilson score interval of the metric on its range [0, c] at the effective sample size
  n_eff = p (1 - p) / var (p = y_hat / c, var the shrunk variance / c^2; n_eff = n when the variance is 0 or p is
  0 or 1), with the quantile of t at the stratified degrees of freedom (Satterthwaite) (Korn & Graubard 1998;
  Dean & Pagano 2015). A Wilson interval is never a point: where nothing in the sample varies it still spans
  what n items cannot rule out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from mmbench.evaluators.stats._base import StatResult

DEFAULT_CONFIDENCE = 0.95
PRIOR_DF = 2.0     # prior degrees of freedom of the pooled within-stratum variance in each stratum's variance


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
    se_cochran: float | None = None  # the textbook stratified SE (0 where every stratum's sample is constant)
    ceiling: float = 1.0             # the metric's range [0, c] the score interval is taken on
    method: str = "Wilson score interval at the effective sample size; strata variances shrunk to the pooled one"


def _keys(cells: Sequence[str], depth: int) -> list[str]:
    return ["|".join(c.split("|")[:depth]) for c in cells]


def wilson(p: float, n: float, z: float) -> tuple[float, float]:
    """The Wilson score interval of a proportion p from n (effective) trials at quantile z."""
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * float(np.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)))
    return max(centre - half, 0.0), min(centre + half, 1.0)


def stratified_mean(values: Sequence[float] | np.ndarray, cells: Sequence[str], cell_sizes: Mapping[str, int],
                    axes: Sequence[str] = (), confidence: float = DEFAULT_CONFIDENCE,
                    ceiling: float = 1.0) -> StratifiedEstimate:
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
    parts = {k: y[keys == k] for k in have}
    s2 = {k: float(np.var(v, ddof=1)) if len(v) > 1 else 0.0 for k, v in parts.items()}
    pooled_df = sum(len(v) - 1 for v in parts.values())
    pooled = sum((len(v) - 1) * s2[k] for k, v in parts.items()) / pooled_df if pooled_df else 0.0
    value, var, textbook, dof_num, dof_den = 0.0, 0.0, 0.0, 0.0, 0.0
    for k in have:
        part = parts[k]
        w = sizes[k] / total
        n_k = len(part)
        value += w * float(part.mean())
        fpc = w * w * (1 - n_k / sizes[k]) / n_k
        shrunk = max(s2[k], ((n_k - 1) * s2[k] + PRIOR_DF * pooled) / (n_k - 1 + PRIOR_DF))
        textbook += fpc * s2[k]
        var += fpc * shrunk
        if n_k > 1:
            dof_num += fpc * shrunk
            dof_den += (fpc * shrunk) ** 2 / (n_k - 1 + PRIOR_DF)
    if missing:
        w = missing / total
        value += w * float(y.mean())
        whole = float(np.var(y, ddof=1)) if len(y) > 1 else 0.0
        var += w * w * whole / len(y)
        textbook += w * w * whole / len(y)
    df = (dof_num ** 2 / dof_den) if dof_den > 0 else max(len(y) - len(have), 1)
    from scipy import stats  # only a --limit run estimates (the runner imports this module for every run)

    z = float(stats.t.ppf(0.5 + confidence / 2, df))
    c = float(ceiling) if ceiling and ceiling > 0 else 1.0
    p = min(max(value / c, 0.0), 1.0)
    n_eff = p * (1 - p) / (var / (c * c)) if var > 0 and 0 < p < 1 else float(len(y))
    low, high = wilson(p, n_eff, z)
    se = float(np.sqrt(var)) if var > 0 else float((high - low) * c / (2 * z))
    return StratifiedEstimate(value, se, low * c, high * c, confidence, int(len(y)), total, len(have),
                              list(axes[:depth]), float(df), se_cochran=float(np.sqrt(textbook)), ceiling=c)


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
    from mmbench.evaluators.metrics import metric_range

    relevant = [p.relevant_ids for p in items]
    return {m: stratified_mean(np.where(failed, np.nan, per_query[m].to_numpy(dtype=float)), cells,
                               selection["cell_sizes"], axes, ceiling=metric_range(m, relevant)).to_dict()
            for m in metrics if m in per_query.columns}
