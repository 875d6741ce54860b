"""Truncated share per length bin: how much of each nominal bin a model saw middle-truncated to its window.

A pure function of a run's per-query table and its seen.parquet; `show` and `report` both print it.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from mmbench.evaluators.ordering import label_key


def truncated_share_by_bin(per_query: pd.DataFrame, seen: pd.DataFrame, label: str) -> dict[str, Any] | None:
    """Per nominal length bin: the share of the bin's documents (its pools' candidates) the model saw
    middle-truncated. None when the run has no length bins or seen.parquet says nothing of truncation."""
    if ("length_bin" not in per_query.columns or "truncated" not in seen.columns or "ranked_ids" not in per_query.columns
            or per_query["length_bin"].isna().all()):
        return None
    docs = seen[seen["role"] == "document"] if "role" in seen.columns else seen
    truncated = dict(zip(docs["doc_id"].astype(str).tolist(), docs["truncated"].astype(bool).tolist()))
    per_bin: dict[str, set[str]] = {}
    for b, ranked, relevant in zip(per_query["length_bin"].tolist(), per_query["ranked_ids"].tolist(),
                                   per_query["relevant_ids"].tolist()):
        if b is None or (isinstance(b, float) and np.isnan(b)):
            continue
        ids = ranked if ranked is not None and len(ranked) else (relevant if relevant is not None else [])
        per_bin.setdefault(str(b), set()).update(map(str, ids))
    bins = sorted(per_bin, key=label_key)
    shares, counts = [], []
    for b in bins:
        known = [truncated[d] for d in per_bin[b] if d in truncated]
        counts.append(len(known))
        shares.append(float(np.mean(known)) if known else None)
    return {"label": label, "bins": bins, "truncated_share": shares, "documents": counts}
