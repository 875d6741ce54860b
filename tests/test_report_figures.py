"""Figures of `report`, `compare` and `ravel correlate`: the numbers behind them and their layout.

Numbers are checked against independent computations (scipy's bootstrap, exact chance metrics);
layout checks open the matplotlib figure before it is saved: legends lie outside every axes,
Easy and Hard differ in colour and in dash, error bars span the CIs the JSON carries.
"""
from __future__ import annotations

import json

import matplotlib
import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scipy import stats

from mmbench.evaluators.metrics import chance_metrics
from mmbench.reports import figures, write_comparison, write_report
from mmbench.reports.report import easy_hard_numbers, length_curve_numbers, robustness_numbers
from mmbench.evaluators.stats.correlation import fisher_interval, spearman_ci, spearman_null_interval
from mmbench.results.store import load_results

from report_helpers import grounding_per_query, real_per_query, write_run


def _scipy_ci(values: np.ndarray, resamples: int, seed: int) -> tuple[float, float]:
    ref = stats.bootstrap((values,), np.mean, n_resamples=resamples, method="percentile", confidence_level=0.95,
                          vectorized=True, rng=np.random.default_rng(seed))
    return ref.confidence_interval.low, ref.confidence_interval.high


def test_length_curve_points_carry_seeded_bootstrap_cis_and_chance():
    pq = real_per_query(0, n=12)
    curves = length_curve_numbers(pq, "m", "multi_source_reasoning", "precision_at_1", resamples=500, seed=3)
    c = [c for c in curves if c["group"].endswith("hotpotqa") and c["difficulty"] == "hard"][0]
    cell = pq[(pq.dataset == "hotpotqa") & (pq.difficulty == "hard") & (pq.length_bin == "16k")]
    i = c["lengths"].index("16k")
    low, high = _scipy_ci(cell["precision_at_1"].to_numpy(float), 500, 3)
    assert c["values"][i] == pytest.approx(cell["precision_at_1"].mean())
    assert (c["ci_low"][i], c["ci_high"][i]) == pytest.approx((low, high), abs=1e-12)
    pool = len(cell["ranked_ids"].iloc[0])
    assert c["chance"][i] == pytest.approx(chance_metrics(pool, 1)["precision_at_1"]) == pytest.approx(1 / pool)
    again = length_curve_numbers(pq, "m", "multi_source_reasoning", "precision_at_1", resamples=500, seed=3)
    assert again == curves  # seeded: the same numbers every time


def test_easy_hard_and_modality_numbers_carry_cis_and_chance():
    pq = real_per_query(1, n=12)
    rows = easy_hard_numbers(pq, "m", "msr", "mrr", resamples=400, seed=1)
    r = rows[0]
    easy = pq[(pq.dataset == "hotpotqa") & (pq.difficulty == "easy")]["mrr"].to_numpy(float)
    assert r["easy_ci"] == pytest.approx(list(_scipy_ci(easy, 400, 1)), abs=1e-12)
    assert r["easy_ci"][0] <= r["easy"] <= r["easy_ci"][1]
    assert r["chance_easy"] == pytest.approx(chance_metrics(len(pq["ranked_ids"].iloc[0]), 1)["mrr"])
    g = grounding_per_query(0)
    rob = robustness_numbers(g, "m", "precision_at_1", {"text", "image"}, resamples=300, seed=2)
    for entry in rob:
        rows_m = g[(g.anchor_kind == entry["anchor_kind"]) & (g.background_modality == "mixed")]["precision_at_1"]
        assert entry["ci"]["mixed"] == pytest.approx(list(_scipy_ci(rows_m.to_numpy(float), 300, 2)), abs=1e-12)
        assert entry["chance"]["text"] == pytest.approx(1 / len(g["ranked_ids"].iloc[0]))


def _legend_clear_of_axes(fig, axes) -> None:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = fig.legends + [ax.get_legend() for ax in axes if ax.get_legend() is not None]
    assert legends, "the figure should have a legend"
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), f"legend covers panel {ax.get_title()!r}"


def test_length_curves_easy_and_hard_differ_in_colour_and_dash_and_legend_is_outside():
    pq = real_per_query(0)
    curves = length_curve_numbers(pq, "m", "msr", "precision_at_1", resamples=200)
    fig, axes, _, _ = figures.draw_length_curves(curves, "precision_at_1")
    try:
        lines = {l.get_label(): l for l in axes[0].get_lines()}
        easy, hard = lines["m (Easy)"], lines["m (Hard)"]
        assert matplotlib.colors.to_hex(easy.get_color()) != matplotlib.colors.to_hex(hard.get_color())
        assert easy.get_linestyle() != hard.get_linestyle() and easy.get_marker() != hard.get_marker()
        assert figures.CHANCE_LABEL in lines  # the chance line is drawn
        assert len(axes[0].collections) == 2  # one CI band per curve
        _legend_clear_of_axes(fig, axes)
    finally:
        matplotlib.pyplot.close(fig)


def test_easy_hard_bars_have_error_bars_spanning_the_cis():
    rows = easy_hard_numbers(real_per_query(0, n=12), "m", "msr", "precision_at_1", resamples=200)
    fig, axes, _, _ = figures.draw_easy_hard(rows, "precision_at_1")
    try:
        ax = axes[0]
        caps = [c for c in ax.containers if isinstance(c, matplotlib.container.BarContainer)]
        easy_bar = caps[0].errorbar
        segs = easy_bar.lines[2][0].get_segments()
        (_, lo), (_, hi) = segs[0]
        assert (lo, hi) == pytest.approx(tuple(rows[0]["easy_ci"]))
        _legend_clear_of_axes(fig, axes)
    finally:
        matplotlib.pyplot.close(fig)


def test_depth_coefficients_figure_marks_an_unreliable_fit():
    result = {"depth_levels": [0.0, 0.5, 1.0], "fit_status": "unreliable",
              "estimates": [{"term": "Intercept", "estimate": 0.5, "ci_low": 0.4, "ci_high": 0.6},
                            {"term": "depth=0.5", "estimate": -0.2, "ci_low": -0.3, "ci_high": -0.1},
                            {"term": "depth=1", "estimate": 0.05, "ci_low": -0.05, "ci_high": 0.15}]}
    fig, axes, _, _ = figures.draw_depth_coefficients([{"label": "m", "rows": "all", "result": result}], "precision_at_1")
    try:
        assert axes[0].get_title() == "m | all (UNRELIABLE fit)"
        ys = [y for line in axes[0].get_lines() for y in line.get_ydata()]
        assert -0.2 in ys and 0.05 in ys and 0.0 in ys  # the reference depth sits at 0
        _legend_clear_of_axes(fig, axes)
    finally:
        matplotlib.pyplot.close(fig)


def test_report_draws_depth_coefficients_and_flickr_metric_figures(tmp_path):
    vg = write_run(tmp_path / "vg", grounding_per_query(0, needles=4), "m-a")
    fl = real_per_query(2).drop(columns=["length_bin", "difficulty", "dataset"])
    flickr = [write_run(tmp_path / f"fl{i}", fl if i == 0 else real_per_query(3).drop(columns=["length_bin", "difficulty",
                                                                                                "dataset"]),
                        f"clip-{i}", task="flickr_hard_negatives", content_hash="hash-f") for i in range(2)]
    data, md = write_report([load_results(p) for p in (vg, *flickr)], tmp_path / "rep", ci_resamples=200)
    tasks = {t["task"]: t for t in data["tasks"]}
    assert tasks["visual_grounding"]["figures"]["depth_coefficients"]["panels"][0].startswith("m-a | all")
    assert "retrieval_metrics" not in tasks["visual_grounding"]["figures"]
    fig = tasks["flickr_hard_negatives"]["figures"]["retrieval_metrics"]
    assert fig["panels"] == ["R@1 / R@3 / MRR with 95 % bootstrap CIs"]
    for t in tasks.values():
        for info in t["figures"].values():
            assert info["path"] in md
            with Image.open(tmp_path / "rep" / info["path"]) as im:
                assert im.format == "PNG" and im.size[0] > 200


def test_compare_writes_a_forest_plot_of_the_paired_differences(tmp_path):
    paths = [write_run(tmp_path / f"r{i}", grounding_per_query(i, skill=0.4 + 0.2 * i, needles=2), f"m{i}")
             for i in range(3)]
    data, md = write_comparison([load_results(p) for p in paths], tmp_path / "cmp", resamples=300, ci_resamples=100)
    info = data["figures"]["paired_differences"]
    assert info["path"] == "figures/paired_differences.png" and info["path"] in md
    assert (tmp_path / "cmp" / info["path"]).stat().st_size > 1000
    assert "paired_differences" in json.loads((tmp_path / "cmp" / "compare.json").read_text())["figures"]
    rows = [{"a": p["a"], "b": p["b"], "mean_diff": p["ttest"]["mean_diff"], "ci_low": p["ttest"]["ci_low"],
             "ci_high": p["ttest"]["ci_high"]} for p in data["pairs"]]
    fig, axes, _, _ = figures.draw_forest(rows, "precision_at_1")
    try:
        xs = axes[0].get_lines()[0].get_xdata()
        assert list(xs) == pytest.approx([p["ttest"]["mean_diff"] for p in data["pairs"]])
        _legend_clear_of_axes(fig, axes)
    finally:
        matplotlib.pyplot.close(fig)
    _, md_only = write_comparison([load_results(p) for p in paths], None, resamples=50, ci_resamples=50)
    assert "paired_differences" not in md_only  # printing only draws nothing


def test_spearman_interval_and_random_predictor_range():
    # Fisher z with the Bonett-Wright SE, by hand
    rho, n = 0.6, 10
    se = np.sqrt((1 + rho ** 2 / 2) / (n - 3))
    assert fisher_interval(rho, n) == pytest.approx((np.tanh(np.arctanh(rho) - 1.959964 * se),
                                                      np.tanh(np.arctanh(rho) + 1.959964 * se)), abs=1e-6)
    assert fisher_interval(0.9, 3) == (None, None)
    ci = spearman_ci([1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5])
    assert ci.estimate == pytest.approx(stats.spearmanr([1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5]).statistic)
    assert ci.low < 0 < ci.estimate < ci.high  # six encoders: ρ = 0.83 is still compatible with no relation
    low, high = spearman_null_interval(6)
    # exact: the share of the 720 rankings of 6 items with ρ ≥ high is at most 2.5 %
    perms = np.array(list(__import__("itertools").permutations(range(6))))
    rhos = np.array([stats.spearmanr(range(6), p).statistic for p in perms])
    assert np.mean(rhos > high + 1e-9) <= 0.025 < np.mean(rhos >= high - 1e-9)
    assert low == pytest.approx(-high) and high > 0.71  # a random predictor's ρ = 0.71 is inside its 95 % range


def test_ravel_correlate_draws_predicted_vs_measured(tmp_path, capsys):
    from mmbench.cli import main
    from mmbench.running.ravel_inputs import load_ground_truth

    gt = load_ground_truth()
    part = gt[gt["llm"].isin(["Qwen3-1.7B", "SmolLM2-1.7B-Instruct"])].groupby("llm").head(6)
    rng = np.random.default_rng(0)
    scores = pd.DataFrame({"encoder": part["encoder"], "llm": part["llm"], "score": rng.random(len(part))})
    scores.to_csv(tmp_path / "scores.csv", index=False)
    png = tmp_path / "corr.png"
    assert main(["ravel", "correlate", "--scores", str(tmp_path / "scores.csv"), "--figure", str(png)]) == 0
    err = capsys.readouterr().err
    assert "Qwen3-1.7B: n = 6, ρ = " in err and "SmolLM2-1.7B: n = 6" in err
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size[0] > 400
