"""Verdicts (better / worse / inconclusive) and the items that would settle an inconclusive pair."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mmbench.evaluators.stats.settle import items_to_settle, smallest_n
from mmbench.evaluators.stats.verdict import verdict_of


def _paired(n_a_only: int, n_b_only: int, n_same: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.r_[np.ones(n_a_only), np.zeros(n_b_only), np.ones(n_same // 2), np.zeros(n_same - n_same // 2)]
    b = np.r_[np.zeros(n_a_only), np.ones(n_b_only), np.ones(n_same // 2), np.zeros(n_same - n_same // 2)]
    return a, b


def test_verdict_reads_the_adjusted_p_and_the_sign():
    assert verdict_of(0.1, 0.01, 0.05) == "better"
    assert verdict_of(-0.1, 0.01, 0.05) == "worse"
    assert verdict_of(0.1, 0.2, 0.05) == "inconclusive"
    assert verdict_of(0.1, None, 0.05) == "inconclusive"
    assert verdict_of(0.1, 0.05, 0.05) == "better"  # as correct_pvalues: reject at adjusted p <= alpha


def test_smallest_n_is_the_first_n_with_the_power():
    from mmbench.evaluators.stats.floors import t_test_power

    n = smallest_n(0.1, 0.5, 0.05)
    assert t_test_power(0.1, n, 0.5, 0.05) >= 0.8 > t_test_power(0.1, n - 1, 0.5, 0.05)
    # the normal approximation (z_{1-a/2} + z_{power})^2 sd^2 / delta^2 is within a couple of items
    approx = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) ** 2 * 0.25 / 0.01
    assert abs(n - approx) < 4
    assert smallest_n(0.0, 0.5, 0.05) is None


def test_items_to_settle_says_whether_the_task_has_them():
    a, b = _paired(12, 8, 80)  # delta 0.04, discordance 0.2
    res = items_to_settle(a, b, level=0.05, available=500, settle_at=0.04)
    assert res.basis == "observed discordance" and res.discordance == pytest.approx(0.2)
    assert res.planning_diff == 0.04 and res.planning_basis == "--settle-at" and res.discordant == 20
    assert res.n_needed > 100 and res.n_more == res.n_needed - 100
    assert res.task_has_enough is (res.n_needed <= 500)
    assert items_to_settle(a, b, level=0.05, available=10 ** 6, settle_at=0.04).task_has_enough is True
    # by default the planning difference is the pair's resolution floor, not the observed difference
    from mmbench.evaluators.stats.floors import observed_floor

    floor = observed_floor(a, b, alpha=0.05).mde
    default = items_to_settle(a, b, level=0.05 / 3, floor_alpha=0.05)
    assert default.planning_diff == pytest.approx(floor) and default.planning_basis == "resolution floor"
    assert default.n_needed >= 100   # a stricter level than the floor's needs at least the items it has


def _settled_share(psi, planning_of, rng, trials=300, n0=150, replicates=20, level=0.05):
    """Truth apart from the estimate: true discordance `psi`, true difference = the stated planning difference.
    Observe n0 items, state the items to settle, then run `replicates` new experiments of that many items from
    the truth and count the paired t-tests that reject in the true direction."""
    settled = []
    for _ in range(trials):
        counts = rng.multinomial(n0, [(psi + 0.04) / 2, (psi - 0.04) / 2, 1 - psi])
        a, b = _paired(*counts)
        res = planning_of(a, b, level)
        n, d_true = res.n_needed, res.planning_diff
        p = [(psi + d_true) / 2, (psi - d_true) / 2, 1 - psi]
        c = rng.multinomial(n, p, size=replicates)
        mean = (c[:, 0] - c[:, 1]) / n
        var = (c[:, 0] + c[:, 1]) / n - mean ** 2
        t = mean / np.sqrt(var * n / (n - 1) / n)
        settled += list(t > stats.t.ppf(1 - level / 2, n - 1))
    return float(np.mean(settled))


@pytest.mark.parametrize("psi", [0.2, 0.35])
def test_the_stated_items_settle_75_to_85_percent_of_pairs_at_the_planning_difference(psi):
    rng = np.random.default_rng(44)
    at_d = _settled_share(psi, lambda a, b, lv: items_to_settle(a, b, level=lv, settle_at=0.05), rng)
    at_floor = _settled_share(psi, lambda a, b, lv: items_to_settle(a, b, level=lv, floor_alpha=3 * lv), rng,
                              level=0.05 / 3)
    assert 0.75 <= at_d <= 0.85 and 0.75 <= at_floor <= 0.85, (at_d, at_floor)


def test_nothing_is_stated_for_two_models_at_chance_or_too_few_discordant_items():
    rng = np.random.default_rng(5)
    a, b = (rng.random(500) < 0.04).astype(float), (rng.random(500) < 0.04).astype(float)   # 25 candidates, P@1
    res = items_to_settle(a, b, level=0.05, chance=0.04)
    assert res.n_needed is None and res.reason == "both models at chance"
    a, b = _paired(3, 2, 95)
    res = items_to_settle(a, b, level=0.05, settle_at=0.02)
    assert res.n_needed is None and "fewer than 10 items" in res.reason
    equal = items_to_settle(*_paired(15, 15, 70), level=0.05)   # two equal models: planned at the floor, finite
    assert equal.planning_diff > 0 and equal.n_needed is not None and equal.n_needed < 1000


def test_continuous_scores_use_the_sd_of_the_differences():
    rng = np.random.default_rng(3)
    a = rng.random(60)
    b = a - 0.02 + rng.normal(0, 0.2, 60)
    res = items_to_settle(a, b, level=0.05)
    assert res.basis == "observed sd" and res.sd == pytest.approx(np.std(a - b, ddof=1))


def test_compare_states_a_verdict_for_every_pair(tmp_path):
    from mmbench.reports.compare import compare_runs, comparison_markdown
    from mmbench.results.store import load_results
    from report_helpers import grounding_per_query, write_run

    runs = [load_results(write_run(tmp_path / name, grounding_per_query(seed=s, skill=skill), name))
            for name, s, skill in (("strong", 1, 0.95), ("weak", 2, 0.25), ("weak2", 3, 0.27))]
    data = compare_runs(runs, resamples=200, ci_resamples=100)
    verdicts = {(p["a"], p["b"]): p["verdict"]["verdict"] for p in data["pairs"]}
    assert verdicts[("strong", "weak")] == "better" and verdicts[("strong", "weak2")] == "better"
    assert verdicts[("weak", "weak2")] == "inconclusive"
    close = next(p for p in data["pairs"] if p["b"] == "weak2" and p["a"] == "weak")
    assert close["settle"]["level"] == pytest.approx(0.05 / 3)
    text = comparison_markdown(data)
    assert "## Verdicts" in text and "| strong | better | weak |" in text
    assert "in all (" in text or "– (" in text
    assert "resolution floor (--settle-at D to choose)" in text
