"""`--limit N`: which N items to evaluate, so that the score estimates the whole task's without bias.

A pool set is a design: items fall into cells (subset x length bin x depth x difficulty ...). A limit is a
stratified random sample of those cells, seeded (`--seed`, default 0):

1. Cells are the distinct values of the stratification axes (`STRATA_AXES` present in the items' meta, plus
   the subset), in the order of a hash of their values.
2. The N items are allocated to the cells in proportion to their sizes by systematic sampling from a seeded
   random start: cell h gets floor or ceil of N * N_h / N_total items, and its expected share is exactly
   that, so every item has the same chance N / N_total of being chosen.
3. Within a cell, the items are a seeded uniform random sample. Cost never breaks a tie: which items an
   estimate rests on is left to chance alone (the cost of a run still follows N, since the cells' items share
   documents).

The score of a limited run is then estimated by `mmbench.evaluators.stats.stratified` from the chosen items
and the cells' sizes (`selection_record` keeps them): a stratified mean weighted back to the strata's sizes
with its standard error and CI. A limit at or above the task's size is no limit: the full protocol, the same
items, the same record (so `compare` joins it with a run without `--limit`).

Every `--limit` goes through `select_sample`: embedding runs, LLM rankers (`mmbench rank`), the mteb export
and the Python API, so one limit and seed always mean the same items whichever way they are scored.
`strata_covered` says which values of each axis a selection holds; results.json records it.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any, Sequence

import numpy as np

from mmbench.data.poolset import PoolItem

# meta fields that define a task's design cells (the summary axes of the five tasks and their subsets)
STRATA_AXES = ("dataset", "difficulty", "length_bin", "depth", "anchor_kind", "background_modality", "background",
               "caption_index")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def strata_axes(items: Sequence[PoolItem]) -> list[str]:
    """'subset' and the `STRATA_AXES` that some item's meta holds, in that order."""
    present = {k for p in items for k in p.meta}
    return ["subset", *(a for a in STRATA_AXES if a in present)]


def _value(p: PoolItem, axis: str) -> str:
    return str(p.subset or "") if axis == "subset" else str(p.meta.get(axis))


def cell_of(p: PoolItem, axes: Sequence[str]) -> tuple[str, ...]:
    meta = p.meta
    return tuple(str(p.subset or "") if a == "subset" else str(meta.get(a)) for a in axes)  # _value, inlined


def cell_key(cell: Sequence[str]) -> str:
    """A cell's values as one string (the key of `selection_record`'s cell sizes)."""
    return "|".join(cell)


def _allocate(sizes: Sequence[int], limit: int, rng: np.random.Generator) -> list[int]:
    """Items per cell, proportional to `sizes`, by systematic sampling of the items' positions from a random
    start: each cell gets floor or ceil of its share, and its expected count is exactly limit * size / total."""
    total = int(sum(sizes))
    step = total / limit
    points = rng.uniform(0, step) + step * np.arange(limit)
    edges = np.concatenate([[0], np.cumsum(sizes)])
    counts = np.histogram(points, bins=edges)[0]
    return [min(int(c), int(n)) for c, n in zip(counts, sizes)]


def select_sample(pools: Sequence[PoolItem], limit: int | None, seed: int = 0) -> list[PoolItem]:
    """All items (sorted by id), or a seeded stratified random sample of `limit` of them: proportional to the
    design cells' sizes, uniform within each cell (every item has the same chance)."""
    items = sorted(pools, key=lambda p: p.id)
    if limit is None or limit >= len(items):
        return items
    if limit <= 0:
        return []
    axes = strata_axes(items)
    by_cell: dict[tuple[str, ...], list[PoolItem]] = {}
    for p in items:
        by_cell.setdefault(cell_of(p, axes), []).append(p)
    cells = sorted(by_cell, key=lambda c: _digest("\x1f".join(c)))
    rng = np.random.default_rng([int(seed), int(limit)])
    counts = _allocate([len(by_cell[c]) for c in cells], int(limit), rng)
    chosen: list[PoolItem] = []
    for cell, k in zip(cells, counts):
        if k:
            members = by_cell[cell]
            chosen += [members[i] for i in sorted(rng.choice(len(members), size=k, replace=False))]
    return sorted(chosen, key=lambda p: p.id)


def is_limited(limit: int | None, n_total: int) -> bool:
    """Whether `limit` leaves items out (a limit at or above the task's size is the full protocol)."""
    return limit is not None and limit < n_total


def strata_covered(chosen: Sequence[PoolItem], pools: Sequence[PoolItem]) -> dict[str, Any]:
    """Per stratification axis, the chosen items per value (values with none are listed as 0), and the
    design cells opened out of all."""
    axes = strata_axes(pools)
    cell_by_item = {id(p): cell_of(p, axes) for p in pools}  # each item's cell, worked out once
    pool_cells = list(cell_by_item.values())
    chosen_cells = [cell_by_item.get(id(p)) or cell_of(p, axes) for p in chosen]
    per_axis: dict[str, dict[str, int]] = {}
    for j, a in enumerate(axes):
        counts = Counter(c[j] for c in chosen_cells)
        per_axis[a] = {v: counts.get(v, 0) for v in sorted({c[j] for c in pool_cells})}
    return {"axes": per_axis, "cells_covered": len(set(chosen_cells)), "cells_total": len(set(pool_cells))}


def items_hash(item_ids: Sequence[str]) -> str:
    """A short hash of the evaluated item ids (order-free): two selections are the same items iff equal."""
    return hashlib.sha256("\n".join(sorted(item_ids)).encode()).hexdigest()[:16]


def selection_record(chosen: Sequence[PoolItem], pools: Sequence[PoolItem], limit: int | None,
                     seed: int = 0) -> dict[str, Any]:
    """What results.json says about the evaluated items: the limit (None: all items, also for a limit at or
    above the task's size), the counts, their hash, the strata covered, and how the score is estimated; a
    limited run also keeps its seed and each design cell's size, which the estimate weights back to."""
    limited = is_limited(limit, len(pools))
    record: dict[str, Any] = {"limit": limit if limited else None, "n_items": len(chosen), "n_items_total": len(pools),
                              "items_hash": items_hash([p.id for p in chosen]), "strata": strata_covered(chosen, pools)}
    if limited:
        axes = strata_axes(pools)
        record.update({"seed": int(seed), "estimator": SAMPLE_ESTIMATOR, "cell_axes": axes,
                       "cell_sizes": dict(sorted(Counter(cell_key(cell_of(p, axes)) for p in pools).items()))})
    else:
        record["estimator"] = FULL_ESTIMATOR
    return record


FULL_ESTIMATOR = "all items: the plain mean"
SAMPLE_ESTIMATOR = ("stratified random sample (proportional, seeded): the stratified mean weighted back to the "
                    "strata's sizes, with its standard error and CI")


def design_groups(pools: Sequence[PoolItem]) -> dict[str, int]:
    """Items per group a reader compares on: all, each value of each stratification axis, and (where items
    have both) each length bin x depth cell. Resolution floors are computed from these counts."""
    out = {"all": len(pools)}
    for axis, values in strata_covered(pools, pools)["axes"].items():
        out.update({f"{axis}={v}": n for v, n in values.items()})
    cells = Counter((str(p.meta["length_bin"]), str(p.meta["depth"])) for p in pools
                    if "length_bin" in p.meta and "depth" in p.meta)
    out.update({f"length_bin={lb} x depth={d}": n for (lb, d), n in sorted(cells.items())})
    return out
