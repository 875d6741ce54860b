"""Floors on each metric's own scale (issue 34): P@5 heatmap steps, metrics that do not vary."""
import numpy as np
import pandas as pd
import pytest

from mmbench.evaluators.metrics import item_ceiling, metric_names, metric_range
from mmbench.reports.report import heatmap_numbers
from mmbench.evaluators.stats import paired_ttest, rank_models
from mmbench.evaluators.stats.floors import design_floor, metric_sd, observed_floor, sd_floor, two_sample_floor


def test_p_at_5_ceiling_and_bound():
    assert item_ceiling("precision_at_5", 1) == pytest.approx(0.2)
    assert item_ceiling("precision_at_3", 5) == 1.0 and item_ceiling("mrr", 1) == 1.0
    assert metric_range("precision_at_5", [["a"], ["b"]]) == pytest.approx(0.2)
    # scores that do not vary get the bound c/2 (0.1 for P@5), never 0.5
    assert metric_sd(np.full(75, 0.2), 0.2) == (pytest.approx(0.1), "bound")
    # the floor of a step between two 75-item cells of P@5 is at most 0.046 (issue: it was 0.230 with sd 0.5)
    assert two_sample_floor(75, 75, 0.1) == pytest.approx(0.046, abs=0.001)
    assert design_floor(164, ceiling=0.2).mde == pytest.approx(0.2 * design_floor(164).mde)


def test_constant_metric_is_safe():
    """P@5 is 0.2 on every item: np.std gives ~1e-17, which used to send brentq an empty bracket."""
    x = np.array([0.6, 0.4, 0.2] * 50)
    y = x + np.array([0.6000000000000001 - 0.6, 0.0, 0.0] * 50)   # equal up to float noise
    assert np.std(x - y, ddof=1) > 0    # the noise the tolerance is for
    f = observed_floor(x, y)
    assert f.mde is None and f.sd == 0.0
    assert sd_floor(150, 1e-17) is None or sd_floor(150, 1e-17) > 0
    assert two_sample_floor(20, 20, 1e-17) == pytest.approx(two_sample_floor(20, 20, 1.0) * 1e-17, rel=1e-3)
    t = paired_ttest(x, y)
    assert t.p_value == 1.0 and t.t == 0.0
    r = rank_models(["a", "b"], [np.array([x, y])], resamples=200, seed=0)
    assert r.tiers == [1, 1]


def _p5_cells(rng, n, p_hit):
    return np.where(rng.random(n) < p_hit, 0.2, 0.0)


def test_heatmap_p5_step_of_twice_the_floor_is_marked_in_80_percent():
    """Simulated P@5 heatmap (one relevant candidate, 75 items per cell): a true step of twice the floor the
    report computes is marked as significant (not below its floor) in at least 80 % of draws."""
    rng = np.random.default_rng(34)
    n, depths, lengths = 75, [0.0], ["256", "512"]
    base = 0.5
    # the floor the report gives at this design, from a no-step draw
    rows = lambda a, b: pd.DataFrame({  # noqa: E731
        "depth": 0.0, "length_bin": ["256"] * n + ["512"] * n, "relevant_ids": [["r"]] * (2 * n),
        "precision_at_5": np.concatenate([a, b])})
    h0 = heatmap_numbers(rows(_p5_cells(rng, n, base), _p5_cells(rng, n, base)), "m", "precision_at_5")[0]
    floor = h0["length_steps"][0][0]["floor"]
    assert floor < 0.05
    hit_drop = 2 * floor / 0.2          # a step of twice the floor in P@5 is that change in the hit rate
    marked = 0
    for _ in range(200):
        h = heatmap_numbers(rows(_p5_cells(rng, n, base), _p5_cells(rng, n, base - hit_drop)), "m", "precision_at_5")[0]
        marked += not h["length_steps"][0][0]["below_floor"]
    assert marked / 200 >= 0.8, marked
    assert h["lengths"] == lengths and h["depths"] == depths


@pytest.mark.parametrize("metric", metric_names())
def test_every_metric_has_a_floor_or_none(metric):
    scores = np.full(40, item_ceiling(metric, 1))
    sd, basis = metric_sd(scores, metric_range(metric, [["r"]] * 40))
    assert basis == "bound" and two_sample_floor(20, 20, sd) > 0
