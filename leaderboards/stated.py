"""The numbers a results.json states outside its score table: each is recomputed from the tables, or refused.

`scores.test` (what mteb's `get_score()` reads) is checked entry by entry in `schema`. This module
covers the `mmbench` block and the top level: item counts, truncation and unseen-modality counts
(from seen.parquet), and, for LLM rankers, tokens, repairs, cost and cache hits (from the per-query
columns). Run statistics that no table can reproduce (durations, batch counts, the efficiency block) are
accepted only as finite non-negative numbers at known places, and are never shown as scores. Any other number is
refused, so nothing a submitter wrote can reach the board unchecked.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pandas as pd

from mmbench.results.store import SUMMARY
from mmbench.running.parity_thresholds import block_stated_verdict, block_verdict, forged

from mmbench.leaderboards.problems import Problem

# Stated by the run, not recomputable from its tables; accepted as finite non-negative numbers only.
STATISTICS = frozenset({
    "evaluation_time", "kg_co2_emissions",
    "mmbench.scoring_seconds", "mmbench.encode.documents", "mmbench.encode.distinct_views",
    "mmbench.encode.cache_hits", "mmbench.encode.encoded", "mmbench.encode.batches", "mmbench.encode.seconds",
    "mmbench.encode.document_seconds", "mmbench.encode.query_seconds", "mmbench.encode.batch_tokens",
    "mmbench.timing.wall_seconds", "mmbench.timing.api_seconds_sum", "mmbench.timing.mean_seconds_per_query",
    "mmbench.timing.max_concurrency", "mmbench.cache.requests_sent", "mmbench.encode.cache_set_aside",
})
# Whole blocks of measurements (the efficiency record: speeds, memory, batch sizes, API calls, stated price and
# cost, overall and per length bin): machine-dependent, never recomputable, never a score; every number under
# them must be finite and non-negative, like STATISTICS.
MEASURED_BLOCKS = ("mmbench.efficiency.",)
# The backend parity certificate a run carries (cosines, agreement, thresholds): measured by verify-backend, not
# from the tables; cosines may be negative, so any finite number is accepted.
CERTIFICATE_BLOCK = "mmbench.backend_certificate."
# Run settings stated as numbers: not recomputable from the tables, but never a result; each must be a
# non-negative integer (the tie-breaking seed `mmbench run --seed` records, the intra-op thread count every
# forward pass ran with).
SETTINGS = frozenset({"mmbench.seed", "mmbench.encode.intra_op_threads"})
# Parts of the block that are not run results: the model's identity and the prompt (checked as identity), the pool
# set's design (builder parameters, identified by the content hash),
# the digests, free-text failure reasons and warnings, the provenance (versions, date, command line), and the
# facet groups (recomputed from the per-query table by schema._check_aggregates, like scores.test).
# The selection record and the protocol's copy of it are checked whole by `selection_problems` (item counts, the
# items' hash and the strata recomputed from the per-query table); the protocol's setup is the model's settings.
NOT_RESULTS = frozenset({"mmbench.model", "mmbench.prompt", "mmbench.files", "mmbench.failures", "mmbench.warnings",
                         "mmbench.provenance", "mmbench.groups", "mmbench.selection", "mmbench.protocol",
                         "mmbench.design"})
COST_TOLERANCE = 1e-9


def _column(per_query: pd.DataFrame, name: str) -> pd.Series | None:
    return pd.to_numeric(per_query[name], errors="coerce") if name in per_query.columns else None


def _sum(name: str) -> Callable[[pd.DataFrame, pd.DataFrame], Any]:
    def value(pq: pd.DataFrame, seen: pd.DataFrame) -> Any:
        col = _column(pq, name)
        return None if col is None else int(col.fillna(0).sum())
    return value


def _cost(pq: pd.DataFrame, seen: pd.DataFrame) -> Any:
    col = _column(pq, "cost_usd")
    if col is None:
        return None
    return float(col.sum()) if len(col) and col.notna().all() else "unknown"   # run.py states null then


def _seen_count(name: str, test: Callable[[Any], bool]) -> Callable[[pd.DataFrame, pd.DataFrame], Any]:
    def value(pq: pd.DataFrame, seen: pd.DataFrame) -> Any:
        return None if name not in seen.columns else int(sum(bool(test(v)) for v in seen[name]))
    return value


def _nonempty(v: Any) -> bool:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return False
    return len(v) > 0 if hasattr(v, "__len__") else bool(v)


def _recomputed(official_n_items: int, repairs: tuple[str, ...]) -> dict[str, Callable[[pd.DataFrame, pd.DataFrame], Any]]:
    """Path in results.json -> how to recompute it from (per_query, seen); None means 'cannot here'."""
    out: dict[str, Callable[[pd.DataFrame, pd.DataFrame], Any]] = {
        "mmbench.n_items": lambda pq, seen: len(pq),
        "mmbench.n_items_total": lambda pq, seen: official_n_items,
        "mmbench.n_failed_items": lambda pq, seen: int(pq["error"].notna().sum()) if "error" in pq.columns else 0,
        "mmbench.documents_truncated": _seen_count("truncated", bool),
        "mmbench.documents_with_unseen_modalities": _seen_count("unseen_modalities", _nonempty),
        "mmbench.tokens.input": _sum("input_tokens"),
        "mmbench.tokens.output": _sum("output_tokens"),
        "mmbench.tokens.items_without_usage": lambda pq, seen: (None if "input_tokens" not in pq.columns
                                                               else int(_column(pq, "input_tokens").isna().sum())),
        "mmbench.repairs.items_repaired": lambda pq, seen: (None if "repairs" not in pq.columns
                                                           else int((_column(pq, "repairs") > 0).sum())),
        "mmbench.cost_usd": _cost,
        "mmbench.cache.hits": lambda pq, seen: (None if "cached" not in pq.columns
                                               else int(pq["cached"].fillna(False).astype(bool).sum())),
    }
    for k in repairs:
        out[f"mmbench.repairs.{k}"] = _sum(f"repair_{k}")
    return out


def _numbers(value: Any, path: str):
    """(path, number) for every number under `value`, skipping the parts that are not results."""
    if path in NOT_RESULTS:
        return
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}[{i}]")


def stated_number_problems(summary: dict[str, Any], per_query: pd.DataFrame, seen: pd.DataFrame,
                           official_n_items: int, repairs: tuple[str, ...] = ()) -> list[Problem]:
    """Every number outside `scores` that does not follow from the tables (or sits where none belongs)."""
    rules = _recomputed(official_n_items, repairs)
    stated = {k: v for k, v in summary.items() if k != "scores"}
    problems = []
    for path, got in _numbers(stated, ""):
        where = f"{SUMMARY}: {ascii(path)[1:-1]}"
        if path.startswith(CERTIFICATE_BLOCK):
            if not math.isfinite(got):
                problems.append(Problem(where, f"{got!r} is not a finite number"))
            continue
        if path in STATISTICS or path.startswith(MEASURED_BLOCKS):
            if not (math.isfinite(got) and got >= 0):
                problems.append(Problem(where, f"{got!r} is not a finite non-negative number"))
            continue
        if path in SETTINGS:
            if not (isinstance(got, int) and got >= 0):
                problems.append(Problem(where, f"{got!r} is not a non-negative integer"))
            continue
        rule = rules.get(path)
        if rule is None:
            problems.append(Problem(where, "is a number mmbench cannot recompute from the tables; remove it"))
            continue
        want = rule(per_query, seen)
        if want is None:
            problems.append(Problem(where, "is stated, but the tables hold nothing to recompute it from"))
        elif want == "unknown" or not math.isfinite(got) or not np.isclose(got, want, rtol=0, atol=COST_TOLERANCE):
            problems.append(Problem(where, f"{got!r} differs from {want!r} recomputed from the tables"))
    info = summary.get("mmbench") or {}
    problems += certificate_problems(info)
    problems += selection_problems(info, per_query, official_n_items)
    if info.get("cost_usd", None) is None and _cost(per_query, seen) not in (None, "unknown"):
        problems.append(Problem(f"{SUMMARY}: mmbench.cost_usd", "is missing although every item states its cost"))
    if summary.get("dataset_revision") != info.get("content_hash"):
        problems.append(Problem(f"{SUMMARY}: dataset_revision", f"{summary.get('dataset_revision')!r} is not the pool "
                                f"set's content hash {info.get('content_hash')!r}"))
    return problems


def certificate_problems(info: dict[str, Any]) -> list[Problem]:
    """A backend certificate block whose `passed` differs from the verdict its own measurements and thresholds give
    (a flag edited by hand) is refused as forged."""
    block = info.get("backend_certificate")
    if block is None:
        return []
    where = f"{SUMMARY}: mmbench.backend_certificate"
    if not isinstance(block, dict):
        return [Problem(where, "must be an object")]
    problem = forged(block.get("passed"), block_verdict(block), block_stated_verdict(block))
    return [] if problem is None else [Problem(f"{where}.passed", problem.split(": ", 1)[1])]


def _strata_from_table(per_query: pd.DataFrame) -> dict[str, Any]:
    """`strata_covered` of the per-query table's items (a submission holds every item of the pool set)."""
    from mmbench.data.poolset import PoolItem
    from mmbench.data.selection import STRATA_AXES, strata_covered

    axes = [a for a in STRATA_AXES if a in per_query.columns]
    plain = lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else v  # noqa: E731
    items = [PoolItem(str(i), "", str(s), [], [], {a: plain(r[a]) for a in axes if plain(r[a]) is not None})
             for i, s, (_, r) in zip(per_query["item_id"], per_query["subset"], per_query[axes].iterrows())]
    return strata_covered(items, items)


# what a selection record holds beyond the checked counts: how the score is estimated, and for a --limit sample
# its seed and cells (a board takes only runs of all items, whose estimator is the plain mean)
SAMPLE_KEYS = {"estimator", "estimate", "seed", "cell_axes", "cell_sizes"}


def selection_problems(info: dict[str, Any], per_query: pd.DataFrame, official_n_items: int) -> list[Problem]:
    """The selection record (and the protocol's evaluation part and strata) against the per-query table."""
    import json

    from mmbench.data.selection import FULL_ESTIMATOR, items_hash

    want = {"limit": info.get("limit"), "n_items": len(per_query), "n_items_total": official_n_items,
            "items_hash": items_hash([str(i) for i in per_query["item_id"]]) if "item_id" in per_query.columns else None}
    norm = lambda v: json.loads(json.dumps(v, default=str))  # noqa: E731
    problems = []
    protocol = info.get("protocol")
    places = [("mmbench.selection", info.get("selection"))]
    if protocol is not None:
        if not isinstance(protocol, dict):
            return [Problem(f"{SUMMARY}: mmbench.protocol", "must be a JSON object")]
        places.append(("mmbench.protocol.evaluation.selection", (protocol.get("evaluation") or {}).get("selection")))
    for where, stated in places:
        if stated is None:
            continue
        if not isinstance(stated, dict):
            problems.append(Problem(f"{SUMMARY}: {where}", "must be a JSON object"))
            continue
        for key, value in want.items():
            if key in stated and stated[key] != value:
                problems.append(Problem(f"{SUMMARY}: {where}.{key}", f"{stated[key]!r} differs from {value!r} "
                                        "recomputed from the tables"))
        recorded = {"strata"} | (SAMPLE_KEYS if where == "mmbench.selection" else set())
        extra = set(stated) - set(want) - recorded
        problems += [Problem(f"{SUMMARY}: {where}.{k}", "is not part of a selection record; remove it") for k in sorted(extra)]
        if where == "mmbench.selection" and stated.get("limit") is None:
            if stated.get("estimator", FULL_ESTIMATOR) != FULL_ESTIMATOR or stated.get("estimate"):
                problems.append(Problem(f"{SUMMARY}: {where}.estimator", f"a run of all items is scored by "
                                        f"{FULL_ESTIMATOR!r}, with no sample estimate"))
    strata = [("mmbench.selection.strata", (info.get("selection") or {}).get("strata") if isinstance(info.get("selection"), dict) else None)]
    if isinstance(protocol, dict):
        strata.append(("mmbench.protocol.strata", protocol.get("strata")))
    stated_strata = [(w, s) for w, s in strata if s is not None]
    if stated_strata:
        recomputed = norm(_strata_from_table(per_query))
        problems += [Problem(f"{SUMMARY}: {w}", "differs from the strata recomputed from the per-query table")
                     for w, s in stated_strata if norm(s) != recomputed]
    return problems
