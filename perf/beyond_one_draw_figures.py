"""The four figures of docs/beyond-one-draw.md, from the reports of that page's worked example.

Usage: python perf/beyond_one_draw_figures.py --data docs/figures/beyond-one-draw --out docs/figures/beyond-one-draw
Reads draws-multi_source_reasoning.json, draws-visual_grounding.json and overfit-bm25.json (copies of what
`mmbench draws` and `mmbench overfit` wrote on the page's runs) from --data and writes settle.png, draws.png,
overfit.png and ranks.png. settle.png and ranks.png are simulations (seeded); the other two plot the runs.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402


def settle_figure(out: Path) -> None:
    """Power of the paired t-test against the number of items for an observed pair (delta 0.04, discordance
    0.2), the stated number of items, and the share of simulated draws that settle at a few sizes."""
    from mmbench.evaluators.stats.floors import t_test_power
    from mmbench.evaluators.stats.settle import smallest_n

    delta, psi = 0.04, 0.2
    sd = np.sqrt(psi - delta ** 2)
    need = smallest_n(delta, sd, 0.05)
    ns = np.unique(np.geomspace(50, 3 * need, 60).astype(int))
    rng = np.random.default_rng(0)
    sim_n = [need // 3, need // 2, need, int(need * 1.5)]
    sim = []
    for n in sim_n:
        d = rng.choice([1.0, -1.0, 0.0], size=(1000, n), p=[(psi + delta) / 2, (psi - delta) / 2, 1 - psi])
        p = stats.ttest_1samp(d, 0.0, axis=1).pvalue
        sim.append(np.mean((p <= 0.05) & (d.mean(axis=1) > 0)))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(ns, [t_test_power(delta, int(n), sd, 0.05) for n in ns], label="power (noncentral t)")
    ax.scatter(sim_n, sim, color="C1", zorder=3, label="settled in 1,000 simulated draws")
    ax.axvline(need, ls=":", color="k")
    ax.axhline(0.8, ls=":", color="grey")
    ax.text(need, 0.05, f" stated: {need} items", fontsize=8)
    ax.set(xscale="log", xlabel="items", ylabel="P(settled)", title="Items to settle a pair (Δ = 0.04, discordance 0.2)")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "settle.png", dpi=110)
    plt.close(fig)


def draws_figure(data: Path, out: Path) -> None:
    """Between-draw sd against within-draw error, per group, for each model and task."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    markers = {"multi_source_reasoning": "o", "visual_grounding": "s"}
    top = 0.0
    for task, marker in markers.items():
        report = json.loads((data / f"draws-{task}.json").read_text())
        for k, (model, rows) in enumerate(sorted(report["models"].items())):
            pts = [(r["within_se"], r["between_sd"]) for r in rows
                   if r["between_sd"] is not None and r["within_se"] and "," not in r["group"]]
            x, y = np.array(pts).T
            top = max(top, x.max(), y.max())
            ax.scatter(x, y, marker=marker, color=f"C{k}", alpha=0.7, label=f"{model}, {task}")
    ax.plot([0, top], [0, top], ls=":", color="k", label="between = within")
    ax.set(xlabel="within-draw error (RMS of the draws' standard errors)", ylabel="between-draw sd (5 draws)",
           title="How much a score moves when the items are drawn again")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "draws.png", dpi=110)
    plt.close(fig)


def overfit_figure(data: Path, out: Path) -> None:
    """Public and fresh-draw scores of one run, and the band of public scores draw variance alone allows."""
    rep = json.loads((data / "overfit-bm25.json").read_text())
    g = rep["gap"]
    fresh = [f["score"] for f in rep["fresh"]]
    fig, ax = plt.subplots(figsize=(6, 2.8))
    ax.axvspan(g["fresh_mean"] + g["expected_low"], g["fresh_mean"] + g["expected_high"], color="C0", alpha=0.15,
               label="public scores draw variance allows")
    ax.scatter(fresh, np.zeros(len(fresh)), color="C0", label="fresh draws")
    ax.scatter([g["public"]], [0], color="C3", marker="D", s=60, label="public draw")
    ax.scatter([min(1.0, g["fresh_mean"] + 2.5 * g["half_width"])], [0], color="C3", marker="x", s=60,
               label="a memorising model (illustration)")
    ax.set(yticks=[], xlabel=rep["metric"], title=f"Fresh-draw test: {rep['model']} on {rep['task']}")
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    ax.set_ylim(-1, 1.5)
    fig.tight_layout()
    fig.savefig(out / "overfit.png", dpi=110)
    plt.close(fig)


def ranks_figure(out: Path) -> None:
    """A simulated benchmark: 5 models on 6 tasks; per-task simultaneous rank sets and the new-task interval."""
    from mmbench.evaluators.stats.rank_sets import new_task_rank_interval, rank_sets

    rng = np.random.default_rng(4)
    models = ["m1", "m2", "m3", "m4", "m5"]
    base = np.array([0.60, 0.57, 0.50, 0.49, 0.40])
    tasks = []
    for _ in range(6):
        p = np.clip(base + rng.normal(0, 0.04, 5), 0.05, 0.95)
        tasks.append((rng.random((5, 200)) < p[:, None]).astype(float))
    res = rank_sets(models, tasks, alpha=0.05, resamples=1000)
    pred = new_task_rank_interval(res.ranks, models, alpha=0.3)
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for j in range(5):
        for t in range(6):
            x = j + (t - 2.5) * 0.08
            ax.plot([x, x], [res.low[t][j], res.high[t][j]], color=f"C{t}", lw=2, alpha=0.8)
            ax.scatter([x], [res.ranks[t][j]], color=f"C{t}", s=12)
        ax.plot([j + 0.32, j + 0.32], [pred.low[j], pred.high[j]], color="k", lw=4)
    ax.set(xticks=range(5), xticklabels=models, ylabel="rank (1 = best)", ylim=(5.5, 0.5),
           title=f"95 % simultaneous rank sets, 6 simulated tasks (colours)\nblack: rank on a new task ({pred.coverage:.0%} interval)")
    fig.tight_layout()
    fig.savefig(out / "ranks.png", dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", type=Path, default=Path("docs/figures/beyond-one-draw"))
    ap.add_argument("--out", type=Path, default=Path("docs/figures/beyond-one-draw"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    settle_figure(args.out)
    draws_figure(args.data, args.out)
    overfit_figure(args.data, args.out)
    ranks_figure(args.out)
    print(f"wrote settle.png, draws.png, overfit.png and ranks.png to {args.out}")


if __name__ == "__main__":
    main()
