"""Matplotlib figures (Agg backend) drawn from the report's numbers, so figures and JSON agree.

Every function writes one PNG and returns a `FigureInfo` whose `panels` are the titles of the
axes actually drawn (colour bars excluded), in reading order.
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
from mmbench.media import atomic_write_bytes  # noqa: E402

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


def length_curves_figure(curves: Sequence[dict[str, Any]], path: Path, metric: str) -> FigureInfo:
    """One panel per task/dataset group: metric against length bin, a line per model and difficulty."""
    groups = list(dict.fromkeys(c["group"] for c in curves))
    cols = min(3, len(groups))
    rows = math.ceil(len(groups) / cols)
    fig, axes = plt.subplots(rows, cols, squeeze=False, layout="constrained", figsize=(4.2 * cols, 3.2 * rows))
    models = list(dict.fromkeys(c["label"] for c in curves))
    colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(models)}
    styles = {"easy": "-", "hard": "--", "all": "-"}
    drawn = []
    for k, group in enumerate(groups):
        ax = axes[k // cols][k % cols]
        for c in (c for c in curves if c["group"] == group):
            x = np.arange(len(c["lengths"]))
            ax.plot(x, [np.nan if v is None else v for v in c["values"]], marker="o", color=colors[c["label"]],
                    linestyle=styles.get(c["difficulty"], ":"),
                    label=c["label"] if c["difficulty"] == "all" else f"{c['label']} ({c['difficulty']})")
            ax.set_xticks(x, c["lengths"], fontsize=7)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("context length bin", fontsize=8)
        ax.set_ylabel(metric, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
        ax.set_title(group, fontsize=9)
        drawn.append(ax)
    for k in range(len(groups), rows * cols):
        axes[k // cols][k % cols].set_axis_off()
    return _save(fig, path, "length_curves", rows, cols, drawn)


def easy_hard_figure(rows_data: Sequence[dict[str, Any]], path: Path, metric: str) -> FigureInfo:
    """One panel per task/dataset group: Easy and Hard bars per model."""
    groups = list(dict.fromkeys(r["group"] for r in rows_data))
    cols = min(3, len(groups))
    nrows = math.ceil(len(groups) / cols)
    fig, axes = plt.subplots(nrows, cols, squeeze=False, layout="constrained", figsize=(4.2 * cols, 3.2 * nrows))
    drawn = []
    for k, group in enumerate(groups):
        ax = axes[k // cols][k % cols]
        part = [r for r in rows_data if r["group"] == group]
        x = np.arange(len(part))
        easy = [np.nan if r["easy"] is None else r["easy"] for r in part]
        hard = [np.nan if r["hard"] is None else r["hard"] for r in part]
        ax.bar(x - 0.2, easy, width=0.4, label="Easy", color="#4c72b0")
        ax.bar(x + 0.2, hard, width=0.4, label="Hard", color="#dd8452")
        ax.set_xticks(x, [r["label"] for r in part], fontsize=7, rotation=20)
        ax.set_ylim(0, 1.02)
        ax.set_ylabel(metric, fontsize=8)
        ax.legend(fontsize=7)
        ax.set_title(group, fontsize=9)
        drawn.append(ax)
    for k in range(len(groups), nrows * cols):
        axes[k // cols][k % cols].set_axis_off()
    return _save(fig, path, "easy_vs_hard", nrows, cols, drawn)


def robustness_figure(rows_data: Sequence[dict[str, Any]], path: Path, metric: str) -> FigureInfo:
    """One panel: metric per background modality (text / mixed / image), a bar group per model."""
    fig, ax = plt.subplots(layout="constrained", figsize=(1.5 + 1.4 * len(rows_data), 3.2))
    mods = ("text", "mixed", "image")
    x = np.arange(len(rows_data))
    for i, mod in enumerate(mods):
        ax.bar(x + (i - 1) * 0.27, [r["scores"][mod] for r in rows_data], width=0.27, label=f"{mod} background")
    ax.set_xticks(x, [f"{r['label']}\n({r['kind']})" for r in rows_data], fontsize=7)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel(metric, fontsize=8)
    ax.legend(fontsize=7)
    ax.set_title("modality robustness", fontsize=9)
    return _save(fig, path, "modality_robustness", 1, 1, [ax])
