"""Matplotlib figures (Agg backend) drawn from the report's numbers, so figures and JSON agree.

Every `*_figure` function writes one PNG and returns a `FigureInfo` whose `panels` are the titles of
the axes actually drawn (colour bars excluded), in reading order. Each is a thin wrapper around a
`draw_*` function that returns the open matplotlib figure (for tests of the layout).

Conventions: error bars and bands are the 95 % CIs the numbers carry (seeded percentile
bootstrap, or the fit's Wald CI); a grey dotted line or tick is the random-ranking expectation
(chance); legends sit below the panels, outside every axes, so they never cover a point.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from mmbench.evaluators.stats._base import StatResult  # noqa: E402
from mmbench.data.media import atomic_write_bytes  # noqa: E402

DPI = 110


@dataclass
class FigureInfo(StatResult):
    path: str
    kind: str
    rows: int
    cols: int
    panels: list[str] = field(default_factory=list)


def _save(fig, path: Path, kind: str, rows: int, cols: int, panel_axes) -> FigureInfo:
    buffer = io.BytesIO()
    fig.savefig(buffer, format=path.suffix.lstrip(".") or "png", dpi=DPI, bbox_inches="tight")
    atomic_write_bytes(path, buffer.getvalue())
    titles = [ax.get_title() for ax in panel_axes]
    plt.close(fig)
    return FigureInfo(path=str(path), kind=kind, rows=rows, cols=cols, panels=titles)


CHANCE_STYLE = dict(color="0.35", linestyle=":", linewidth=1.4)
CHANCE_LABEL = "random ranking (expected)"
EASY_HARD_COLORS = {"easy": "#1f77b4", "hard": "#d62728"}


def _nan(v: Any) -> float:
    return np.nan if v is None else float(v)


def _yerr(values: Sequence[Any], lows: Sequence[Any], highs: Sequence[Any]) -> np.ndarray:
    """Asymmetric error-bar lengths (2 × n) from CI bounds; NaN where a bound is missing."""
    v, lo, hi = (np.array([_nan(x) for x in seq]) for seq in (values, lows, highs))
    return np.vstack([np.clip(v - lo, 0, None), np.clip(hi - v, 0, None)])


def _legend_below(fig, axes) -> None:
    """One legend for the figure, below the panels (outside every axes), each label once."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", fontsize=7,
                   ncols=min(4, len(handles)), frameon=False)


def _grid(n: int, width: float = 4.2, height: float = 3.2):
    cols = min(3, max(n, 1))
    rows = math.ceil(max(n, 1) / cols)
    fig, axes = plt.subplots(rows, cols, squeeze=False, layout="constrained", figsize=(width * cols, height * rows + 0.6))
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].set_axis_off()
    return fig, axes, rows, cols


def _chance_ticks(ax, x: np.ndarray, chance: Sequence[Any], half_width: float) -> None:
    """A short grey dotted tick at each bar's chance value (skipped where unknown)."""
    for xi, c in zip(x, chance):
        if c is not None and math.isfinite(c):
            ax.hlines(c, xi - half_width, xi + half_width, **CHANCE_STYLE, label=CHANCE_LABEL)


def _values(rows: Sequence[Sequence[Any]]) -> np.ndarray:
    return np.array([[np.nan if v is None else float(v) for v in row] for row in rows], dtype=float)


def heatmap_figure(heatmaps: Sequence[dict[str, Any]], path: Path, metric: str, title: str = "") -> FigureInfo:
    """Length (x) × depth (y) grid per model (rows) and anchor kind (columns); brighter is higher."""
    models = list(dict.fromkeys(h["label"] for h in heatmaps))
    anchors = list(dict.fromkeys(h["anchor_kind"] for h in heatmaps))
    by_key = {(h["label"], h["anchor_kind"]): h for h in heatmaps}
    finite = [v for h in heatmaps for row in h["values"] for v in row if v is not None and math.isfinite(v)]
    ceiling = max((h.get("ceiling") or 0.0) for h in heatmaps)  # a perfect ranking's mean: P@5 is ≤ 0.2 with one relevant
    vmax = ceiling if ceiling > 0 else (max(finite) if finite and max(finite) > 0 else 1.0)
    fig, axes = plt.subplots(len(models), len(anchors), squeeze=False, layout="constrained",
                             figsize=(2.0 + 0.8 * max(len(h["lengths"]) for h in heatmaps) * len(anchors), 0.6 + 2.6 * len(models)))
    drawn, image = [], None
    for r, model in enumerate(models):
        for c, anchor in enumerate(anchors):
            ax = axes[r][c]
            h = by_key.get((model, anchor))
            if h is None:
                ax.set_axis_off()
                continue
            vals = _values(h["values"])
            image = ax.imshow(vals, aspect="auto", origin="upper", cmap="viridis", vmin=0.0, vmax=vmax)
            ax.set_xticks(range(len(h["lengths"])), h["lengths"], fontsize=7)
            ax.set_yticks(range(len(h["depths"])), [f"{100 * d:.0f}%" for d in h["depths"]], fontsize=7)
            ax.set_xlabel("context length bin", fontsize=8)
            ax.set_ylabel("needle depth", fontsize=8)
            for (i, j), v in np.ndenumerate(vals):
                if math.isfinite(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6,
                            color="black" if v > 0.6 * vmax else "white")
            ax.set_title(f"{model} | {anchor} anchor", fontsize=9)
            drawn.append(ax)
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8,
                     label=metric + ("" if vmax == 1.0 else f" (scale 0 to its ceiling {vmax:.2f})"))
    fig.suptitle(title or f"{metric} by length and depth", fontsize=10)
    return _save(fig, path, "length_depth_heatmap", len(models), len(anchors), drawn)


def _length_axes(ax, xlabel: str, metric: str, title: str) -> None:
    """A score-against-length panel: the score from 0 to 1, both axes labelled, a light grid, its title."""
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(metric, fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=9)


def _legend_and_note(fig, axes, note: str) -> None:
    """The legend under the panels and a small note on how to read them in the top left corner."""
    _legend_below(fig, axes)
    fig.text(0.0, 1.0, note, fontsize=6, va="bottom", color="0.4")


def draw_length_curves(curves: Sequence[dict[str, Any]], metric: str):
    """One panel per task/dataset group: metric against length bin with its CI band, a line per model and
    difficulty (Easy: solid, circles, dark hue; Hard: dashed, squares, light hue of the model's colour)."""
    from mmbench.evaluators.stats import sort_length_bins

    groups = list(dict.fromkeys(c["group"] for c in curves))
    fig, axes, rows, cols = _grid(len(groups))
    models = list(dict.fromkeys(c["label"] for c in curves))
    pair = {m: 2 * (i % 10) for i, m in enumerate(models)}   # tab20: 2i dark, 2i + 1 light
    styles = {"easy": ("-", "o", 0), "hard": ("--", "s", 1), "all": ("-", "o", 0)}
    drawn = []
    for k, group in enumerate(groups):
        ax = axes[k // cols][k % cols]
        part = [c for c in curves if c["group"] == group]
        lengths = sort_length_bins({l for c in part for l in c["lengths"]})
        pos = {l: i for i, l in enumerate(lengths)}
        chance_lines = set()
        for c in part:
            x = np.array([pos[l] for l in c["lengths"]])
            dash, marker, shade = styles.get(c["difficulty"], (":", "^", 0))
            color = plt.cm.tab20(pair[c["label"]] + shade)
            label = c["label"] if c["difficulty"] == "all" else f"{c['label']} ({c['difficulty'].capitalize()})"
            ax.plot(x, [_nan(v) for v in c["values"]], marker=marker, color=color, linestyle=dash, label=label)
            if c.get("ci_low") is not None and len(x) > 1:
                ax.fill_between(x, [_nan(v) for v in c["ci_low"]], [_nan(v) for v in c["ci_high"]], color=color,
                                alpha=0.15, linewidth=0)
            elif c.get("ci_low") is not None:  # one point: a band would be invisible, draw its error bar
                ax.errorbar(x, [_nan(v) for v in c["values"]], yerr=_yerr(c["values"], c["ci_low"], c["ci_high"]),
                            color=color, capsize=3, linestyle="none")
            chance = tuple(c.get("chance") or ())
            if chance and any(v is not None for v in chance) and (tuple(x), chance) not in chance_lines:
                chance_lines.add((tuple(x), chance))
                ax.plot(x, [_nan(v) for v in chance], **CHANCE_STYLE, marker="_", markersize=14, label=CHANCE_LABEL)
        ax.set_xticks(range(len(lengths)), lengths, fontsize=7)
        _length_axes(ax, "context length bin", metric, group)
        drawn.append(ax)
    _legend_and_note(fig, drawn, "bands / bars: 95 % bootstrap CI")
    return fig, drawn, rows, cols


def length_curves_figure(curves: Sequence[dict[str, Any]], path: Path, metric: str) -> FigureInfo:
    fig, drawn, rows, cols = draw_length_curves(curves, metric)
    return _save(fig, path, "length_curves", rows, cols, drawn)


def draw_easy_hard(rows_data: Sequence[dict[str, Any]], metric: str):
    """One panel per task/dataset group: Easy and Hard bars per model with 95 % CIs and chance ticks."""
    groups = list(dict.fromkeys(r["group"] for r in rows_data))
    fig, axes, nrows, cols = _grid(len(groups))
    drawn = []
    for k, group in enumerate(groups):
        ax = axes[k // cols][k % cols]
        part = [r for r in rows_data if r["group"] == group]
        x = np.arange(len(part))
        for offset, diff, hatch in ((-0.2, "easy", ""), (0.2, "hard", "//")):
            vals = [r[diff] for r in part]
            ci = [r.get(f"{diff}_ci") or [None, None] for r in part]
            ax.bar(x + offset, [_nan(v) for v in vals], width=0.4, label=diff.capitalize(), color=EASY_HARD_COLORS[diff],
                   hatch=hatch, edgecolor="white", yerr=_yerr(vals, [c[0] for c in ci], [c[1] for c in ci]),
                   error_kw=dict(ecolor="black", capsize=3, elinewidth=1))
            _chance_ticks(ax, x + offset, [r.get(f"chance_{diff}") for r in part], 0.2)
        ax.set_xticks(x, [r["label"] for r in part], fontsize=7, rotation=20)
        ax.set_ylim(0, 1.02)
        ax.set_ylabel(metric, fontsize=8)
        ax.set_title(group, fontsize=9)
        drawn.append(ax)
    _legend_below(fig, drawn)
    return fig, drawn, nrows, cols


def easy_hard_figure(rows_data: Sequence[dict[str, Any]], path: Path, metric: str) -> FigureInfo:
    fig, drawn, rows, cols = draw_easy_hard(rows_data, metric)
    return _save(fig, path, "easy_vs_hard", rows, cols, drawn)


def draw_robustness(rows_data: Sequence[dict[str, Any]], metric: str):
    """One panel: metric per background modality (text / mixed / image) with 95 % CIs, a bar group per model."""
    fig, ax = plt.subplots(layout="constrained", figsize=(1.5 + 1.4 * len(rows_data), 3.6))
    mods = ("text", "mixed", "image")
    colors = {"text": "#4c72b0", "mixed": "#8172b3", "image": "#55a868"}
    x = np.arange(len(rows_data))
    for i, mod in enumerate(mods):
        vals = [r["scores"][mod] for r in rows_data]
        ci = [(r.get("ci") or {}).get(mod) or [None, None] for r in rows_data]
        xs = x + (i - 1) * 0.27
        ax.bar(xs, [_nan(v) for v in vals], width=0.27, label=f"{mod} background", color=colors[mod],
               yerr=_yerr(vals, [c[0] for c in ci], [c[1] for c in ci]), error_kw=dict(ecolor="black", capsize=2, elinewidth=1))
        _chance_ticks(ax, xs, [(r.get("chance") or {}).get(mod) for r in rows_data], 0.135)
    ax.set_xticks(x, [f"{r['label']}\n({r['kind']})" for r in rows_data], fontsize=7)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel(metric, fontsize=8)
    ax.set_title("modality robustness", fontsize=9)
    _legend_below(fig, [ax])
    return fig, [ax], 1, 1


def robustness_figure(rows_data: Sequence[dict[str, Any]], path: Path, metric: str) -> FigureInfo:
    fig, drawn, rows, cols = draw_robustness(rows_data, metric)
    return _save(fig, path, "modality_robustness", rows, cols, drawn)


def draw_forest(pairs: Sequence[dict[str, Any]], metric: str):
    """Paired differences A − B (mean and 95 % bootstrap CI), one row per pair, zero marked."""
    fig, ax = plt.subplots(layout="constrained", figsize=(6.0, 1.2 + 0.45 * len(pairs)))
    y = np.arange(len(pairs))[::-1]
    diffs = [p["mean_diff"] for p in pairs]
    err = _yerr(diffs, [p["ci_low"] for p in pairs], [p["ci_high"] for p in pairs])
    ax.errorbar([_nan(d) for d in diffs], y, xerr=err, fmt="o", color="#1f77b4", ecolor="#1f77b4", capsize=3,
                label="mean difference, 95 % bootstrap CI")
    ax.axvline(0.0, **CHANCE_STYLE, label="no difference")
    ax.set_yticks(y, [f"{p['a']} − {p['b']}" for p in pairs], fontsize=7)
    ax.set_xlabel(f"paired difference in {metric} (A − B)", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(f"paired differences ({metric})", fontsize=9)
    _legend_below(fig, [ax])
    return fig, [ax], 1, 1


def forest_figure(pairs: Sequence[dict[str, Any]], path: Path, metric: str) -> FigureInfo:
    fig, drawn, rows, cols = draw_forest(pairs, metric)
    return _save(fig, path, "paired_differences", rows, cols, drawn)


def draw_depth_coefficients(fits: Sequence[dict[str, Any]], metric: str):
    """The categorical-depth model's depth coefficients (vs the first depth, fixed at 0) with their 95 % Wald
    CIs, one panel per fit; an unreliable fit says so in its title."""
    fig, axes, rows, cols = _grid(len(fits), width=3.8, height=3.0)
    drawn = []
    for k, f in enumerate(fits):
        ax = axes[k // cols][k % cols]
        r = f["result"]
        est = {e["term"]: e for e in r["estimates"] if e["term"].startswith("depth=")}
        depths = r["depth_levels"]
        ref = depths[0]
        xs = [ref]
        vals: list[float | None] = [0.0]   # None: a depth the fit has no estimate for
        lows: list[float | None] = [0.0]
        highs: list[float | None] = [0.0]
        for d in depths[1:]:
            e = est.get(f"depth={d:g}")
            xs.append(d)
            vals.append(e["estimate"] if e else None)
            lows.append(e["ci_low"] if e else None)
            highs.append(e["ci_high"] if e else None)
        x = 100 * np.array(xs, dtype=float)
        ax.errorbar(x[1:], [_nan(v) for v in vals[1:]], yerr=_yerr(vals[1:], lows[1:], highs[1:]), fmt="o-",
                    color="#1f77b4", capsize=3, label="depth coefficient, 95 % Wald CI")
        ax.plot(x[:1], [0.0], marker="o", markerfacecolor="white", color="#1f77b4", linestyle="none",
                label="reference depth (0 by definition)")
        ax.axhline(0.0, **{**CHANCE_STYLE, "linestyle": "-", "linewidth": 0.8})
        ax.set_xlabel("needle depth (%)", fontsize=8)
        ax.set_ylabel(f"Δ {metric} vs depth {100 * ref:.0f}%", fontsize=8)
        ax.grid(alpha=0.3)
        status = r.get("fit_status", "ok")
        ax.set_title(f"{f['label']} | {f['rows']}" + (" (UNRELIABLE fit)" if status == "unreliable" else ""), fontsize=9)
        drawn.append(ax)
    _legend_below(fig, drawn)
    return fig, drawn, rows, cols


def depth_coefficients_figure(fits: Sequence[dict[str, Any]], path: Path, metric: str) -> FigureInfo:
    fig, drawn, rows, cols = draw_depth_coefficients(fits, metric)
    return _save(fig, path, "depth_coefficients", rows, cols, drawn)


def draw_metric_cis(runs: Sequence[dict[str, Any]], metrics: Sequence[tuple[str, str]]):
    """Grouped bars: each (key, label) metric per model with its 95 % bootstrap CI and the chance tick
    (the Flickr hard-negative figure: R@1, R@3, MRR)."""
    fig, ax = plt.subplots(layout="constrained", figsize=(2.0 + 1.3 * len(runs) * len(metrics) / 3, 3.6))
    x = np.arange(len(runs))
    width = 0.8 / len(metrics)
    for i, (key, label) in enumerate(metrics):
        ci = [r["bootstrap_ci"].get(key) or {} for r in runs]
        vals = [c.get("estimate") for c in ci]
        xs = x + (i - (len(metrics) - 1) / 2) * width
        ax.bar(xs, [_nan(v) for v in vals], width=width, label=label, color=plt.cm.tab10(i),
               yerr=_yerr(vals, [c.get("low") for c in ci], [c.get("high") for c in ci]),
               error_kw=dict(ecolor="black", capsize=3, elinewidth=1))
        _chance_ticks(ax, xs, [(r.get("chance") or {}).get(key) for r in runs], width / 2)
    ax.set_xticks(x, [r["label"] for r in runs], fontsize=7, rotation=15)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("score", fontsize=8)
    ax.set_title(" / ".join(label for _, label in metrics) + " with 95 % bootstrap CIs", fontsize=9)
    _legend_below(fig, [ax])
    return fig, [ax], 1, 1


def metric_cis_figure(runs: Sequence[dict[str, Any]], path: Path, metrics: Sequence[tuple[str, str]]) -> FigureInfo:
    fig, drawn, rows, cols = draw_metric_cis(runs, metrics)
    return _save(fig, path, "retrieval_metrics", rows, cols, drawn)


def draw_correlation(points: Sequence[dict[str, Any]], summary: Sequence[dict[str, Any]]):
    """RAVEL: predicted score (x) against the measured MLLM average (y), one panel per language model; the
    title gives Spearman ρ with its 95 % CI, the number of encoders and the random predictor's 95 % range."""
    llms = list(dict.fromkeys(p["llm"] for p in points))
    fig, axes, rows, cols = _grid(len(llms), width=3.8, height=3.4)
    by_llm = {s["llm"]: s for s in summary}
    drawn = []
    for k, llm in enumerate(llms):
        ax = axes[k // cols][k % cols]
        part = [p for p in points if p["llm"] == llm]
        ax.scatter([p["score"] for p in part], [p["measured"] for p in part], s=18, color="#1f77b4", label="encoder")
        if len(part) <= 12:
            for p in part:
                ax.annotate(str(p["encoder"])[:18], (p["score"], p["measured"]), fontsize=5, xytext=(2, 2),
                            textcoords="offset points")
        s = by_llm.get(llm, {})
        rho, lo, hi, null = s.get("spearman"), s.get("spearman_ci_low"), s.get("spearman_ci_high"), s.get("null_interval")
        title = f"{llm}: n = {len(part)}"
        if rho is not None and math.isfinite(rho):
            title += f", ρ = {rho:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None else " [–]")
        if null:
            title += f"\nrandom predictor 95 %: [{null[0]:.2f}, {null[1]:.2f}]"
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("predicted score", fontsize=8)
        ax.set_ylabel("measured MLLM average", fontsize=8)
        ax.grid(alpha=0.3)
        drawn.append(ax)
    return fig, drawn, rows, cols


def correlation_figure(points: Sequence[dict[str, Any]], summary: Sequence[dict[str, Any]], path: Path) -> FigureInfo:
    fig, drawn, rows, cols = draw_correlation(points, summary)
    return _save(fig, path, "predicted_vs_measured", rows, cols, drawn)


def draw_effective_length(entries: Sequence[dict[str, Any]], metric: str):
    """Score against consumed tokens (log x), one line per model over its consumed-length points (the task's curve
    combined over its strata); a dashed vertical line at each model's effective context and a dotted line at the
    reference minus each point's floor."""
    fig, ax = plt.subplots(layout="constrained", figsize=(6.4, 3.8))
    for i, e in enumerate(entries):
        if not e.get("curve"):
            continue
        color = plt.cm.tab10(i % 10)
        ax.plot([c["tokens"] for c in e["curve"]], [_nan(c["value"]) for c in e["curve"]], marker="o", color=color,
                label=e["label"])
        if e.get("effective_tokens"):
            ax.axvline(e["effective_tokens"], color=color, linestyle="--", linewidth=1)
        if e.get("reference") is not None:   # each point's floor below the reference (the tolerance band)
            ax.plot([c["tokens"] for c in e["curve"]], [e["reference"] - c.get("floor", e["tolerance"] or 0.0)
                                                        for c in e["curve"]], color=color, linestyle=":", linewidth=0.8)
    ax.set_xscale("log", base=2)
    _length_axes(ax, "tokens consumed by the model (relevant document)", metric, "effective length")
    _legend_and_note(fig, [ax], "dashed: effective context; dotted: reference - each point's floor")
    return fig, [ax], 1, 1


def effective_length_figure(entries: Sequence[dict[str, Any]], path: Path, metric: str) -> FigureInfo:
    fig, drawn, rows, cols = draw_effective_length(entries, metric)
    return _save(fig, path, "effective_length", rows, cols, drawn)
