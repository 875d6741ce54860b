"""`--limit N`: which N items to evaluate, so that the score samples the whole task at a cost that follows N.

A pool set is a design: items fall into cells (subset x length bin x depth x difficulty ...), and a
score read from one cell says nothing about the others. So a limit first decides which cells to open,
then how many items each gets, then which items:

1. Cells are the distinct values of the stratification axes (`STRATA_AXES` present in the items' meta,
   plus the subset). They are opened in a balanced order: each next cell is the one whose values on
   every axis have been used least so far (ties by a hash of the cell), so any prefix of the order
   spreads over every axis — both anchor kinds, all backgrounds, every length bin — before it repeats.
2. As many cells are opened as it takes to reach every value of the axis with the most values, or as
   many as the limit fills at a typical cell's size, whichever is more (never more cells than items).
   The limit is shared evenly among the open cells (a cell smaller than its share gives the rest to the
   next cells), so a large limit takes whole cells.
3. Within a cell, items are taken greedily by how many candidates they add (items whose candidates are
   already chosen cost nothing), ties broken towards items whose candidates more items share, then by a
   hash of the item id. Items share documents (a Visual
   Grounding cell's items all rank the same candidates), so this keeps the documents to encode low.

Every `--limit` goes through `select_by_cost`: embedding runs, LLM rankers (`mmbench rank`), the mteb
export and the Python API, so the same limit always means the same items whichever way they are scored.
`strata_covered` says which values of each axis a selection holds; results.json records it.
"""
from __future__ import annotations

import hashlib
import heapq
import math
from collections import Counter
from typing import Any, Sequence

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
    return tuple(_value(p, a) for a in axes)


def balanced_order(cells: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The cells in an order whose every prefix spreads as evenly as it can over each axis's values."""
    if not cells:
        return []
    n_axes = len(cells[0])
    used: list[Counter[str]] = [Counter() for _ in range(n_axes)]
    left = sorted(cells, key=lambda c: _digest("\x1f".join(c)))
    out: list[tuple[str, ...]] = []
    while left:
        # least-used values first; among those, the cell that uses the fewest already-seen values at all
        best = min(range(len(left)), key=lambda i: (sum(used[a][left[i][a]] for a in range(n_axes)),
                                                     sum(used[a][left[i][a]] > 0 for a in range(n_axes)), i))
        cell = left.pop(best)
        out.append(cell)
        for a in range(n_axes):
            used[a][cell[a]] += 1
    return out


def _greedy(items: Sequence[PoolItem], k: int, have: set[str]) -> list[PoolItem]:
    """`k` of `items` taken one by one by how many candidates not in `have` they add (ties: shared first);
    `have` grows with the chosen items' candidates."""
    docs = [set(p.candidate_ids) for p in items]
    users: dict[str, list[int]] = {}
    for i, ds in enumerate(docs):
        for d in ds:
            users.setdefault(d, []).append(i)
    # among equally costly items, those whose candidates more items share go first (then by id hash)
    tie = [(-sum(len(users[d]) for d in docs[i]), _digest(p.id)) for i, p in enumerate(items)]
    cost = [len(ds - have) for ds in docs]
    heap = [(cost[i], tie[i], i) for i in range(len(items))]
    heapq.heapify(heap)
    chosen: list[PoolItem] = []
    taken: set[int] = set()
    while heap and len(chosen) < k:
        c, _, i = heapq.heappop(heap)
        if i in taken or c != cost[i]:
            continue  # a stale entry: the item was taken, or got cheaper and was pushed again
        taken.add(i)
        chosen.append(items[i])
        for d in docs[i] - have:
            have.add(d)
            for j in users[d]:
                if j not in taken:
                    cost[j] -= 1
                    heapq.heappush(heap, (cost[j], tie[j], j))
    return chosen


def select_by_cost(pools: Sequence[PoolItem], limit: int | None) -> list[PoolItem]:
    """All items (sorted by id), or `limit` items stratified over the design cells, cheap within each cell."""
    items = sorted(pools, key=lambda p: p.id)
    if limit is None or limit >= len(items):
        return items
    if limit <= 0:
        return []
    axes = strata_axes(items)
    by_cell: dict[tuple[str, ...], list[PoolItem]] = {}
    for p in items:
        by_cell.setdefault(cell_of(p, axes), []).append(p)
    order = balanced_order(list(by_cell))
    widest = max(len({c[a] for c in order}) for a in range(len(axes)))
    typical = sorted(len(v) for v in by_cell.values())[len(by_cell) // 2]
    n_open = min(len(order), limit, max(widest, math.ceil(limit / typical)))
    quota = _shares(order, by_cell, n_open, limit)
    have: set[str] = set()
    chosen: list[PoolItem] = []
    for cell in order:
        if quota.get(cell):
            chosen += _greedy(by_cell[cell], quota[cell], have)
    return sorted(chosen, key=lambda p: p.id)


def _shares(order: list[tuple[str, ...]], by_cell: dict[tuple[str, ...], list[PoolItem]], n_open: int,
            limit: int) -> dict[tuple[str, ...], int]:
    """Items per cell: `limit` shared evenly over the first `n_open` cells (earlier cells take the
    remainder); what a full cell cannot take goes to the open cells with room, then to further cells."""
    quota = {c: 0 for c in order}
    base, extra = divmod(limit, n_open)
    for i, c in enumerate(order[:n_open]):
        quota[c] = min(len(by_cell[c]), base + (i < extra))
    left = limit - sum(quota.values())
    opened = n_open
    while left > 0:
        room = [c for c in order[:opened] if quota[c] < len(by_cell[c])]
        if not room:
            opened += 1
            continue
        for c in room:
            if left == 0:
                break
            quota[c] += 1
            left -= 1
    return quota


def strata_covered(chosen: Sequence[PoolItem], pools: Sequence[PoolItem]) -> dict[str, Any]:
    """Per stratification axis, the chosen items per value (values with none are listed as 0), and the
    design cells opened out of all."""
    axes = strata_axes(pools)
    per_axis: dict[str, dict[str, int]] = {}
    for a in axes:
        counts = Counter(_value(p, a) for p in chosen)
        per_axis[a] = {v: counts.get(v, 0) for v in sorted({_value(p, a) for p in pools})}
    cells = {cell_of(p, axes) for p in pools}
    return {"axes": per_axis, "cells_covered": len({cell_of(p, axes) for p in chosen}), "cells_total": len(cells)}


def items_hash(item_ids: Sequence[str]) -> str:
    """A short hash of the evaluated item ids (order-free): two selections are the same items iff equal."""
    return hashlib.sha256("\n".join(sorted(item_ids)).encode()).hexdigest()[:16]


def selection_record(chosen: Sequence[PoolItem], pools: Sequence[PoolItem], limit: int | None) -> dict[str, Any]:
    """What results.json says about the evaluated items: the limit, the counts, their hash, the strata covered."""
    return {"limit": limit, "n_items": len(chosen), "n_items_total": len(pools),
            "items_hash": items_hash([p.id for p in chosen]), "strata": strata_covered(chosen, pools)}


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
