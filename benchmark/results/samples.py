"""Logged samples: a run's items as JSON lines (`samples.jsonl` beside `per_query.parquet`), readable without pandas.

`mmbench run --log-samples` writes one line per evaluation item, in the per-query table's row order::

    {"item_id": ..., "query_id": ..., "subset": ..., "relevant_ids": [...], "ranked_ids": [...], "scores": [...],
     "first_relevant_rank": 1, "precision_at_1": 1.0, ..., (every per-query column, as in per_query.parquet)
     "query": {"text": "...", "segments": [...]},          # the query as the pool set holds it
     "seen": {"<doc id>": {"unified_tokens": .., "seen_tokens": .., "truncated": .., "unseen_modalities": [..]}}}

`seen` covers the query and every ranked candidate: what the model saw of each (its tokens after the model's own
sizing and truncation, and what it could not take), from `seen.parquet`. Floats that are not finite (a metric
of a failed item) are written as null. Reading the lines back gives the per-query table (`per_query_rows`).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

from mmbench.data.documents import Document, segments_to_json
from mmbench.data.media import atomic_write_bytes
from mmbench.results.store import RunResults

SAMPLES = "samples.jsonl"
SEEN_FIELDS = ("unified_tokens", "seen_tokens", "truncated", "unseen_modalities")
EXTRA_FIELDS = ("query", "seen")   # what a line adds to its per-query row


def _plain(value: Any) -> Any:
    """A table cell as JSON: arrays as lists, numpy scalars as Python numbers, non-finite floats as null."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def sample_lines(res: RunResults, queries: dict[str, Document]) -> Iterator[dict[str, Any]]:
    """One dict per item of `res` (its per-query rows), with the query and what the model saw."""
    seen: dict[str, dict[str, Any]] = {}
    if not res.seen.empty:
        columns = [c for c in SEEN_FIELDS if c in res.seen.columns]
        for row in res.seen[["doc_id", *columns]].to_dict("records"):
            seen[str(row["doc_id"])] = {c: _plain(row[c]) for c in columns}
    for row in res.per_query.to_dict("records"):
        line = {str(k): _plain(v) for k, v in row.items()}
        q = queries.get(str(row["query_id"]))
        line["query"] = ({"text": q.text, "segments": segments_to_json(q.segments)} if q is not None else None)
        ids = [str(row["query_id"]), *(str(c) for c in line.get("ranked_ids") or [])]
        line["seen"] = {i: seen[i] for i in ids if i in seen}
        yield line


def write_samples(out: Path, res: RunResults, queries: dict[str, Document]) -> Path:
    """Write `samples.jsonl` into the results folder `out` atomically; returns its path."""
    path = Path(out) / SAMPLES
    text = "".join(json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n" for line in sample_lines(res, queries))
    atomic_write_bytes(path, text.encode("utf-8"))
    return path


def per_query_rows(path: Path) -> list[dict[str, Any]]:
    """The per-query rows a samples file holds (its lines less `query` and `seen`), with plain json."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                rows.append({k: v for k, v in rec.items() if k not in EXTRA_FIELDS})
    return rows
