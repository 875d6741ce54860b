"""What each model consumed, by length: effective-length curves and contexts, and the truncated share per bin.

Both read only the results folder: per_query (scores, bins, relevant ids) and seen.parquet (each document's
seen tokens and whether it was middle-truncated to the model's window).
"""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from mmbench.evaluators.ordering import label_key
from mmbench.evaluators.stats.effective_length import run_effective_length, tolerance_statement

from mmbench.reports.common import fmt, md_table


def effective_length_entry(per_query: pd.DataFrame, seen: pd.DataFrame, label: str, metric: str,
                           tolerance: float | None = None, window: int | None = None) -> dict[str, Any]:
    """One run's effective context and consumed-length curve, JSON-ready (`tolerance` None: the resolution
    floor of its window; `window` None: a tenth of its items, at least 20)."""
    return {"label": label, "metric": metric, **run_effective_length(per_query, seen, metric, tolerance, window).to_dict()}


def lengths_markdown(effective: Sequence[dict[str, Any]], truncation: Sequence[dict[str, Any]],
                     figure: str | None = None) -> str:
    lines: list[str] = []
    if effective:
        e0 = effective[0]
        lines += ["### Effective context (score against consumed tokens)", "",
                  f"Items are ordered by the tokens the model consumed for their relevant document (seen.parquet, after "
                  f"resizing, frame caps and truncation), not by their nominal bin. Reference: the mean {e0['metric']} of "
                  "each model's shortest `window` items. The effective context is the longest consumed length before the "
                  "first window of `window` consecutive items whose mean falls more than the tolerance below the "
                  "reference; inside that window the drop is placed by binary segmentation. The tolerance column says "
                  "how it was chosen: by default the resolution floor of a window against the reference (the smallest "
                  "drop `window` items can tell from chance), else a fixed value. `≥`: the score never fell by more "
                  "than the tolerance, the model may reach further than the data goes.", "",
                  md_table(["model", "items", "window", "reference", "tolerance", "effective context (tokens)",
                            "first drop at", "longest consumed"],
                           [[e["label"], e["n_items"], e["window"], fmt(e["reference"]), tolerance_statement(e),
                             "–" if e["effective_tokens"] is None else f"{'≥ ' if e['censored'] else ''}{e['effective_tokens']}",
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
