"""Paired t-test, bootstrap, McNemar, Wilcoxon and p-value correction agree with scipy / statsmodels."""
import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.multitest import multipletests

from mmbench.evaluators.stats import (bootstrap_ci, bootstrap_mean_diff_ci, cohens_dz, contingency_table,
                                      correct_pvalues, mcnemar, mcnemar_table, paired_ttest, wilcoxon_signed_rank)


@pytest.fixture
def paired():
    rng = np.random.default_rng(7)
    a = rng.binomial(1, 0.6, 300).astype(float)
    b = np.where(rng.random(300) < 0.8, a, rng.binomial(1, 0.4, 300)).astype(float)
    return a, b


def test_paired_ttest_matches_scipy(paired):
    a, b = paired
    res = paired_ttest(a, b, resamples=2000, seed=3)
    ref = stats.ttest_rel(a, b)
    assert res.t == pytest.approx(ref.statistic)
    assert res.p_value == pytest.approx(ref.pvalue)
    assert res.df == len(a) - 1
    d = a - b
    assert res.cohens_dz == pytest.approx(d.mean() / d.std(ddof=1))
    assert res.cohens_dz == pytest.approx(ref.statistic / np.sqrt(len(a)))
    assert "paired differences" in res.effect_size
    boot = stats.bootstrap((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), paired=True, vectorized=True,
                           n_resamples=2000, method="percentile", rng=np.random.default_rng(3))
    assert res.ci_low == pytest.approx(boot.confidence_interval.low)
    assert res.ci_high == pytest.approx(boot.confidence_interval.high)
    assert set(res.to_dict()) >= {"t", "p_value", "ci_low", "ci_high", "cohens_dz"}


def test_paired_ttest_identical_samples():
    a = [1.0, 0.0, 1.0, 1.0]
    res = paired_ttest(a, a, resamples=100)
    assert res.p_value == 1.0 and res.t == 0.0 and res.cohens_dz == 0.0 and res.note
    with pytest.raises(ValueError):
        paired_ttest([1.0, 0.0], [1.0])


def test_bootstrap_ci_matches_scipy_percentile():
    x = np.random.default_rng(0).random(157)
    for resamples, seed in ((1000, 0), (10_000, 5)):
        res = bootstrap_ci(x, resamples=resamples, seed=seed)
        ref = stats.bootstrap((x,), np.mean, n_resamples=resamples, method="percentile", rng=np.random.default_rng(seed))
        assert (res.low, res.high) == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high))
        assert res.estimate == pytest.approx(x.mean())
    # seeded: same seed, same interval; another seed, another interval
    assert bootstrap_ci(x, seed=1).to_dict() == bootstrap_ci(x, seed=1).to_dict()
    assert bootstrap_ci(x, seed=1).low != bootstrap_ci(x, seed=2).low


def test_bootstrap_mean_diff_is_paired():
    rng = np.random.default_rng(1)
    base = rng.random(200)
    res = bootstrap_mean_diff_ci(base + 0.01, base, resamples=500)
    # perfectly paired constant shift: every resample has mean diff 0.01
    assert res.low == pytest.approx(0.01) and res.high == pytest.approx(0.01)


def test_mcnemar_seed_example():
    """Seed 003, Appendix E: 716 both right, 88 GE2 only, 73 GPT-4.1 only (1,000 queries)."""
    table = [[716, 88], [73, 123]]
    res = mcnemar_table(table)
    ref = sm_mcnemar(np.array(table), exact=False, correction=True)
    assert res.method == "chi2_continuity_corrected"
    assert res.statistic == pytest.approx(ref.statistic) == pytest.approx((88 - 73 - 1) ** 2 / 161)
    assert res.p_value == pytest.approx(ref.pvalue)
    assert res.p_value > 0.25  # the seed: GE2 vs GPT-4.1 not significant, all p > 0.25
    # the numbers the README quotes for this table
    assert round(res.statistic, 3) == 1.217 and round(res.p_value, 3) == 0.270 and res.df == 1
    assert res.table == table and res.n == 1000


def test_mcnemar_exact_for_small_discordant_counts():
    a = np.array([1] * 30 + [1] * 9 + [0] * 3 + [0] * 8)
    b = np.array([1] * 30 + [0] * 9 + [1] * 3 + [0] * 8)
    res = mcnemar(a, b)
    assert res.table == [[30, 9], [3, 8]]
    ref = sm_mcnemar(np.array(res.table), exact=True)
    assert res.method == "exact_binomial"
    assert res.statistic == ref.statistic
    assert res.p_value == pytest.approx(ref.pvalue)
    assert res.p_value == pytest.approx(stats.binomtest(3, 12, 0.5).pvalue)
    # b + c = 25 switches to chi2
    assert mcnemar_table([[10, 15], [10, 5]]).method == "chi2_continuity_corrected"
    assert mcnemar_table([[10, 14], [10, 5]]).method == "exact_binomial"
    assert mcnemar_table([[10, 0], [0, 5]]).p_value == 1.0
    with pytest.raises(ValueError):
        contingency_table([0.5, 1.0], [1.0, 0.0])


def test_wilcoxon_matches_scipy():
    rng = np.random.default_rng(4)
    # reciprocal ranks: many ties and zeros -> normal approximation
    a = 1.0 / rng.integers(1, 10, 400)
    b = 1.0 / rng.integers(1, 12, 400)
    res = wilcoxon_signed_rank(a, b)
    ref = stats.wilcoxon(a, b, zero_method="wilcox")
    assert res.statistic == pytest.approx(ref.statistic) and res.p_value == pytest.approx(ref.pvalue)
    assert res.method == "normal_approximation"
    assert res.n_nonzero == int(np.sum(a != b))
    assert min(res.w_plus, res.w_minus) == pytest.approx(ref.statistic)
    # small, no ties: exact
    x, y = rng.random(20), rng.random(20)
    res = wilcoxon_signed_rank(x, y)
    ref = stats.wilcoxon(x, y)
    assert res.method == "exact" and res.p_value == pytest.approx(ref.pvalue)
    assert wilcoxon_signed_rank(x, x).p_value == 1.0


@pytest.mark.parametrize("method", ["bonferroni", "holm"])
def test_correction_matches_statsmodels(method):
    p = [0.01, 0.04, 0.03, 0.2, 0.0001, 0.049]
    res = correct_pvalues(p, method, alpha=0.05)
    reject, adj, _, _ = multipletests(p, alpha=0.05, method=method)
    assert res.adjusted == pytest.approx(list(adj))
    assert res.reject == list(reject)
    with pytest.raises(ValueError):
        correct_pvalues(p, "fdr")


def test_cohens_dz_definition():
    a, b = [3.0, 4.0, 5.0, 8.0], [1.0, 3.0, 3.0, 4.0]
    d = np.subtract(a, b)
    assert cohens_dz(a, b) == pytest.approx(d.mean() / d.std(ddof=1))


def test_paired_ttest_single_pair_is_na():
    res = paired_ttest([1.0], [0.0], resamples=50)
    assert res.n == 1 and res.mean_diff == 1.0 and "n/a" in res.note
    d = res.to_dict()
    assert d["t"] is None and d["p_value"] is None and d["cohens_dz"] is None and d["ci_low"] is None


@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.0, -1.0])
def test_correction_rejects_alpha_outside_0_1(alpha):
    with pytest.raises(ValueError, match="alpha"):
        correct_pvalues([0.01, 0.2], "holm", alpha=alpha)


def test_wilcoxon_all_zero_differences_is_not_labelled_exact():
    x = np.array([0.5, 1.0, 0.25, 1.0])
    res = wilcoxon_signed_rank(x, x)
    assert res.p_value == 1.0 and res.n_nonzero == 0
    assert res.method == "all differences zero" and "no test" in res.note
