"""Reading items of a run: a query, what the model ranked first, the relevant candidate marked.

`mmbench inspect` prints what `per_query.parquet` only holds as ids: for each chosen item the query's
text, the top-k candidates with an excerpt and their media, the relevant one marked (and its rank when
it is not in the top k), and what the model saw of each document (tokens seen of tokens given, what the
window cut). Items are chosen by id, as the worst by a metric, or as a seeded random sample. Pure
functions over records already loaded; the command line reads the files.

The results folder is not trusted for what the pool set says: each item's query, subset and relevant
candidates are the pool set's (`judged_by_poolset`), its metrics are computed again from the run's ranking
against them (a value the results state otherwise is shown beside it), and every printed line has its control
characters escaped (`escape_controls`), so an id or a text holding terminal escape sequences prints as text.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from mmbench.data.documents import Document, Image, Text, Video
from mmbench.data.poolset import PoolItem
from mmbench.evaluators.metrics import first_relevant_rank, item_metrics, metric_names

RELEVANT_MARK = "*"
STATED = "stated_"  # prefix of the columns keeping what the results said, where the pool set says otherwise
_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def escape_controls(text: str) -> str:
    """`text` with control characters (C0, C1, DEL, line separators, bidi overrides, surrogates) written as
    escapes (\\x1b, \\u202e): what a terminal would obey prints as text."""
    def one(ch: str) -> str:
        if ch in _BIDI or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp"):
            return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"
        return ch

    return "".join(one(ch) for ch in text)


def metric_or_error(metric: str) -> str:
    """`metric` when `inspect` can order and head items by it (a per-query retrieval metric); else a
    ValueError naming the ones it can."""
    if metric not in metric_names():
        raise ValueError(f"--metric {escape_controls(metric)!r} is not a per-query metric; choose one of "
                         f"{', '.join(metric_names())}")
    return metric


def judged_by_poolset(per_query: pd.DataFrame, pools: Sequence[PoolItem]) -> pd.DataFrame:
    """The results' rows with each item's query, subset and relevant candidates taken from the pool set and
    its metrics computed again from the run's ranking against them; where the results stated another value,
    it is kept in a `stated_<column>` column. An item the pool set does not hold is a ValueError naming it."""
    by_id = {p.id: p for p in pools}
    rows = []
    for row in per_query.to_dict("records"):
        item = by_id.get(str(row["item_id"]))
        if item is None:
            raise ValueError(f"no item {escape_controls(str(row['item_id']))!r} in the pool set; is this the "
                             "run's pool set?")
        ranked = [str(c) for c in row["ranked_ids"]] if row.get("ranked_ids") is not None else []
        failed = not ranked and bool(row.get("error"))  # not scored: its metrics are NaN, as the runner writes
        metrics = ({m: float("nan") for m in metric_names()} if failed else item_metrics(ranked, item.relevant_ids))
        fresh: dict[str, Any] = {"query_id": item.query_id, "subset": item.subset,
                                 "relevant_ids": list(item.relevant_ids),
                                 "first_relevant_rank": first_relevant_rank(ranked, item.relevant_ids), **metrics}
        for key, value in fresh.items():
            if key in row and not _same(row[key], value):
                row[STATED + key] = row[key]
        rows.append({**row, **fresh})
    return pd.DataFrame(rows, columns=list(dict.fromkeys([*per_query.columns, *(k for r in rows for k in r)])))


def _same(stated: Any, value: Any) -> bool:
    if isinstance(value, float):
        try:
            return bool(np.isclose(float(stated), value, rtol=0, atol=1e-9, equal_nan=True))
        except (TypeError, ValueError):
            return False
    if isinstance(value, list):
        return stated is not None and [str(v) for v in stated] == value
    if value is None:
        return stated is None or (isinstance(stated, float) and np.isnan(stated))
    return bool(stated == value)


@dataclass(frozen=True)
class ItemChoice:
    """Which items to print: ids, else the `worst` by `metric`, else a seeded `sample`."""

    ids: tuple[str, ...] = ()
    worst: int = 0
    sample: int = 0
    seed: int = 0
    metric: str = "precision_at_1"


def choose_items(per_query: pd.DataFrame, choice: ItemChoice) -> list[str]:
    """The item ids to print, in the order to print them; an unknown id is a ValueError naming it."""
    ids = per_query["item_id"].astype(str).tolist()
    if choice.ids:
        missing = [i for i in choice.ids if i not in set(ids)]
        if missing:
            raise ValueError(f"no item {missing[0]!r} in these results (item ids look like {ids[0]!r})")
        return list(choice.ids)
    if choice.sample:
        rng = np.random.default_rng(choice.seed)
        picked = rng.choice(len(ids), size=min(choice.sample, len(ids)), replace=False)
        return [ids[i] for i in sorted(picked)]
    if choice.metric not in per_query.columns:
        raise ValueError(f"no per-query metric {escape_controls(choice.metric)!r} in these results")
    rank = per_query["first_relevant_rank"].fillna(np.inf) if "first_relevant_rank" in per_query else 0
    order = per_query.assign(_m=per_query[choice.metric], _r=rank).sort_values(
        ["_m", "_r", "item_id"], ascending=[True, False, True], kind="mergesort")
    return order["item_id"].astype(str).head(choice.worst or 3).tolist()


def excerpt(doc: Document, chars: int) -> str:
    """The document's text on one line, cut to `chars` with an ellipsis, and its media counted."""
    text = re.sub(r"\s+", " ", " ".join(s.text for s in doc.segments if isinstance(s, Text))).strip()
    if len(text) > chars:
        text = text[: max(chars - 1, 0)].rstrip() + "…"
    images = [s.ref for s in doc.segments if isinstance(s, Image)]
    frames = sum(len(s.frames) for s in doc.segments if isinstance(s, Video))
    media = []
    if images:
        media.append(f"{len(images)} image{'s' if len(images) > 1 else ''} ({images[0]}{', ...' if len(images) > 1 else ''})")
    if frames:
        media.append(f"video of {frames} frames")
    return (f'"{text}"' if text else "(no text)") + (f" + {', '.join(media)}" if media else "")


def seen_note(row: Mapping[str, Any] | None) -> str:
    """What the model saw of a document, from its seen.parquet row: 'truncated: saw 512 model tokens of 20,885,
    20,373 text tokens cut, 3 images dropped'; 'whole (14 tokens; 12 model tokens)'; 'not encoded in this run'
    when the run has no row for it. Token counts: the unified count (the length bins') and the model's own."""
    if row is None:
        return "not encoded in this run"
    seen, given = int(row.get("seen_tokens") or 0), int(row.get("unified_tokens") or 0)
    parts = [f"truncated: saw {seen:,} model tokens of {given:,}" if row.get("truncated")
             else f"whole ({given:,} tokens; {seen:,} model tokens)"]
    for key, what in (("cut_text_tokens", "text tokens cut"), ("dropped_images", "images dropped"),
                      ("dropped_frames", "frames dropped")):
        if row.get(key):
            parts.append(f"{int(row[key]):,} {what}")
    unseen = row.get("unseen_modalities")
    if unseen is not None and len(unseen):
        parts.append(f"cannot see {', '.join(map(str, unseen))}")
    return ", ".join(parts)


def format_item(item: Mapping[str, Any], query: Document, candidates: Mapping[str, Document],
                seen: Mapping[str, Mapping[str, Any]], metric: str, top: int = 5, chars: int = 100) -> list[str]:
    """The lines that show one item: header, query, the top-k ranked candidates, the relevant one marked."""
    ranked = [str(c) for c in item["ranked_ids"]]
    raw_scores = item.get("scores")
    scores = list(raw_scores) if raw_scores is not None else []
    relevant = {str(r) for r in item["relevant_ids"]}
    value, stated = item.get(metric), item.get(STATED + metric)
    head = f"== {item['item_id']}  (subset {item.get('subset')}"
    if isinstance(value, (int, float)) and np.isfinite(value):
        head += f"; {metric} {value:.3f}"
        if stated is not None:
            head += f" [the results state {_number(stated)}, which this ranking does not give]"
    lines = [head + f"; relevant at rank {_rank_of(ranked, relevant)})",
             f"query {query.id}: {excerpt(query, chars)}", f"    [{seen_note(seen.get(query.id))}]"]
    shown = list(range(min(top, len(ranked))))
    shown += [i for i, c in enumerate(ranked) if c in relevant and i not in shown]
    for i in shown:
        cid = ranked[i]
        mark = RELEVANT_MARK if cid in relevant else " "
        score = _score(scores[i]) if i < len(scores) else "n/a"
        doc = candidates.get(cid)
        body = excerpt(doc, chars) if doc is not None else "(not in the pool set)"
        if i >= top:
            lines.append("   ...")
        lines.append(f" {mark} {i + 1:>3}. {score:>9}  {cid}: {body}")
        lines.append(f"          [{seen_note(seen.get(cid))}]")
    return [escape_controls(line) for line in lines]


def _number(value: Any) -> str:
    try:
        return f"{float(value):.3f}"
    except (TypeError, ValueError):
        return repr(value)[:40]


def _score(value: Any) -> str:
    try:
        return f"{float(value):.4f}"
    except (TypeError, ValueError):
        return "n/a"


def _rank_of(ranked: Sequence[str], relevant: set[str]) -> str:
    ranks = [i + 1 for i, c in enumerate(ranked) if c in relevant]
    return ", ".join(map(str, ranks)) if ranks else "not ranked"


def seen_by_doc(seen: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """seen.parquet's rows by document id (a document seen as query and as candidate keeps its first row)."""
    if seen is None or seen.empty or "doc_id" not in seen.columns:
        return {}
    return {str(r["doc_id"]): r for r in seen.drop_duplicates("doc_id").to_dict("records")}
