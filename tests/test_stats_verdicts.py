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
    res = items_to_settle(a, b, level=0.05, available=500)
    assert res.basis == "observed discordance" and res.discordance == pytest.approx(0.2)
    assert res.n_needed > 100 and res.n_more == res.n_needed - 100
    assert res.task_has_enough is (res.n_needed <= 500)
    assert items_to_settle(a, b, level=0.05, available=10 ** 6).task_has_enough is True


@pytest.mark.parametrize("n_a_only,n_b_only,n_same,level", [(12, 8, 80, 0.05), (30, 18, 152, 0.05 / 3),
                                                           (9, 5, 36, 0.05)])
def test_adding_the_stated_items_settles_the_pair_in_about_80_percent_of_draws(n_a_only, n_b_only, n_same, level):
    """Simulation with a known answer: the truth is the observed effect and discordance; draw the stated number of
    new items from it, add them to the observed ones, and test all of them at the stated level. The pair is
    settled (rejected, in the observed direction) in 75–85 % of 2,000 draws."""
    a, b = _paired(n_a_only, n_b_only, n_same)
    n = a.size
    res = items_to_settle(a, b, level=level)
    assert res.n_more > 0
    rng = np.random.default_rng(7)
    p_plus, p_minus = n_a_only / n, n_b_only / n
    d_old = a - b
    settled = 0
    for _ in range(2000):
        new = rng.choice([1.0, -1.0, 0.0], size=res.n_more, p=[p_plus, p_minus, 1 - p_plus - p_minus])
        d = np.r_[d_old, new]
        t = stats.ttest_1samp(d, 0.0)
        settled += bool(t.pvalue <= level and np.mean(d) > 0)
    assert 0.75 <= settled / 2000 <= 0.85


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
    assert "in all (" in text or "no observed difference" in text
