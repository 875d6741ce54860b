"""`--limit N`: which N items to evaluate so that the cost follows N.

A run's cost is the candidate documents it must encode (queries are few and
short), and items share documents (in Visual Grounding a
cell's items all rank the same candidates). A spread of items by hash alone touches nearly every
cell, so 4 % of the items needed 67 % of the documents. Here items are taken greedily by how many
candidates they add (an item whose candidates are already chosen adds none), ties broken first
towards items whose candidates more items share (whole big cells first), then by a fixed order that alternates between subsets and is otherwise a hash of the item id, so a
small limit still spans the subsets and the same limit always gives the same items.

Every `--limit` goes through `select_by_cost`: embedding runs, LLM rankers (`mmbench rank`) and the
mteb export, so the same limit always means the same items whichever way they are scored.
"""
from __future__ import annotations

import hashlib
import heapq
from itertools import zip_longest
from typing import Sequence

from mmbench.data.poolset import PoolItem


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def tie_order(items: Sequence[PoolItem]) -> list[int]:
    """Indices of `items` in hash order within each subset, interleaved across subsets (also hash-ordered)."""
    by_subset: dict[str, list[int]] = {}
    for i, p in enumerate(items):
        by_subset.setdefault(p.subset or "", []).append(i)
    lanes = [sorted(v, key=lambda i: _digest(items[i].id)) for _, v in sorted(by_subset.items(), key=lambda kv: _digest(kv[0]))]
    return [i for row in zip_longest(*lanes) for i in row if i is not None]


def select_by_cost(pools: Sequence[PoolItem], limit: int | None) -> list[PoolItem]:
    """All items (sorted by id), or `limit` items chosen to need as few distinct documents as possible."""
    items = sorted(pools, key=lambda p: p.id)
    if limit is None or limit >= len(items):
        return items
    docs = [set(p.candidate_ids) for p in items]  # queries are few, short and widely shared: not weighed
    users: dict[str, list[int]] = {}
    for i, ds in enumerate(docs):
        for d in ds:
            users.setdefault(d, []).append(i)
    order = {i: r for r, i in enumerate(tie_order(items))}
    # among equally costly items, those whose candidates more items share (bigger cells) go first
    rank = {i: (-sum(len(users[d]) for d in docs[i]), order[i]) for i in range(len(items))}
    cost = [len(ds) for ds in docs]
    heap = [(cost[i], rank[i], i) for i in range(len(items))]
    heapq.heapify(heap)
    chosen: list[int] = []
    taken, have = set(), set()
    while heap and len(chosen) < limit:
        c, r, i = heapq.heappop(heap)
        if i in taken or c != cost[i]:
            continue  # a stale entry: the item was taken, or got cheaper and was pushed again
        taken.add(i)
        chosen.append(i)
        for d in docs[i] - have:
            have.add(d)
            for j in users[d]:
                if j not in taken:
                    cost[j] -= 1
                    heapq.heappush(heap, (cost[j], rank[j], j))
    return sorted((items[i] for i in chosen), key=lambda p: p.id)
