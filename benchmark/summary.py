"""Plain-text summary tables of a run: the main score by the task's axes, split by subset."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from mmbench.evaluators.ordering import label_key

from .results import RunResults


def pivot(per_query: pd.DataFrame, axis: str, metric: str) -> pd.DataFrame:
    """Mean `metric` with one row per subset (plus 'all') and one column per value of `axis`.

    A subset name that contains the axis value (`hotpotqa/hard/8k` on the length axis) is
    shortened to the rest (`hotpotqa/hard`), so the table is crossed instead of diagonal.
    """
    ok = per_query[per_query["error"].isna()] if "error" in per_query.columns else per_query
    rows = [("/".join(p for p in str(s).split("/") if p != str(v)) or str(s)) for s, v in zip(ok["subset"], ok[axis])]
    ok = ok.assign(_row=rows)
    table = ok.pivot_table(index="_row", columns=axis, values=metric, aggfunc="mean")
    table = table.reindex(sorted(table.index, key=lambda r: tuple(label_key(part) for part in str(r).split("/"))))
    table.loc["all"] = ok.groupby(axis)[metric].mean()
    table.index.name = "subset"
    return table[sorted(table.columns, key=label_key)]


def format_summary(res: RunResults, axes: Sequence[str], metric: str = "precision_at_1") -> str:
    pq = res.per_query
    lines = [f"task {res.task}  model {res.model_name}  pool set {res.content_hash[:12]}",
             f"items {len(pq)}  failed {int(pq['error'].notna().sum()) if 'error' in pq else 0}  "
             f"metric {metric}"]
    info = res.info
    unseen = info.get("documents_with_unseen_modalities", 0)
    if unseen:
        lines.append(f"note: the model sees only {', '.join(info.get('modalities_seen', []))}; "
                     f"{unseen} documents had content it could not see (images/videos dropped)")
    if info.get("documents_truncated"):
        lines.append(f"note: {info['documents_truncated']} documents were middle-truncated to the model's window")
    for row in _overall(res):
        lines.append(row)
    for axis in axes:
        if axis not in pq.columns or pq[axis].isna().all():
            continue
        table = pivot(pq, axis, metric)
        lines.append("")
        lines.append(f"{metric} by {axis}")
        lines.append(table.to_string(float_format=lambda x: f"{x:.3f}"))
    failures = info.get("failures") or {}
    if failures:
        lines.append("")
        lines.append(f"{len(failures)} documents failed to encode (first shown):")
        for doc, msg in list(failures.items())[:5]:
            lines.append(f"  {doc}: {msg}")
    return "\n".join(lines)


def _overall(res: RunResults) -> list[str]:
    scores = res.summary.get("scores", {}).get("test", [])
    out = []
    for entry in scores:
        if entry["hf_subset"] in ("all", "macro_over_subsets"):
            label = "micro (over items)" if entry["hf_subset"] == "all" else "macro (over subsets)"
            out.append(f"{label}: P@1 {_fmt(entry.get('precision_at_1'))}  R@5 {_fmt(entry.get('recall_at_5'))}  "
                       f"MRR@10 {_fmt(entry.get('mrr_at_10'))}  nDCG@10 {_fmt(entry.get('ndcg_at_10'))}")
    return out


def _fmt(v) -> str:
    return "n/a" if v is None else f"{v:.3f}"
