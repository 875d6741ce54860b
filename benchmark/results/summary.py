"""Plain-text summary tables of a run: the main score by the task's axes, split by subset."""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from mmbench.data.truncation import strategy_of
from mmbench.evaluators.ordering import label_key, subset_key

from mmbench.results.store import RunResults

FALLBACK_METRICS = ("precision_at_1", "recall_at_5", "mrr_at_10", "ndcg_at_10")


def pivot(per_query: pd.DataFrame, axis: str, metric: str) -> pd.DataFrame:
    """Mean `metric` with one row per subset (plus 'all') and one column per value of `axis`.

    A subset name that contains the axis value (`hotpotqa/hard/8k` on the length axis) is
    shortened to the rest (`hotpotqa/hard`), so the table is crossed instead of diagonal.
    """
    ok = per_query[per_query["error"].isna()] if "error" in per_query.columns else per_query
    rows = [("/".join(p for p in str(s).split("/") if p != str(v)) or str(s))
            for s, v in zip(ok["subset"].tolist(), ok[axis].tolist())]
    ok = ok.assign(_row=rows)
    table = ok.pivot_table(index="_row", columns=axis, values=metric, aggfunc="mean")
    table = table.reindex(sorted(table.index, key=subset_key))
    table.loc["all"] = ok.groupby(axis)[metric].mean()
    table.index.name = "subset"
    return table[sorted(table.columns, key=label_key)]


def format_summary(res: RunResults, axes: Sequence[str], metric: str = "precision_at_1",
                   effective: dict | None = None) -> str:
    """The text `mmbench show` prints; `effective` ({tolerance, window}) sets how the effective context is read."""
    pq = res.per_query
    lines = [f"task {res.task}  model {res.model_name}  pool set {res.content_hash[:12]}",
             f"items {len(pq)}  failed {int(pq['error'].notna().sum()) if 'error' in pq else 0}  "
             f"metric {metric}"]
    info = res.info
    lines += protocol_lines(info)
    unseen = info.get("documents_with_unseen_modalities", 0)
    if unseen:
        lines.append(f"note: the model sees only {', '.join(info.get('modalities_seen', []))}; "
                     f"{unseen} documents had content it could not see (images/videos dropped)")
    for warning in info.get("warnings") or []:  # e.g. a model whose vectors are all zero or all identical
        lines.append(f"WARNING: {warning}")
    set_aside = (info.get("encode") or {}).get("cache_set_aside")
    if set_aside:
        lines.append(f"note: {set_aside} damaged embedding cache entries were set aside (*.corrupt) and re-encoded")
    if info.get("documents_truncated"):
        how = strategy_of((info.get("model") or {}).get("settings"))
        lines.append(f"note: {info['documents_truncated']} documents were {how}-truncated to the model's window")
    adapted = info.get("documents_adapted") or {}
    if adapted:  # the adapter's own account of padding, resampling, upscaling and cuts (seen.parquet's model_info)
        lines.append("note: documents adapted to the model: " + ", ".join(f"{k} {v}" for k, v in adapted.items())
                     + " (see the protocol's visual_handling)")
    for row in _overall(res):
        lines.append(row)
    lines += efficiency_lines(info.get("efficiency"))
    lines += effective_context_lines(res, metric, **(effective or {}))
    for axis in axes:
        if axis not in pq.columns or pq[axis].isna().all():
            continue
        table = pivot(pq, axis, metric)
        table.loc["floor (MDE)"] = floor_row(pq, axis, metric)
        truncated = truncated_row(res, axis)
        if truncated is not None:
            table.loc["truncated share"] = truncated
        lines.append("")
        lines.append(f"{metric} by {axis}")
        lines.append(table.to_string(float_format=lambda x: f"{x:.3f}"))
        lines.append("floor (MDE): the smallest paired difference between two models this column's items can detect "
                     "(alpha 0.05, power 0.8, design-time, on the metric's own range; NaN: too few items to detect "
                     "any difference)")
        if truncated is not None:
            lines.append("truncated share: the share of the bin's documents the model saw middle-truncated to its "
                         "window (seen.parquet)")
    failures = info.get("failures") or {}
    if failures:
        lines.append("")
        what = "ranking items failed (no usable ranking)" if info.get("kind") == "llm_ranker" else "documents failed to encode"
        lines.append(f"{len(failures)} {what} (first shown):")
        for doc, msg in list(failures.items())[:5]:
            lines.append(f"  {doc}: {msg}")
    return "\n".join(lines)


def effective_context_lines(res: RunResults, metric: str, tolerance: float | None = None,
                            window: int | None = None) -> list[str]:
    """The run's effective context by consumed tokens within the task's strata (evaluators.stats.effective_length)."""
    from mmbench.evaluators.stats.effective_length import (run_effective_length, effective_statement, strata_statement,
                                                           tolerance_statement)
    from mmbench.tasks import design_strata

    if metric not in res.per_query.columns or "relevant_ids" not in res.per_query.columns:
        return []
    e = run_effective_length(res.per_query, res.seen, metric, tolerance, window, design_strata(res.task)).to_dict()
    if e["status"] == "no items":
        return []
    how = f"{metric} by tokens consumed, {strata_statement(e)}"
    if e["tolerance"] is not None:
        how += f"; tolerance {tolerance_statement(e)}"
    return [f"effective context: {effective_statement(e)} ({how})"]


def efficiency_lines(eff: Any) -> list[str]:
    """The run's efficiency record in two lines (nothing for results written before it existed)."""
    if not isinstance(eff, dict):
        return []
    device = str(eff.get("device") or "?") + (f" ({eff['device_name']})" if eff.get("device_name") else "")
    gpu = (f", GPU peak {human_figure(eff.get('gpu_peak_allocated_mb'), 0)} MB allocated / "
           f"{human_figure(eff.get('gpu_peak_reserved_mb'), 0)} MB reserved" if eff.get("gpu_peak_reserved_mb") is not None else "")
    out = [f"efficiency on {device}, backend {eff.get('backend') or '?'}: {human_figure(eff.get('documents_per_second'), 2)} docs/s, "
           f"{human_figure(eff.get('tokens_per_second'), 1)} tokens/s over {eff.get('documents', 0)} documents encoded in this run; first vector "
           f"after {human_figure(eff.get('time_to_first_vector_seconds'), 3)} s; load {human_figure(eff.get('load_seconds'), 2)} s; "
           f"peak RSS {human_figure(eff.get('peak_rss_mb'), 0)} MB{gpu}"]
    extra = []
    if isinstance(eff.get("api"), dict):
        extra.append(f"API requests {eff['api'].get('requests')} (retries {eff['api'].get('retries')})")
    if eff.get("cost_per_1k_documents") is not None:
        extra.append(f"cost {eff['cost_per_1k_documents']:.4g} per 1,000 documents at {eff.get('price_per_token')} per token")
    bins = eff.get("by_length_bin") or {}
    if bins:
        extra.append("tokens/s by length bin: " + ", ".join(f"{k} {human_figure(v.get('tokens_per_second'), 1)}"
                                                           for k, v in bins.items() if isinstance(v, dict)))
    return out + (["  " + "; ".join(extra)] if extra else [])


def human_figure(v: Any, digits: int) -> str:
    """A figure for people: thousands grouped, and no decimals past 1,000 (`7,439,593 tokens/s`, not `7439593.1`)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "n/a"
    return f"{v:,.{0 if abs(v) >= 1000 else digits}f}"


def headline_metrics(task: str) -> tuple[str, ...]:
    """The metrics the task declares (TaskSpec.metrics); P@1, R@5, MRR@10, nDCG@10 for a task not in the registry."""
    from mmbench.tasks import UnknownTaskError, get_task

    try:
        return get_task(task).metrics
    except UnknownTaskError:
        return FALLBACK_METRICS


def metric_label(name: str) -> str:
    """Short label of a metric column: precision_at_1 -> P@1, mrr -> MRR, ndcg_at_10 -> nDCG@10."""
    short = {"precision": "P", "recall": "R", "mrr": "MRR", "ndcg": "nDCG"}
    base, _, k = name.partition("_at_")
    return f"{short.get(base, base)}@{k}" if k else short.get(base, base)


def _overall(res: RunResults) -> list[str]:
    from mmbench.results.mteb_layout import group_entries

    groups = group_entries(res.summary)
    metrics = headline_metrics(res.task)
    out = []
    for group, label in (("all", "micro (over items)"), ("macro_over_subsets", "macro (over subsets)")):
        if group in groups:
            out.append(f"{label}: " + "  ".join(f"{metric_label(m)} {_fmt(groups[group].get(m))}" for m in metrics))
    return out


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def truncated_row(res: RunResults, axis: str) -> pd.Series | None:
    """On the length-bin table: the share of each bin's documents the model saw truncated (None elsewhere)."""
    from mmbench.evaluators.truncated_share import truncated_share_by_bin

    if axis != "length_bin" or res.seen is None:
        return None
    shares = truncated_share_by_bin(res.per_query, res.seen, res.model_name)
    if shares is None:
        return None
    return pd.Series(dict(zip(shares["bins"], shares["truncated_share"])), dtype=float)


def floor_row(per_query: pd.DataFrame, axis: str, metric: str = "precision_at_1") -> pd.Series:
    """Design-time resolution floor of each value of `axis` (from its number of scored items), on `metric`'s own
    range (P@5 with one relevant candidate reaches 0.2, so its floors are a fifth of P@1's)."""
    from mmbench.evaluators.metrics import metric_range
    from mmbench.evaluators.stats.floors import design_floor

    ok = per_query[per_query["error"].isna()] if "error" in per_query.columns else per_query
    ceiling = metric_range(metric, ok["relevant_ids"]) if "relevant_ids" in ok.columns else 1.0
    counts = ok.groupby(axis).size()
    return pd.Series({v: design_floor(int(n), ceiling=ceiling).mde for v, n in counts.items()}, dtype=float)


def protocol_lines(info: dict) -> list[str]:
    """The protocol id, the item selection and the strata it covered."""
    record = info.get("protocol")
    if not isinstance(record, dict):
        return ["protocol: not recorded (results written by an older mmbench)"]
    sel = (record.get("evaluation") or {}).get("selection") or {}
    setup = record.get("setup") or {}
    limit = sel.get("limit")
    which = "all items" if limit is None else f"--limit {limit}: {sel.get('n_items')} of {sel.get('n_items_total')} items"
    window = (setup.get("truncation") or {}).get("window_tokens")
    out = [f"protocol {info.get('protocol_id')}  ({which}, items {sel.get('items_hash')}; "
           f"dtype {setup.get('dtype') or 'n/a (no weights)'}; backend {setup.get('backend')}; "
           f"window {f'{window:,} tokens' if isinstance(window, int) else 'none (whole documents)'})"]
    strata = record.get("strata") or {}
    if limit is not None and strata.get("axes"):
        covered = "; ".join(f"{axis} {sum(1 for n in vals.values() if n)}/{len(vals)}"
                            for axis, vals in strata["axes"].items())
        out.append(f"strata covered: {strata.get('cells_covered')}/{strata.get('cells_total')} cells; {covered}")
    out += estimate_lines(info.get("selection") or {}, info.get("main_metric") or "precision_at_1")
    return out


def estimate_lines(selection: dict, metric: str) -> list[str]:
    """Which estimator the run's score is, and for a --limit sample its weighted estimate with the CI."""
    estimator = selection.get("estimator")
    if not estimator:
        return []
    e = (selection.get("estimate") or {}).get(metric) or {}
    if e.get("value") is None:
        return [f"estimator: {estimator}"]
    return [f"estimator: {estimator} (seed {selection.get('seed')})",
            f"estimate of the whole task's {metric}: {e['value']:.3f} (se {e['se']:.3f}; "
            f"{100 * e['confidence']:.0f} % CI [{e['ci_low']:.3f}, {e['ci_high']:.3f}]; {e['strata']} strata by "
            f"{' x '.join(e['axes_used']) or 'none'}); the means below are over the sampled items only"]
