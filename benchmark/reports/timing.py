"""The timing table of seed 003: precomputation vs ranking for embedding runs, end to end for LLM rankers.

Embedding runs: query and candidate embedding (`run_info["encode"]`) is precomputation; scoring the
pools (`run_info["scoring_seconds"]`) is the ranking-only time. LLM rankers have no
precomputation: their time is the sum of the per-query request latencies (one query after
another) beside the wall time the concurrent run took. Read from results only.
"""
from __future__ import annotations

from typing import Any, Sequence

from mmbench.results.store import RunResults

from mmbench.reports.common import fmt, md_table, run_labels


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def timing_rows(runs: Sequence[RunResults]) -> list[dict[str, Any]]:
    """One row per run, JSON-ready; missing numbers are None."""
    rows = []
    for label, run in zip(run_labels(runs), runs):
        info = run.info
        n = info.get("n_items") or len(run.per_query)
        if info.get("kind") == "llm_ranker":
            t = info.get("timing", {})
            total = _num(t.get("api_seconds_sum"))
            rows.append({"label": label, "kind": "llm_ranker", "n_items": n, "query_seconds": None,
                         "document_seconds": None, "precompute_seconds": None, "ranking_seconds": None,
                         "end_to_end_seconds": total, "wall_seconds": _num(t.get("wall_seconds")),
                         "ms_per_query": None if total is None or not n else 1000 * total / n,
                         "cache_hits": info.get("cache", {}).get("hits", 0)})
            continue
        enc = info.get("encode", {})
        q, d, r = _num(enc.get("query_seconds")), _num(enc.get("document_seconds")), _num(info.get("scoring_seconds"))
        pre = None if q is None or d is None else q + d
        total = None if pre is None or r is None else pre + r
        rows.append({"label": label, "kind": "embedding", "n_items": n, "query_seconds": q, "document_seconds": d,
                     "precompute_seconds": pre, "ranking_seconds": r, "end_to_end_seconds": total,
                     "wall_seconds": _num(run.summary.get("evaluation_time")),
                     "ms_per_query": None if r is None or not n else 1000 * r / n,
                     "cache_hits": enc.get("cache_hits", 0)})
    return rows


def timing_markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["## Timing", "",
             "Embedding systems: precomputation = query + candidate (document) embedding, ranking = scoring the precomputed vectors "
             "(ms/query is ranking only). LLM rankers: end to end = the sum of per-query request latencies; wall = "
             "the concurrent run. Embeddings served from the cache (cache hits) make precomputation look faster.", "",
             md_table(["system", "kind", "items", "query emb. s", "candidate emb. s", "precompute s", "ranking s",
                       "end-to-end s", "wall s", "ms/query", "cache hits"],
                      [[r["label"], r["kind"], r["n_items"], fmt(r["query_seconds"]), fmt(r["document_seconds"]),
                        fmt(r["precompute_seconds"]), fmt(r["ranking_seconds"], 4), fmt(r["end_to_end_seconds"]),
                        fmt(r["wall_seconds"]), fmt(r["ms_per_query"], 3), r["cache_hits"]] for r in rows]), ""]
    return "\n".join(lines)
