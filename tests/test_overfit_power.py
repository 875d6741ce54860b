"""The fresh-draw overfitting test against its purpose: power next to an oracle, false flags, the printed
detectable gap, tied fresh scores, fresh needles and the commitment to the secret seed.

The truth is simulated apart from the estimate: each draw's score is the hit rate of n Bernoulli items whose
rate moves by a draw effect N(0, tau); the test sees only scores, standard errors and reference draws sets of
other models (hit rates 0.5–0.9, 5 draws each); the oracle knows tau and the item variance and uses a z test.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mmbench.evaluators.stats.overfit_gap import DrawVariance, NO_VARIANCE, detectable_gap, gap_noise, overfit_gap

F = 5              # the default number of fresh draws (mmbench overfit --fresh)
REFS, K = 10, 5    # the board's draws report: ten other models over five draws


def _draws(rng, shape, n, p, tau):
    m = rng.binomial(n, np.clip(p + rng.normal(0.0, tau, shape), 0, 1)) / n
    return m, m * (1 - m) / (n - 1)       # score and squared standard error (sample sd, ddof 1)


def _trials(rng, n, p, tau, gap, trials):
    """Flags of the test and of the oracle, and the noise (V, df) the test estimated, in `trials` simulations."""
    pub, pse = _draws(rng, (trials,), n, p, tau)
    fr, fse = _draws(rng, (trials, F), n, p, tau)
    rs, rse = _draws(rng, (trials, REFS, K), n, rng.uniform(0.5, 0.9, (trials, REFS, 1)), tau)
    v, df, _ = gap_noise(F, fr.var(axis=1, ddof=1), fse.mean(axis=1), pse + fse.mean(axis=1) / F, K - 1,
                         rs.var(axis=2, ddof=1), rse.mean(axis=2))
    g = pub + gap - fr.mean(axis=1)
    flag = g / np.sqrt(v) > stats.t.ppf(0.975, df)
    true_sd = np.sqrt((tau ** 2 + p * (1 - p) / n) * (1 + 1 / F))
    return flag, g / true_sd > stats.norm.ppf(0.975), v, df


CASES = {"msr": (144, 0.8, 0.03), "vg": (900, 0.8, 0.002)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_power_is_within_005_of_the_oracle_and_a_fair_model_is_rarely_flagged(case):
    n, p, tau = CASES[case]
    rng = np.random.default_rng(44)
    aa, _, _, _ = _trials(rng, n, p, tau, 0.0, 20_000)
    assert aa.mean() <= 0.03
    for gap in (0.05, 0.10):
        flag, oracle, _, _ = _trials(rng, n, p, tau, gap, 6_000)
        assert abs(flag.mean() - oracle.mean()) <= 0.05, (case, gap, flag.mean(), oracle.mean())
    if case == "msr":   # the public draw's own noise bounds what any test can do here (issue 44: ~0.17, ~0.53)
        assert 0.12 < oracle.mean() < 0.6


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_printed_detectable_gap_is_the_simulated_80_percent_power_gap(case):
    n, p, tau = CASES[case]
    rng = np.random.default_rng(45)
    _, _, v, df = _trials(rng, n, p, tau, 0.0, 100)
    printed = float(np.mean([detectable_gap(float(np.sqrt(a)), float(b)) for a, b in zip(v, df)]))
    grid = np.linspace(0.5 * printed, 1.5 * printed, 21)
    power = np.array([_trials(rng, n, p, tau, g, 4_000)[0].mean() for g in grid])
    simulated = float(np.interp(0.8, np.maximum.accumulate(power), grid))
    assert abs(printed - simulated) <= 0.01, (printed, simulated)
    if case == "msr":
        assert printed == pytest.approx(0.14, abs=0.015)


def test_the_scalar_test_is_the_vectorised_core():
    rng = np.random.default_rng(3)
    pub, pse = _draws(rng, (1,), 144, 0.8, 0.03)
    fr, fse = _draws(rng, (F,), 144, 0.8, 0.03)
    refs = [DrawVariance(0.05, 0.03, 5), DrawVariance(0.04, 0.04, 4)]
    res = overfit_gap(float(pub[0]), fr, public_se=float(np.sqrt(pse[0])), fresh_se=np.sqrt(fse), reference=refs)
    v, df, _ = gap_noise(F, fr.var(ddof=1), fse.mean(), pse[0] + fse.mean() / F, [4, 3], [0.05 ** 2, 0.04 ** 2],
                         [0.03 ** 2, 0.04 ** 2])
    assert res.se_gap == pytest.approx(float(np.sqrt(v))) and res.df == pytest.approx(float(df))
    assert res.flagged == (res.t > stats.t.ppf(0.975, df)) and res.references == 2


def test_equal_fresh_scores_never_flag():
    g = overfit_gap(0.501, [0.5, 0.5, 0.5])          # scores alone, nothing varies: no estimate of the noise
    assert not g.flagged and not g.judged and g.reason == NO_VARIANCE and g.p_value is None
    g = overfit_gap(0.501, [0.5, 0.5, 0.5], public_se=0.07, fresh_se=[0.07] * 3)   # the item SE is the floor
    assert g.judged and not g.flagged and g.se_gap >= 0.07
    # A/A on a 40-item task with two fresh draws: ties are common, false flags stay at the level
    rng = np.random.default_rng(9)
    pub, pse = _draws(rng, (20_000,), 40, 0.5, 0.0)
    fr, fse = _draws(rng, (20_000, 2), 40, 0.5, 0.0)
    v, df, _ = gap_noise(2, fr.var(axis=1, ddof=1), fse.mean(axis=1), pse + fse.mean(axis=1) / 2, [], np.zeros((20_000, 0)),
                         np.zeros((20_000, 0)))
    tied = fr[:, 0] == fr[:, 1]
    flags = (pub - fr.mean(axis=1)) / np.sqrt(v) > stats.t.ppf(0.975, df)
    assert tied.mean() > 0.05 and flags.mean() <= 0.03 and flags[tied].mean() <= 0.03


def test_fresh_visual_grounding_needles_share_nothing_with_the_public_ones():
    from mmbench.builders.sources.needles import fresh_sample_needles, sample_needles

    public = sample_needles()
    keys = lambda ns: ({n.id for n in ns}, {n.anchor_text for n in ns if n.anchor_text},  # noqa: E731
                       {n.query for n in ns}, {(n.kind, n.entity) for n in ns if n.kind == "text"})
    for seed in (1, 2, 123456):
        fresh = fresh_sample_needles(seed)
        assert [n.kind for n in fresh].count("text") == 25 and [n.kind for n in fresh].count("image") == 25
        for a, b in zip(keys(public), keys(fresh)):
            assert not a & b
        assert len({n.query for n in fresh}) == 50
    assert keys(fresh_sample_needles(1))[0] != keys(fresh_sample_needles(2))[0]


def test_a_fresh_visual_grounding_draw_shares_no_needle_with_the_public_draw(tmp_path, monkeypatch):
    from mmbench.running.draws import build_draws
    from mmbench.tasks import get_task

    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path))
    spec = get_task("visual_grounding")
    small = {"lengths": [256], "depths": [0.5], "backgrounds": ["text"], "needles_per_kind": 5}
    (public,) = build_draws(spec, [0], params=small)
    (fresh,) = build_draws(spec, [77], params={**small, **spec.fresh_params})

    def needles(ps):
        return ({q.meta["needle_id"] for q in ps.queries}, {q.meta["entity"] for q in ps.queries
                                                            if q.meta["anchor_kind"] == "text"},
                {q.text for q in ps.queries if q.text})

    for a, b in zip(needles(public), needles(fresh)):
        assert a and b and not a & b
    assert len(needles(fresh)[0]) == 10
    assert fresh.builder["needles"] == "fresh" and "needles" not in public.builder
    assert "needles" in spec.fresh_renews and all(get_task(t).fresh_renews for t in
                                                  ("multi_source_reasoning", "logical_summarization",
                                                   "temporal_summarization", "flickr_hard_negatives"))


def test_a_changed_secret_fails_the_commitment():
    from mmbench.running.overfit import check_commitment, commitment_record

    rec = commitment_record("visual_grounding", 0, "h" * 64, "keeper-secret")
    assert "keeper-secret" not in str(rec) and len(rec["salt"]) == 32
    check_commitment(rec, "keeper-secret", "visual_grounding", "h" * 64)
    for secret, task, public in (("keeper-secreT", "visual_grounding", "h" * 64), ("keeper-secret", "x", "h" * 64),
                                 ("keeper-secret", "visual_grounding", "g" * 64)):
        with pytest.raises(ValueError):
            check_commitment(rec, secret, task, public)
    assert commitment_record("t", 0, "h", "s")["commitment"] != commitment_record("t", 0, "h", "s")["commitment"]


def test_the_references_are_the_other_models_of_the_draws_report():
    from mmbench.results.draw_report import draw_variances

    row = lambda sd, se, k: [{"group": "all", "between_sd": sd, "within_se": se, "draws": k}]  # noqa: E731
    data = {"task": "multi_source_reasoning", "models": {"bm25": row(0.04, 0.03, 5), "minilm": row(0.05, 0.04, 3),
                                                         "one": row(None, 0.04, 1)}}
    refs = draw_variances(data, exclude="bm25")
    assert [(r.between_sd, r.within_se, r.draws) for r in refs] == [(0.05, 0.04, 3)]
    assert refs[0].source == "multi_source_reasoning: minilm"
    with_refs = overfit_gap(0.6, [0.5, 0.52, 0.49], public_se=0.03, fresh_se=[0.03] * 3, reference=refs * 10)
    alone = overfit_gap(0.6, [0.5, 0.52, 0.49], public_se=0.03, fresh_se=[0.03] * 3)
    assert alone.excess_sd == 0 and alone.se_gap == pytest.approx(alone.item_se)   # the item SE floor
    assert with_refs.excess_sd > 0.02 and with_refs.se_gap > alone.se_gap and with_refs.references == 10
    with pytest.raises(ValueError, match="standard errors"):
        overfit_gap(0.6, [0.5, 0.52], reference=refs)


def test_the_board_lists_the_commitment_and_refuses_a_second_one(tmp_path):
    from mmbench.leaderboards.overfit import file_commitment, overfit_section
    from mmbench.running.overfit import commitment_record

    rec = commitment_record("visual_grounding", 0, "h" * 64, "keeper-secret")
    file_commitment(tmp_path, rec)
    file_commitment(tmp_path, rec)   # the same commitment again is fine
    html = overfit_section(tmp_path, [], lambda e: {})
    assert rec["commitment"] in html and rec["salt"] in html and "keeper-secret" not in html
    with pytest.raises(ValueError, match="already holds a commitment"):
        file_commitment(tmp_path, commitment_record("visual_grounding", 0, "h" * 64, "another"))


@pytest.mark.parametrize("rho", [0.0, 1.0])
def test_references_scored_on_the_same_draws_keep_false_flags_near_the_level(rho):
    """A board's references are usually scored on the same draw seeds, so their draw effects are correlated
    (rho = 1: one shared effect per draw, the worst case); the test pools them as independent. Its A/A flag rate
    on the MSR-sized case stays within 0.035 (0.027 independent, 0.031 fully shared), and the docs state it."""
    n, p, tau = CASES["msr"]
    rng = np.random.default_rng(46)
    trials = 20_000
    pub, pse = _draws(rng, (trials,), n, p, tau)
    fr, fse = _draws(rng, (trials, F), n, p, tau)
    effect = np.sqrt(rho) * rng.normal(0, tau, (trials, 1, K)) + np.sqrt(1 - rho) * rng.normal(0, tau, (trials, REFS, K))
    rs = rng.binomial(n, np.clip(rng.uniform(0.5, 0.9, (trials, REFS, 1)) + effect, 0, 1)) / n
    v, df, _ = gap_noise(F, fr.var(axis=1, ddof=1), fse.mean(axis=1), pse + fse.mean(axis=1) / F, K - 1,
                         rs.var(axis=2, ddof=1), (rs * (1 - rs) / (n - 1)).mean(axis=2))
    aa = ((pub - fr.mean(axis=1)) / np.sqrt(v) > stats.t.ppf(0.975, df)).mean()
    assert aa <= (0.03 if rho == 0 else 0.035), (rho, aa)
