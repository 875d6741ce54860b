"""Rank intervals, tiers and resolution floors on synthetic per-item data with known effects."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mmbench.evaluators.stats.floors import binary_floor, design_floor, observed_floor, sd_floor
from mmbench.evaluators.stats.ranking import competition_ranks, paired_pvalue, rank_models


def _binary_models(rng, n, rates, shared=0.0):
    """Per-item 0/1 hits: models with the given hit rates; `shared` mixes in a common item difficulty."""
    ease = rng.random(n)
    out = []
    for r in rates:
        own = rng.random(n)
        u = shared * ease + (1 - shared) * own
        out.append((u < r).astype(float) if shared == 0 else (stats.rankdata(u) / n <= r).astype(float))
    return np.array(out)


def test_tiers_recover_the_constructed_order_and_ties():
    rng = np.random.default_rng(1)
    n = 3000
    # three groups: two tied at the top, three tied in the middle, one far below
    rates = [0.80, 0.80, 0.60, 0.60, 0.60, 0.30]
    mat = _binary_models(rng, n, rates)
    r = rank_models([f"m{i}" for i in range(6)], [mat], resamples=500, seed=0)
    assert r.tiers == [1, 1, 2, 2, 2, 3]
    # rank intervals: the tied pairs overlap, the groups do not
    assert r.rank_low[0] == r.rank_low[1] == 1 and max(r.rank_high[:2]) <= 2
    assert min(r.rank_low[2:5]) >= 3 and max(r.rank_high[2:5]) <= 5 and r.rank_low[5] == r.rank_high[5] == 6
    again = rank_models([f"m{i}" for i in range(6)], [mat], resamples=500, seed=0)
    assert again.to_dict() == r.to_dict()  # seeded, reproducible


def test_tiers_over_several_tasks_use_the_mean_of_task_means():
    rng = np.random.default_rng(2)
    # model a wins task 1 by a lot, model b wins task 2 by as much: tied on the mean; c loses both
    t1 = np.array([rng.random(2000) < p for p in (0.9, 0.5, 0.3)], dtype=float)
    t2 = np.array([rng.random(500) < p for p in (0.5, 0.9, 0.3)], dtype=float)
    r = rank_models(["a", "b", "c"], [t1, t2], resamples=400, seed=3)
    assert r.tiers[:2] == [1, 1] and r.tiers[2] == 2
    assert r.rank_high[2] == 3 and r.rank_low[2] == 3 and r.rank_low[0] == r.rank_low[1] == 1


def test_aa_comparisons_separate_at_most_five_percent_of_pairs():
    """One model twice, re-seeded: the same per-item hit probabilities drawn again. Over many boards the
    twins land in different tiers in at most 5 % of the pairs."""
    rng = np.random.default_rng(7)
    separated = total = 0
    for board in range(150):
        n = 200
        p = rng.beta(2, 2, size=(4, n))  # 4 distinct models, each with per-item hit probabilities
        draws = [(rng.random(n) < p[k]).astype(float) for k in range(4) for _ in (0, 1)]  # each twice
        r = rank_models([f"m{k}{t}" for k in range(4) for t in (0, 1)], [np.array(draws)], resamples=50, seed=board)
        for k in range(4):
            total += 1
            separated += r.tiers[2 * k] != r.tiers[2 * k + 1]
    assert separated / total <= 0.05, (separated, total)


def test_paired_pvalue_matches_scipy_ttest_rel():
    rng = np.random.default_rng(4)
    mat = rng.normal(size=(2, 80)) + np.array([[0.3], [0.0]])
    assert paired_pvalue([mat], 0, 1) == pytest.approx(stats.ttest_rel(mat[0], mat[1]).pvalue, rel=1e-9)


def test_competition_ranks_match_scipy_min_rank():
    s = np.array([0.5, 0.9, 0.5, 0.1])
    assert competition_ranks(s).tolist() == stats.rankdata(-s, method="min").astype(int).tolist()


def test_ranking_handles_dozens_of_models():
    """40 models on the sample builds' item counts (its time: perf/ranking_scale.py)."""
    rng = np.random.default_rng(5)
    tasks = [(rng.random((40, n)) < rng.random((40, 1))).astype(float) for n in (7200, 144, 500, 300, 1000)]
    r = rank_models([f"m{i}" for i in range(40)], tasks, resamples=1000, seed=0)
    assert len(r.tiers) == 40 and r.models == [f"m{i}" for i in range(40)]
    scores = np.mean([t.mean(axis=1) for t in tasks], axis=0)   # the mean over tasks of each task's mean
    assert np.allclose(r.scores, scores)
    assert r.ranks == stats.rankdata(-scores, method="min").astype(int).tolist()
    assert all(lo <= rank <= hi for lo, rank, hi in zip(r.rank_low, r.ranks, r.rank_high))


def _simulated_power(n, psi, delta, rng, draws=10_000):
    """Share of 10,000 paired samples (differences +1/0/-1 at discordance psi, mean delta) that scipy's
    one-sample t-test rejects at 0.05."""
    probs = [(psi + delta) / 2, (psi - delta) / 2, 1 - psi]
    d = rng.choice([1.0, -1.0, 0.0], p=probs, size=(draws, n))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = stats.ttest_1samp(d, 0.0, axis=1).pvalue
    return float(np.mean(np.nan_to_num(p, nan=1.0) < 0.05))


@pytest.mark.parametrize("n,psi", [(164, 0.5), (50, 0.3), (300, 0.2)])
def test_analytic_floor_agrees_with_simulation_within_one_point(n, psi):
    rng = np.random.default_rng(n)
    mde = binary_floor(n, psi)
    # simulated power crosses 80 % within one point (0.01) of the analytic floor
    assert _simulated_power(n, psi, mde - 0.01, rng) < 0.8 < _simulated_power(n, psi, mde + 0.01, rng)
    assert abs(_simulated_power(n, psi, mde, rng) - 0.8) < 0.02


def test_design_floor_is_about_fifteen_points_at_164_items():
    f = design_floor(164)
    assert 0.14 < f.mde < 0.16 and design_floor(12).mde > design_floor(48).mde > f.mde


def test_sd_floor_matches_statsmodels_power_solver():
    from statsmodels.stats.power import TTestPower

    for n, sd in ((20, 0.3), (100, 0.25), (1000, 0.4)):
        d = TTestPower().solve_power(effect_size=None, nobs=n, alpha=0.05, power=0.8, alternative="two-sided")
        assert sd_floor(n, sd) == pytest.approx(d * sd, rel=1e-4)


def test_observed_floor_uses_discordance_for_binary_and_sd_otherwise():
    a = np.array([1, 1, 0, 0, 1, 0, 1, 1] * 10, dtype=float)
    b = np.array([1, 0, 0, 1, 1, 0, 1, 1] * 10, dtype=float)
    f = observed_floor(a, b)
    assert f.basis == "observed discordance" and f.discordance == 0.25 and f.mde == binary_floor(80, 0.25)
    g = observed_floor(a * 0.5 + 0.1, b * 0.3)
    assert g.basis == "observed sd" and g.mde == pytest.approx(sd_floor(80, float(np.std(a * 0.5 + 0.1 - b * 0.3, ddof=1))))
    assert observed_floor(a, a).mde is None  # two identical runs: no variation to test with


def test_two_sample_floor_matches_statsmodels_and_marks_small_steps():
    from statsmodels.stats.power import TTestIndPower

    from mmbench.evaluators.stats.floors import step_floors, two_sample_floor

    for n1, n2 in ((12, 12), (25, 40), (300, 300)):
        d = TTestIndPower().solve_power(effect_size=None, nobs1=n1, ratio=n2 / n1, alpha=0.05, power=0.8)
        assert two_sample_floor(n1, n2, sd=0.5) == pytest.approx(d * 0.5, rel=1e-4)
    steps = step_floors([12, 12, 12], [0.2, 0.3, 0.95])
    assert [s["below_floor"] for s in steps] == [True, False]  # 0.1 is below the ~0.57 floor at 12 items; 0.65 is not


def test_report_marks_length_steps_below_their_floor():
    """A length curve whose steps are tiny next to the floor of its 10-item points is marked ≈; a large drop is not."""
    from mmbench.reports.report import heatmap_floor_lines, heatmap_numbers, length_curve_numbers
    from report_helpers import grounding_per_query, real_per_query

    pq = real_per_query(seed=1, easy=0.8, hard=0.3, n=10)
    curves = length_curve_numbers(pq, "m", "multi_source_reasoning", "precision_at_1", resamples=50)
    for c in curves:
        assert len(c["steps"]) == len(c["lengths"]) - 1
        for st, v0, v1 in zip(c["steps"], c["values"], c["values"][1:]):
            assert st["step"] == pytest.approx(v1 - v0) and st["below_floor"] == (abs(v1 - v0) < st["floor"])
    assert any(st["below_floor"] for c in curves for st in c["steps"])
    maps = heatmap_numbers(grounding_per_query(seed=2), "m", "precision_at_5")
    lines = heatmap_floor_lines(maps)
    assert lines and "below their resolution floor" in lines[0]


def test_design_floors_are_written_into_the_manifest_at_build_time(vg_tiny):
    """The built pool set states its resolution floors (outside the content hash), one per group a reader compares."""
    import json

    from mmbench.data.poolset import load_poolset
    from mmbench.data.selection import design_groups
    from mmbench.evaluators.stats.floors import design_floor

    manifest = json.loads((vg_tiny / "manifest.json").read_text())
    floors = manifest["resolution_floors"]
    ps = load_poolset(vg_tiny)
    groups = design_groups(ps.pools)
    assert set(floors["groups"]) == set(groups) and floors["alpha"] == 0.05 and floors["power"] == 0.8
    for name, n in groups.items():
        assert floors["groups"][name] == {"n": n, "mde": design_floor(n).mde}
    assert 0 < floors["groups"]["all"]["mde"] < 1
    card = (vg_tiny / "README.md").read_text()
    assert f"differ by at least {floors['groups']['all']['mde']:.3f}" in card   # the dataset card states it too


def test_a_singleton_tier_is_not_said_to_be_tied_with_itself():
    """Issue 34: a model alone in its tier read 'statistically tied with the best model of tier 2' (itself)."""
    from mmbench.evaluators.stats.ranking import describe

    rng = np.random.default_rng(0)
    a = (rng.random(400) < 0.9).astype(float)
    a[[0, 1]] = 1.0
    b = a.copy()
    b[[0, 1]] = 0.0                                         # a near-copy of a, two items worse: tied with it
    c = (rng.random(400) < 0.2).astype(float)               # far below both: alone in tier 2
    r = rank_models(["a", "b", "c"], [np.array([a, b, c])], resamples=300, seed=0)
    assert r.tiers == [1, 1, 2]
    best, mate, alone = (describe(r, i) for i in range(3))
    assert "alone in its tier" in alone and "best model" not in alone
    assert "the best of its tier; statistically tied with it: b" in best
    assert "statistically tied with a, the best model of its tier" in mate
