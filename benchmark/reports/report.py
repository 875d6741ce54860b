"""`mmbench report`: averages, positional bias, length×depth heatmaps, length curves, Easy vs Hard,
and modality robustness for one or more runs (any tasks; each task is reported on its own)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from mmbench.evaluators.metrics import metric_range
from mmbench.evaluators.stats.floors import metric_sd, step_floors
from mmbench.evaluators.stats import modality_robustness, positional_bias_lmm, sort_length_bins
from mmbench.evaluators.stats.bootstrap import DEFAULT_RESAMPLES
from mmbench.evaluators.stats.robustness import MODALITIES, THRESHOLDS
from mmbench.results.store import RunResults
from mmbench.tasks import design_strata

from mmbench.reports import figures
from mmbench.reports.lengths import effective_length_entry
from mmbench.evaluators.truncated_share import truncated_share_by_bin
from mmbench.reports.efficiency import efficiency_rows
from mmbench.reports.common import CI_METRICS, averages, metric_ci, run_labels, scored
from mmbench.reports.report_text import heatmap_floor_lines, report_markdown

HEATMAP_METRIC = "precision_at_5"   # the seed's heatmaps are P@5


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "task"


def _mean_or_none(series: pd.Series) -> float | None:
    return float(series.mean()) if len(series) else None


def _group_col(pq: pd.DataFrame, task: str) -> pd.Series:
    if "dataset" in pq.columns:
        return pq["dataset"].astype("string").fillna(task).map(lambda d: f"{task} / {d}")
    return pd.Series(task, index=pq.index)


def heatmap_numbers(pq: pd.DataFrame, label: str, metric: str) -> list[dict[str, Any]]:
    if not {"depth", "length_bin", metric} <= set(pq.columns):
        return []
    rows = pq[pq["depth"].notna()]
    if rows.empty:
        return []
    anchors = rows["anchor_kind"].astype("string").fillna("?") if "anchor_kind" in rows.columns else pd.Series("all", index=rows.index)
    lengths = sort_length_bins(rows["length_bin"].astype(str))
    depths = sorted(float(d) for d in rows["depth"].unique())
    out = []
    for anchor in sorted(anchors.unique()):
        part = rows[anchors == anchor]
        cell = part.groupby([part["depth"].astype(float), part["length_bin"].astype(str)])[metric].agg(["mean", "size"])
        values = [[float(cell.loc[(d, l), "mean"]) if (d, l) in cell.index else None for l in lengths] for d in depths]
        counts = [[int(cell.loc[(d, l), "size"]) if (d, l) in cell.index else 0 for l in lengths] for d in depths]
        sd, basis = metric_sd(part[metric].to_numpy(dtype=float), _score_range(part, metric))
        out.append({"label": label, "anchor_kind": str(anchor), "metric": metric, "lengths": lengths, "depths": depths,
                    "values": values, "n": counts, "ceiling": metric_ceiling(part, metric),
                    # per depth, each step to the next length bin with its floor at the metric's own sd
                    "length_steps": [step_floors(n_row, v_row, sd) for n_row, v_row in zip(counts, values)],
                    "step_sd": sd, "step_sd_basis": basis})
    return out


def _score_range(pq: pd.DataFrame, metric: str) -> float:
    return metric_range(metric, pq["relevant_ids"]) if "relevant_ids" in pq.columns else 1.0


def chance_numbers(pq: pd.DataFrame, metrics: Sequence[str]) -> dict[str, float]:
    """Expected metrics of a uniformly random ranking of each item's pool, averaged over the items (as compare)."""
    from mmbench.evaluators.metrics import chance_metrics

    if not {"ranked_ids", "relevant_ids"} <= set(pq.columns) or pq.empty:
        return {}
    rows = [chance_metrics(len(r), len(rel)) for r, rel in zip(pq["ranked_ids"], pq["relevant_ids"])]
    return {m: float(np.mean([row[m] for row in rows])) for m in dict.fromkeys(metrics) if m in rows[0]}


def metric_ceiling(pq: pd.DataFrame, metric: str) -> float:
    """The best mean a perfect ranking reaches: P@k is capped at (relevant ÷ k) per item (0.2 for P@5 with one
    relevant), every other metric at 1. Heatmap colours run from 0 to this ceiling."""
    m = re.fullmatch(r"precision_at_(\d+)", metric)
    if not m or "relevant_ids" not in pq.columns or pq.empty:
        return 1.0
    k = int(m.group(1))
    return float(np.mean([min(len(r), k) / k for r in pq["relevant_ids"]]))


def _ci_pair(values: pd.Series, resamples: int, seed: int) -> list[float | None]:
    """[low, high] of a seeded percentile bootstrap CI of the mean; [None, None] under 2 items."""
    ci = metric_ci(pd.to_numeric(values).to_numpy(dtype=float), resamples=resamples, seed=seed)
    return [ci["low"], ci["high"]]


def length_curve_numbers(pq: pd.DataFrame, label: str, task: str, metric: str, *,
                         resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[dict[str, Any]]:
    """Mean `metric` per length bin, per group and difficulty, with a seeded bootstrap CI and the
    random-ranking expectation of each point (the chance line)."""
    if "length_bin" not in pq.columns or pq["length_bin"].isna().all():
        return []
    rows = pq[pq["length_bin"].notna()]
    groups = _group_col(rows, task)
    diffs = rows["difficulty"].astype("string").fillna("all") if "difficulty" in rows.columns else pd.Series("all", index=rows.index)
    out = []
    for group in sorted(groups.unique()):
        for diff in sorted(diffs[groups == group].unique()):
            part = rows[(groups == group) & (diffs == diff)]
            bins = part["length_bin"].astype(str)
            lengths = sort_length_bins(bins)
            cells = [part[bins == l] for l in lengths]
            cis = [_ci_pair(c[metric], resamples, seed) for c in cells]
            out.append({"label": label, "group": str(group), "difficulty": str(diff), "lengths": lengths,
                        "values": [float(c[metric].mean()) for c in cells], "n": [int(len(c)) for c in cells],
                        "ci_low": [ci[0] for ci in cis], "ci_high": [ci[1] for ci in cis],
                        "chance": [chance_numbers(c, [metric]).get(metric) for c in cells],
                        "steps": step_floors([len(c) for c in cells], [float(c[metric].mean()) for c in cells],
                                             metric_sd(part[metric].to_numpy(dtype=float), _score_range(part, metric))[0])})
    return out


def easy_hard_numbers(pq: pd.DataFrame, label: str, task: str, metric: str, *,
                      resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[dict[str, Any]]:
    if "difficulty" not in pq.columns:
        return []
    diff = pq["difficulty"].astype("string").str.lower()
    if not {"easy", "hard"} <= set(diff.dropna().unique()):
        return []
    groups = _group_col(pq, task)
    out = []
    for group in sorted(groups.unique()):
        easy_rows, hard_rows = pq[(groups == group) & (diff == "easy")], pq[(groups == group) & (diff == "hard")]
        easy, hard = easy_rows[metric], hard_rows[metric]
        e, h = _mean_or_none(easy), _mean_or_none(hard)
        drop = e - h if e is not None and h is not None else None
        out.append({"label": label, "group": str(group), "easy": e, "hard": h, "n_easy": int(len(easy)), "n_hard": int(len(hard)),
                    "drop": drop, "relative_drop": (drop / e) if drop is not None and e else None,
                    "easy_ci": _ci_pair(easy, resamples, seed), "hard_ci": _ci_pair(hard, resamples, seed),
                    "chance_easy": chance_numbers(easy_rows, [metric]).get(metric),
                    "chance_hard": chance_numbers(hard_rows, [metric]).get(metric)})
    return out


def robustness_numbers(pq: pd.DataFrame, label: str, metric: str, seen: set[str] | None = None, *,
                       resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[dict[str, Any]]:
    """Modality typing per anchor kind (text and image anchors are never pooled: a text-only model finds a
    text anchor in an image-only haystack because it is the only text it sees). `seen` is the set of
    modalities the model saw (from the run's seen-records); a model that cannot see the anchor, or the
    image/text backgrounds, is labelled as such instead of being typed."""
    if "background_modality" not in pq.columns:
        return []
    kinds = sorted(pq["anchor_kind"].dropna().unique()) if "anchor_kind" in pq.columns else []
    parts = [(k, pq[pq["anchor_kind"] == k]) for k in kinds] or [(None, pq)]
    out = []
    for anchor, part in parts:
        groups = averages(part)["groups"]
        scores = {m: groups.get(f"background_modality={m}", {}).get(metric) for m in MODALITIES}
        if any(v is None for v in scores.values()):
            continue
        res = modality_robustness(scores).to_dict()
        blind = _blindness(anchor, seen)
        if blind:
            res["kind"], res["reason"] = blind
        res["n"] = {m: groups[f"background_modality={m}"]["n"] for m in MODALITIES}
        by_mod = {m: part[part["background_modality"] == m] for m in MODALITIES}
        res["ci"] = {m: _ci_pair(rows[metric], resamples, seed) for m, rows in by_mod.items()}
        res["chance"] = {m: chance_numbers(rows, [metric]).get(metric) for m, rows in by_mod.items()}
        out.append({"label": label if anchor is None else f"{label} ({anchor} anchor)", "model": label,
                    "anchor_kind": anchor, "modalities_seen": sorted(seen) if seen is not None else None, **res})
    return out


def _blindness(anchor: str | None, seen: set[str] | None) -> tuple[str, str] | None:
    if seen is None:
        return None
    if anchor is not None and anchor not in seen:
        return (f"blind ({anchor} anchors unseen)", f"the model sees {', '.join(sorted(seen)) or 'nothing'}: "
                f"it cannot see a {anchor} anchor, so its scores here are at chance by construction")
    missing = [m for m in ("text", "image") if m not in seen]
    if missing:
        return (f"not typed ({missing[0]} backgrounds unseen)",
                f"the model does not see {missing[0]}: in a {missing[0]}-only haystack the anchor is all it sees, so "
                "the background columns do not measure robustness to noise")
    return None


def positional_numbers(pq: pd.DataFrame, label: str, metric: str) -> list[dict[str, Any]]:
    if "depth" not in pq.columns or pq["depth"].dropna().nunique() < 2:
        return []
    rows = pq[pq["depth"].notna()]
    subsets = [("all", rows)]
    if "anchor_kind" in rows.columns and rows["anchor_kind"].nunique() > 1:
        subsets += [(f"{k} anchor", rows[rows["anchor_kind"] == k]) for k in sorted(rows["anchor_kind"].dropna().unique())]
    out = []
    for name, part in subsets:
        entry: dict[str, Any] = {"label": label, "rows": name}
        try:
            entry["result"] = positional_bias_lmm(part, score=metric).to_dict()
        except Exception as exc:  # a report keeps going; the JSON says why this fit is missing
            entry["error"] = f"not fitted: {exc}" if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        out.append(entry)
    return out


def report_numbers(runs: Sequence[RunResults], *, metric: str = "precision_at_1", heatmap_metric: str = HEATMAP_METRIC,
                   ci_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                   effective: dict[str, Any] | None = None) -> dict[str, Any]:
    by_task: dict[str, list[RunResults]] = {}
    for run in runs:
        by_task.setdefault(run.task, []).append(run)
    labelled = [(label, run) for task_runs in by_task.values() for label, run in zip(run_labels(task_runs), task_runs)]
    tasks: dict[str, dict[str, Any]] = {}
    for label, run in labelled:
        pq, n_failed = scored(run.per_query)
        for col in (metric, heatmap_metric):
            if col not in pq.columns:
                raise ValueError(f"{run.root or label}: per-query metric {col!r} is missing")
        t = tasks.setdefault(run.task, {"task": run.task, "content_hashes": [], "runs": [], "positional_bias": [], "heatmaps": [],
                                        "length_curves": [], "easy_hard": [], "modality_robustness": [],
                                        "effective_length": [], "truncated_share": []})
        if run.content_hash not in t["content_hashes"]:
            t["content_hashes"].append(run.content_hash)
        avg = averages(pq)
        ci = {m: metric_ci(pq[m].to_numpy(dtype=float), resamples=ci_resamples, seed=seed)
              for m in dict.fromkeys([*CI_METRICS, metric]) if m in pq.columns}
        chance = chance_numbers(pq, [*CI_METRICS, metric])
        t["runs"].append({"label": label, "model": run.info.get("model", {}), "content_hash": run.content_hash, "chance": chance,
                          "root": str(run.root) if run.root else None, "n_failed_excluded": n_failed, "micro": avg["micro"], "macro": avg["macro"],
                          "subsets": avg["subsets"], "bootstrap_ci": ci})
        t["positional_bias"] += positional_numbers(pq, label, metric)
        t["heatmaps"] += heatmap_numbers(pq, label, heatmap_metric)
        boot = {"resamples": ci_resamples, "seed": seed}
        t["length_curves"] += length_curve_numbers(pq, label, run.task, metric, **boot)
        t["easy_hard"] += easy_hard_numbers(pq, label, run.task, metric, **boot)
        seen = run.info.get("modalities_seen") or run.info.get("model", {}).get("modalities")
        t["modality_robustness"] += robustness_numbers(pq, label, metric, set(seen) if seen else None, **boot)
        t["effective_length"].append(effective_length_entry(run.per_query, run.seen, label, metric,
                                                            **(effective or {}), strata=design_strata(run.task)))
        t["truncated_share"].append(truncated_share_by_bin(run.per_query, run.seen, label))
    for name, task_runs in by_task.items():
        tasks[name]["efficiency"] = efficiency_rows(task_runs)
    return {"kind": "mmbench.report",
            "settings": {"metric": metric, "heatmap_metric": heatmap_metric, "ci_resamples": ci_resamples, "seed": seed,
                         "ci_method": "percentile bootstrap, seeded numpy Generator",
                         "positional_model": "score ~ C(depth) + C(length_bin) + (1 | needle_id), REML; "
                                             "quadratic: score ~ depth + depth^2 + C(length_bin) + (1 | needle_id)",
                         "robustness_thresholds": THRESHOLDS},
            "tasks": list(tasks.values())}


def draw_figures(data: dict[str, Any], out: Path) -> None:
    """Draw every figure into out/figures and record it (relative path, panels) in `data`."""
    s = data["settings"]
    for t in data["tasks"]:
        slug = _slug(t["task"])
        figs = {}
        if t["heatmaps"]:
            figs["heatmap"] = figures.heatmap_figure(t["heatmaps"], out / "figures" / f"{slug}_heatmap.png", s["heatmap_metric"],
                                                     title=f"{t['task']}: {s['heatmap_metric']} by length and depth")
        if t["length_curves"]:
            figs["length_curves"] = figures.length_curves_figure(t["length_curves"], out / "figures" / f"{slug}_length_curves.png",
                                                                 s["metric"])
        if t["easy_hard"]:
            figs["easy_vs_hard"] = figures.easy_hard_figure(t["easy_hard"], out / "figures" / f"{slug}_easy_vs_hard.png", s["metric"])
        if t["modality_robustness"]:
            figs["modality_robustness"] = figures.robustness_figure(t["modality_robustness"],
                                                                    out / "figures" / f"{slug}_modality.png", s["metric"])
        fits = [e for e in t["positional_bias"] if "result" in e]
        if fits:
            figs["depth_coefficients"] = figures.depth_coefficients_figure(fits, out / "figures" / f"{slug}_depth_coefficients.png",
                                                                           s["metric"])
        if any(e["curve"] for e in t.get("effective_length", [])):
            figs["effective_length"] = figures.effective_length_figure(t["effective_length"],
                                                                       out / "figures" / f"{slug}_effective_length.png", s["metric"])
        if _main_score(t["task"]) in CI_METRICS and all(m in t["runs"][0]["bootstrap_ci"] for m in CI_METRICS):
            figs["retrieval_metrics"] = figures.metric_cis_figure(t["runs"], out / "figures" / f"{slug}_retrieval_metrics.png",
                                                                  [(m, METRIC_LABELS[m]) for m in CI_METRICS])
        t["figures"] = {}
        for name, info in figs.items():
            d = info.to_dict()
            d["path"] = str(Path(d["path"]).relative_to(out))
            t["figures"][name] = d


METRIC_LABELS = {"recall_at_1": "R@1", "recall_at_3": "R@3", "mrr": "MRR"}


def _main_score(task: str) -> str | None:
    """The task's main score (R@1 for Flickr hard negatives), None for a task mmbench does not know."""
    from mmbench.tasks import UnknownTaskError, get_task

    try:
        return get_task(task).main_score
    except UnknownTaskError:
        return None


__all__ = ["HEATMAP_METRIC", "chance_numbers", "draw_figures", "easy_hard_numbers", "heatmap_floor_lines", "heatmap_numbers",
           "length_curve_numbers", "metric_ceiling", "positional_numbers", "report_markdown", "report_numbers",
           "robustness_numbers"]
