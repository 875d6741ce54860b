"""Helpers shared by `compare` and `report`: run labels, aligned items, aggregates, number formatting."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from mmbench.evaluators.ordering import subset_key
from mmbench.evaluators.stats import bootstrap_ci
from mmbench.common.names import display_name
from mmbench.results.aggregate import aggregate
from mmbench.results.store import RunResults

CI_METRICS = ("recall_at_1", "recall_at_3", "mrr")   # seed 003: bootstrap CIs for R@1, R@3 and MRR


class PoolSetMismatch(ValueError):
    """Runs compared pairwise must come from the same pool set (same content hash)."""


def run_labels(runs: Sequence[RunResults]) -> list[str]:
    """Model names as the leaderboard shows them (a local path by its last folder), made unique with
    #2, #3 ... where two runs share one."""
    labels, seen = [], {}
    for run in runs:
        name = display_name(run.model_name)
        seen[name] = seen.get(name, 0) + 1
        labels.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return labels


def check_same_pool_set(runs: Sequence[RunResults]) -> str:
    hashes = {run.content_hash for run in runs}
    if len(hashes) != 1 or "" in hashes:
        detail = ", ".join(f"{label}: {run.task} {run.content_hash or '<no hash>'}" for label, run in zip(run_labels(runs), runs))
        raise PoolSetMismatch(f"cannot compare runs of different pool sets (content hashes differ): {detail}")
    return hashes.pop()


def failed_mask(per_query: pd.DataFrame) -> pd.Series:
    """Items the runner could not score (an `error` message, or NaN metrics): statistics leave them out."""
    mask = pd.Series(False, index=per_query.index)
    if "error" in per_query.columns:
        mask |= per_query["error"].notna()
    metrics = [m for m in ("precision_at_1", "recall_at_1", "mrr") if m in per_query.columns]
    if metrics:
        mask |= per_query[metrics].isna().any(axis=1)
    return mask


def scored(per_query: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The scored items of one run and the number of failed items left out."""
    mask = failed_mask(per_query)
    return per_query[~mask], int(mask.sum())


def aligned_frames(runs: Sequence[RunResults]) -> tuple[list[pd.DataFrame], list[str], bool, int]:
    """Each run's per-query rows restricted to the items all runs share and scored, in one item order.

    Returns the frames (index = item_id), the shared ids, whether the runs' item sets were identical,
    and how many shared items were left out because some run failed on them.
    """
    id_sets, ok_sets = [], []
    for run in runs:
        pq = run.per_query
        if pq["item_id"].duplicated().any():
            raise ValueError(f"{run.root or run.model_name}: duplicate item_id in per_query")
        ids = pq["item_id"].astype(str)
        id_sets.append(set(ids))
        ok_sets.append(set(ids[~failed_mask(pq)]))
    common = set.intersection(*id_sets)
    shared = sorted(common & set.intersection(*ok_sets))
    if not shared:
        raise PoolSetMismatch("the runs share no scored evaluation items (item_id)")
    identical = all(s == id_sets[0] for s in id_sets)
    frames = [run.per_query.assign(item_id=run.per_query["item_id"].astype(str)).set_index("item_id").loc[shared]
              for run in runs]
    return frames, shared, identical, len(common) - len(shared)


def hit_at_1(frame: pd.DataFrame) -> np.ndarray:
    """Binary R@1 outcome per item: the first relevant candidate is ranked first."""
    if "first_relevant_rank" in frame.columns:
        return (pd.to_numeric(frame["first_relevant_rank"], errors="coerce") == 1).to_numpy(dtype=float)
    return (frame["recall_at_1"].to_numpy(dtype=float) > 0).astype(float)


def averages(per_query: pd.DataFrame) -> dict[str, Any]:
    """Micro (over items) and macro (over subsets) averages from `mmbench.results.aggregate.aggregate`."""
    rows = {row.group: row for row in aggregate(per_query.reset_index())}
    micro = rows["all"]
    subsets = {g[len("subset="):]: {"n": r.n, **r.metrics} for g, r in rows.items() if g.startswith("subset=")}
    macro = rows.get("macro_over_subsets")
    return {
        "micro": {"label": "micro average over items", "n": micro.n, **micro.metrics},
        "macro": {"label": f"macro average over {len(subsets)} subsets", "n_subsets": len(subsets),
                  **(macro.metrics if macro is not None else micro.metrics)},
        "subsets": subsets,
        "groups": {g: {"n": r.n, **r.metrics} for g, r in rows.items()
                   if g not in ("all", "macro_over_subsets") and not g.startswith("subset=")},
    }


def subset_order(names: Any) -> list[str]:
    """Subset names in natural order, part by part ("hotpotqa/easy/8k" before ".../16k"), as `mmbench show` sorts them."""
    return sorted({str(n) for n in names}, key=subset_key)


def metric_ci(values: np.ndarray, *, resamples: int, seed: int) -> dict[str, Any]:
    """Bootstrap CI of a mean as JSON; with fewer than 2 items there is no interval (low/high None, `note` says why)."""
    if len(values) < 2:
        return {"estimate": float(np.mean(values)) if len(values) else None, "low": None, "high": None, "n": int(len(values)),
                "resamples": int(resamples), "seed": seed,
                "note": f"no confidence interval: a bootstrap CI needs at least 2 items (n = {len(values)})"}
    return {**bootstrap_ci(values, resamples=resamples, seed=seed).to_dict(), "note": ""}


def fmt_ci(estimate: Any, low: Any, high: Any, digits: int = 3) -> str:
    """`est [low, high]`, or `est [–]` when the interval is undefined (n < 2)."""
    if low is None or high is None:
        return f"{fmt(estimate, digits)} [–]"
    return f"{fmt(estimate, digits)} [{fmt(low, digits)}, {fmt(high, digits)}]"


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(v):
        return "–"
    return f"{v:.{digits}f}"


def fmt_p(p: Any) -> str:
    if p is None:
        return "–"
    p = float(p)
    if not math.isfinite(p):
        return "–"
    if p < 1e-300:  # underflowed to (almost) zero in double precision: print the bound, not 0.0e+00
        return "< 1e-300"
    if p < 1e-4:
        return f"{p:.1e}"
    return f"{p:.4f}"


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = ["| " + " | ".join(str(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)
