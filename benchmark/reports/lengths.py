"""What each model consumed, by length: effective-length curves and contexts, and the truncated share per bin.

Both read only the results folder: per_query (scores, bins, relevant ids) and seen.parquet (each document's
seen tokens and whether it was middle-truncated to the model's window).
"""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from mmbench.evaluators.ordering import label_key
from mmbench.evaluators.stats.effective_length import (effective_statement, run_effective_length, strata_statement,
                                                       tolerance_statement)

from mmbench.reports.common import fmt, md_table


def effective_length_entry(per_query: pd.DataFrame, seen: pd.DataFrame, label: str, metric: str,
                           tolerance: float | None = None, window: int | None = None,
                           strata: Sequence[str] = ()) -> dict[str, Any]:
    """One run's effective context and consumed-length curve within the design's `strata`, JSON-ready
    (`tolerance` None: the resolution floor of each point; `window` None: a tenth of each stratum's items)."""
    e = run_effective_length(per_query, seen, metric, tolerance, window, strata).to_dict()
    return {"label": label, "metric": metric, **e, "statement": effective_statement(e), "strata_note": strata_statement(e)}


def lengths_markdown(effective: Sequence[dict[str, Any]], truncation: Sequence[dict[str, Any]],
                     figure: str | None = None) -> str:
    lines: list[str] = []
    if effective:
        e0 = effective[0]
        lines += ["### Effective context (score against consumed tokens)", "",
                  f"Within each stratum of the task's design, items are grouped by the tokens the model consumed for "
                  f"their relevant document (seen.parquet, after resizing, frame caps and truncation; equal lengths "
                  f"form one point), not by their nominal bin. Each stratum's reference is its mean {e0['metric']} at "
                  "its own shortest lengths; strata at chance there are left out. The task's curve is the "
                  "item-weighted mean of the strata's drops from their references; the effective context is the "
                  "longest consumed length before the first point whose drop exceeds its resolution floor (or a "
                  "fixed tolerance), placed by binary segmentation. `at least`: the score never dropped, the model "
                  "may reach further than the data goes. Definition and a worked example: the *Statistics* page.", "",
                  md_table(["model", "items", "strata", "reference", "tolerance", "effective context",
                            "first drop at", "longest consumed"],
                           [[e["label"], e["n_items"], e.get("strata_note") or strata_statement(e), fmt(e["reference"]),
                             tolerance_statement(e), e.get("statement") or effective_statement(e),
                             "–" if e["first_drop_tokens"] is None else e["first_drop_tokens"],
                             "–" if e["max_tokens"] is None else e["max_tokens"]] for e in effective]), ""]
        if figure:
            lines += [f"![effective length]({figure})", ""]
        for e in effective:
            if e["curve"]:
                lines.append(f"- {e['label']}: " + ", ".join(f"{c['low']}–{c['high']} tokens: {fmt(c['value'])} (n={c['n']})"
                                                          for c in e["curve"]))
        lines.append("")
    rows = [t for t in truncation if t]
    if rows:
        bins = sorted({b for t in rows for b in t["bins"]}, key=label_key)
        lines += ["### Truncated share per length bin", "",
                  "Share of each bin's candidate documents the model saw middle-truncated to its window (0 % for a "
                  "model whose window holds the whole bin).", "",
                  md_table(["model"] + bins,
                           [[t["label"]] + [_pct(dict(zip(t["bins"], t["truncated_share"])).get(b)) for b in bins]
                            for t in rows]), ""]
    return "\n".join(lines)


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.0f} %"
