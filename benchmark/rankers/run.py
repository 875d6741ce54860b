"""Evaluate a listwise ranker on a pool set; results have the layout of embedding runs.

Each item's candidates are numbered 1..n in the order the pool set stores them (the builder's
seeded per-query permutation), so every ranker sees the same order, and embedding models rank
the same candidate sets. Per item: `ranked_ids`, `scores` (n, n-1, ..., 1: higher is better),
the metrics, `repairs`, `failed`, tokens, cost and latency. A failed item carries an `error`
and NaN metrics, exactly like an item the embedding runner could not score.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from mmbench.evaluators.metrics import first_relevant_rank, item_metrics, metric_names
from mmbench.evaluators.stats.stratified import limit_estimates

from mmbench.data.documents import Image
from mmbench.data.poolset import PoolItem, PoolSet
from mmbench.data.selection import select_sample, selection_record
from mmbench.rankers.base import ListwiseRanker, RankResult
from mmbench.rankers.parse import REPAIRS

RAW_TEXT_CHARS = 2000  # each reply is kept (cut to this length) for auditing repairs and failures


class APIUnreachable(RuntimeError):
    """No request of this run got an answer from the API server (offline, wrong host or port): the run
    stops after the requests already in flight instead of failing every query after its retries."""


@dataclass
class RankOptions:
    limit: int | None = None
    progress: bool = True
    seed: int = 0               # the seed of the --limit sample (the same items as `mmbench run --limit --seed`)


def _image_ref(doc: Any, item: str) -> str:
    images = [s for s in doc.segments if isinstance(s, Image)]
    if len(images) != 1:
        raise ValueError(f"item {item!r}: candidate {doc.id!r} must hold exactly one image for a listwise ranker "
                         f"(it has {len(images)})")
    return images[0].ref


def rank_item(p: PoolItem, ps: PoolSet, ranker: ListwiseRanker, queries: dict, candidates: dict) -> dict[str, Any]:
    return item_row(p, _rank(p, ps, ranker, queries, candidates)[0])


def _rank(p: PoolItem, ps: PoolSet, ranker: ListwiseRanker, queries: dict, candidates: dict
          ) -> tuple[RankResult, bool]:
    """The item's result, and whether it came from the ranker (False: the item failed before any request)."""
    try:
        refs = [_image_ref(candidates[c], p.id) for c in p.candidate_ids]
        return ranker.rank(queries[p.query_id].text, p.candidate_ids, refs, ps.media, item=p.id), True
    except Exception as exc:  # a bad item (missing media, ...) fails alone; the message names it
        return RankResult([], failed=True, error=f"{type(exc).__name__}: {exc}"), False


def item_row(p: PoolItem, result: RankResult) -> dict[str, Any]:
    """The per-query row of one item's result."""
    row: dict[str, Any] = {"item_id": p.id, "query_id": p.query_id, "subset": p.subset,
                           "relevant_ids": list(p.relevant_ids), "presented_ids": list(p.candidate_ids)}
    n = len(result.ranked_ids)
    if result.failed:
        row.update({"ranked_ids": [], "scores": [], "first_relevant_rank": None,
                    **{m: float("nan") for m in metric_names()}, "error": result.error})
    else:
        row.update({"ranked_ids": result.ranked_ids, "scores": [float(n - i) for i in range(n)],
                    "first_relevant_rank": first_relevant_rank(result.ranked_ids, p.relevant_ids),
                    **item_metrics(result.ranked_ids, p.relevant_ids), "error": None})
    row.update({"failed": result.failed, "repairs": result.n_repairs,
                **{f"repair_{k}": int(result.repairs.get(k, 0)) for k in REPAIRS},
                "input_tokens": result.input_tokens, "output_tokens": result.output_tokens, "cost_usd": result.cost_usd,
                "seconds": round(result.seconds, 4), "cached": result.cached, "finish_reason": result.finish_reason,
                "raw_response": (result.raw_text or "")[:RAW_TEXT_CHARS]})
    for key, value in p.meta.items():
        row.setdefault(key, value if not isinstance(value, (dict, list)) else json.dumps(value, sort_keys=True))
    return row


def rank_poolset(ps: PoolSet, ranker: ListwiseRanker, options: RankOptions) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Rank every selected item (concurrently, bounded by the ranker's client); per-query rows, seen rows, info.

    Raises APIUnreachable when a request never reached the server and none before it got an answer: the items
    not yet started are skipped (their requests would fail the same way, each after all its retries)."""
    items = select_sample(ps.pools, options.limit, options.seed)  # the items `mmbench run --limit` evaluates
    queries, candidates = ps.query_by_id(), ps.candidate_by_id()
    bar = tqdm(total=len(items), desc=f"rank ({ranker.card.name})", unit="query", disable=not options.progress)
    lock = threading.Lock()
    server = {"answered": False, "unreachable": None}  # what the requests so far learnt of the server

    def one(p: PoolItem) -> dict[str, Any] | None:
        with lock:
            if server["unreachable"] and not server["answered"]:
                return None
        result, requested = _rank(p, ps, ranker, queries, candidates)
        with lock:
            if result.unreachable:
                server["unreachable"] = server["unreachable"] or result.error
            elif requested and not result.cached:
                server["answered"] = True
            bar.update(1)
        return item_row(p, result)

    sent_before = ranker.client.requests_sent
    start = time.perf_counter()
    rows = ranker.client.map(one, items)
    wall = time.perf_counter() - start
    if server["unreachable"] and not server["answered"]:
        bar.close()  # before the error, so that the error is the last line printed
        done = sum(row is not None for row in rows)
        raise APIUnreachable(f"no answer from the API server ({server['unreachable']}); stopped after "
                             f"{done} of {len(items)} queries (offline? check --base-url and the network)")
    skipped = [i for i, row in enumerate(rows) if row is None]
    if skipped:  # a request in flight got an answer after all: rank the items skipped meanwhile
        for i, row in zip(skipped, ranker.client.map(one, [items[i] for i in skipped])):
            rows[i] = row
        wall = time.perf_counter() - start
    bar.close()
    per_query = pd.DataFrame(rows)
    seen_ids = sorted({p.query_id for p in items}) + sorted({c for p in items for c in p.candidate_ids})
    seen = pd.DataFrame([{"doc_id": d, "role": "query" if d in queries else "document",
                          "modalities": "text" if d in queries else "image"} for d in seen_ids])
    failed = per_query[per_query["failed"]]
    tokens_in, tokens_out = per_query["input_tokens"].dropna(), per_query["output_tokens"].dropna()
    costs = per_query["cost_usd"].dropna()
    selection = selection_record(items, ps.pools, options.limit, options.seed)
    selection["estimate"] = limit_estimates(per_query, items, selection, metric_names())
    run_info = {
        "kind": "llm_ranker",
        "n_items": len(items), "n_items_total": len(ps.pools), "limit": selection["limit"],
        "selection": selection,
        "n_failed_items": int(len(failed)),
        "failures": {str(r["item_id"]): str(r["error"]) for _, r in failed.head(100).iterrows()},
        "modalities_seen": ["image", "text"],
        "prompt": ranker.prompt.to_dict(),
        "presentation": "candidates numbered 1..n in the pool set's stored order (seeded per query by the builder)",
        "repairs": {"items_repaired": int((per_query["repairs"] > 0).sum()),
                    **{k: int(per_query[f"repair_{k}"].sum()) for k in REPAIRS}},
        "tokens": {"input": int(tokens_in.sum()), "output": int(tokens_out.sum()),
                   "items_without_usage": int(per_query["input_tokens"].isna().sum())},
        "cost_usd": float(costs.sum()) if len(costs) == len(per_query) and len(costs) else None,
        "timing": {"wall_seconds": round(wall, 3), "api_seconds_sum": round(float(per_query["seconds"].sum()), 3),
                   "mean_seconds_per_query": round(float(per_query["seconds"].mean()), 4) if len(per_query) else None,
                   "max_concurrency": ranker.client.max_concurrency,
                   "note": "api_seconds_sum adds each query's request latency (cache hits count their original "
                           "latency): the end-to-end time of ranking the queries one after another"},
        "cache": {"hits": int(per_query["cached"].sum()), "requests_sent": ranker.client.requests_sent - sent_before},
    }
    return per_query, seen, run_info
