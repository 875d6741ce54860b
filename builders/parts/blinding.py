"""Blinding: a finished pool set whose ids and stored order say nothing about which candidate is relevant.

Builders name records after where they came from (`msr-hotpotqa-16k-<record>-hard-first`, `q-<record>`), and
some put the relevant candidate first. Both give the label away to anything that reads ids or keeps the stored
order on ties. `blind` runs once on every finished pool set, before it is checked and written:

- every query id becomes ``q-<12 hex>`` and every candidate id ``c-<12 hex>``: the first 12 hex digits of
  SHA-256 over (seed, task, kind, built id), so a query and its relevant candidate share nothing but the prefix
  every query or every candidate has;
- the built id is kept as provenance, in ``meta["provenance"]["built_id"]`` (a ``provenance`` column that says
  what it is and that no evaluator reads); any other string in the metadata that named a built id (a Hard
  variant's ``counterpart``) is renamed with it;
- each pool's ``candidate_ids`` are stored in one order per candidate *set*: a permutation drawn from (seed, the
  sorted set) and applied to the sorted set, never to the builder's per-pool order, so pools over the same
  candidates share one stored order and the relevant one's slot is uniform over pools and subsets (a stored
  ``gt_position`` follows it);
- the query and candidate tables are stored sorted by the new ids.
"""
from __future__ import annotations

import hashlib
from typing import Any

from mmbench.builders.parts.seeding import seeded_rng
from mmbench.data.poolset import PoolSet

ID_HEX = 12


def opaque_id(prefix: str, seed: int, task: str, built_id: str) -> str:
    """`prefix-<12 hex>` from a seeded hash of the built id: stable for the same build, unrelated across records."""
    digest = hashlib.sha256(f"{seed}\x1f{task}\x1f{prefix}\x1f{built_id}".encode()).hexdigest()
    return f"{prefix}-{digest[:ID_HEX]}"


def _rename(value: Any, names: dict[str, str]) -> Any:
    """`value` with every string that is exactly a built id replaced by its new id (dicts and lists walked)."""
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, dict):
        return {k: _rename(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, names) for v in value]
    return value


def _keep_built_id(meta: dict[str, Any], built_id: str) -> dict[str, Any]:
    prov = meta.get("provenance")
    if prov is None:
        prov = {}
    elif not isinstance(prov, dict):
        prov = {"built": prov}
    return {**meta, "provenance": {**prov, "built_id": built_id}}


def stored_order(seed: int, task: str, candidate_ids: list[str]) -> list[str]:
    """The one stored order of a candidate set: a permutation drawn from (seed, task, the sorted set), applied to
    the sorted set. The builder's own order (often the relevant candidate first) never enters, so pools over the
    same candidates store them in the same order whatever their query, and the relevant slot is uniform."""
    ordered = sorted(candidate_ids)
    key = hashlib.sha256("\x1f".join(ordered).encode()).hexdigest()
    perm = seeded_rng(seed, "candidate order", task, key).permutation(len(ordered))
    return [ordered[i] for i in perm]


def blind(ps: PoolSet) -> PoolSet:
    """Rename ids and reorder candidates in place (see the module text); returns `ps`."""
    names: dict[str, str] = {}
    for prefix, docs in (("q", ps.queries), ("c", ps.candidates)):
        for d in docs:
            names[d.id] = opaque_id(prefix, ps.seed, ps.task, d.id)
    if len(set(names.values())) != len(names):
        raise ValueError(f"{ps.task}: two records hash to the same opaque id; ids must be unique")
    for docs in (ps.queries, ps.candidates):
        for d in docs:
            built = d.id
            d.meta = _keep_built_id(_rename(d.meta, names), built)
            d.id = names[built]
        docs.sort(key=lambda d: d.id)
    for item in ps.pools:
        item.query_id = names[item.query_id]
        item.candidate_ids = stored_order(ps.seed, ps.task, [names[c] for c in item.candidate_ids])
        item.relevant_ids = [names[c] for c in item.relevant_ids]
        item.meta = _rename(item.meta, names)
        if "gt_position" in item.meta and len(item.relevant_ids) == 1:   # a stored 1-based place follows the order
            item.meta["gt_position"] = item.candidate_ids.index(item.relevant_ids[0]) + 1
    return ps
