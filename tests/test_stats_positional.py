"""The mixed-effects positional-bias model recovers a planted depth effect and finds none when there is none."""
import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from scipy import stats

from mmbench.evaluators.stats import modality_robustness, positional_bias_lmm, sort_length_bins
from mmbench.evaluators.stats.robustness import MIXED_DROP_MIN, MODALITY_GAP_MIN, STABLE_MAX_SD

DEPTHS = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
LENGTHS = ["256", "512", "1k", "2k", "4k", "8k", "16k", "32k"]


def simulate(seed, depth_effect, needles=30, noise=0.2, needle_sd=0.15):
    """Per-query scores: needle random intercept + length decline + depth effect(depth) + noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in range(needles):
        u = rng.normal(0, needle_sd)
        for d in DEPTHS:
            for i, length in enumerate(LENGTHS):
                y = 0.8 + u - 0.04 * i + depth_effect(d) + rng.normal(0, noise)
                rows.append({"needle_id": f"needle{n}", "depth": d, "length_bin": length, "precision_at_1": y})
    return pd.DataFrame(rows)


def test_recovers_planted_u_shape():
    df = simulate(0, lambda d: 0.5 * (d - 0.5) ** 2)  # mid-sequence loss of 0.125 at depth 0.5
    res = positional_bias_lmm(df)
    assert res.model.startswith("mixedlm")
    assert res.n_groups == 30 and res.n_obs == len(df)
    assert res.depth_wald.df == 5
    assert res.depth_effect and res.depth_wald.p_value < 1e-6
    assert res.shape == "U-shape" and res.quadratic_wald.df == 1 and res.quadratic_wald.p_value < 1e-6
    assert res.quadratic_coef == pytest.approx(0.5, abs=0.15)
    assert 0.35 < res.vertex < 0.65
    assert res.group_variance == pytest.approx(0.15 ** 2, rel=0.6)
    est = {e.term: e for e in res.estimates}
    # depth 0.6 vs 0: planted 0.5*(0.01 - 0.25) = -0.12; its CI covers it
    assert est["depth=0.6"].ci_low < -0.12 < est["depth=0.6"].ci_high
    assert res.to_dict()["depth_wald"]["df"] == 5


def test_no_effect_when_none_planted():
    res = positional_bias_lmm(simulate(1, lambda d: 0.0))
    assert not res.depth_effect and res.depth_wald.p_value > 0.05
    assert res.shape == "no significant curvature"
    # calibration over several null data sets: rejections at 5 % stay rare
    rejections = sum(positional_bias_lmm(simulate(s, lambda d: 0.0, needles=10)).depth_effect for s in range(2, 12))
    assert rejections <= 2


def test_wald_agrees_with_statsmodels():
    df = simulate(3, lambda d: -0.1 * d)
    res = positional_bias_lmm(df)
    data = df.assign(_y=df["precision_at_1"], _depth=pd.Categorical(df["depth"].map(lambda d: f"{d:g}"),
                                                                     categories=[f"{d:g}" for d in DEPTHS]),
                     _len=pd.Categorical(df["length_bin"], categories=LENGTHS))
    fit = smf.mixedlm("_y ~ C(_depth) + C(_len)", data, groups=data["needle_id"]).fit(reml=True)
    names = list(fit.params.index)
    depth_idx = [i for i, n in enumerate(names) if n.startswith("C(_depth)")]
    r = np.zeros((len(depth_idx), len(names)))
    for row, i in enumerate(depth_idx):
        r[row, i] = 1.0
    ref = fit.wald_test(r, scalar=True, use_f=False)
    assert res.depth_wald.chi2 == pytest.approx(float(ref.statistic), rel=1e-6)
    assert res.depth_wald.p_value == pytest.approx(float(ref.pvalue), rel=1e-5)
    # estimates and their CIs are statsmodels' own
    ci = fit.conf_int()
    e = {x.term: x for x in res.estimates}["depth=1"]
    assert e.estimate == pytest.approx(fit.params["C(_depth)[T.1]"])
    assert (e.ci_low, e.ci_high) == pytest.approx(tuple(ci.loc["C(_depth)[T.1]"]))
    # quadratic term: Wald chi2 = z^2
    q = smf.mixedlm("_y ~ depth + I(depth ** 2) + C(_len)", data, groups=data["needle_id"]).fit(reml=True)
    z = q.params["I(depth ** 2)"] / q.bse["I(depth ** 2)"]
    assert res.quadratic_wald.chi2 == pytest.approx(z ** 2, rel=1e-5)
    assert res.quadratic_wald.p_value == pytest.approx(stats.chi2.sf(z ** 2, 1), rel=1e-4)


def test_falls_back_to_ols_without_needles():
    df = simulate(4, lambda d: 0.3 * d).drop(columns=["needle_id"])
    res = positional_bias_lmm(df)
    assert res.model.startswith("ols") and res.n_groups is None and res.depth_effect


def test_sort_length_bins():
    assert sort_length_bins(["32k", "1k", "256", "0.5k", "8k", "512"]) == ["256", "0.5k", "512", "1k", "8k", "32k"]


def test_modality_robustness_typing():
    r = modality_robustness({"text": 0.50, "mixed": 0.52, "image": 0.49})
    assert r.kind == "stable"
    assert r.sd == pytest.approx(np.std([0.50, 0.52, 0.49], ddof=1)) and r.mean == pytest.approx(np.mean([0.5, 0.52, 0.49]))
    assert r.sd <= STABLE_MAX_SD
    assert modality_robustness({"text": 0.6, "mixed": 0.3, "image": 0.55}).kind == "disrupted by mixed noise"
    assert modality_robustness({"text": 0.7, "mixed": 0.55, "image": 0.45}).kind == "modality-biased (text)"
    assert modality_robustness({"text": 0.3, "mixed": 0.45, "image": 0.5}).kind == "modality-biased (image)"
    assert MIXED_DROP_MIN > 0 and MODALITY_GAP_MIN > 0
    with pytest.raises(ValueError):
        modality_robustness({"text": 0.3, "image": 0.5})


def chance_level(seed=2, needles=25):
    """Binary scores at ~4 % (a blind model on 25 candidates): statsmodels' default fit degenerates on seed 2."""
    rng = np.random.default_rng(seed)
    rows = [{"needle_id": str(g), "depth": d, "length_bin": L, "precision_at_1": float(rng.random() < 0.04)}
            for g in range(needles) for d in DEPTHS for L in ("1k", "2k", "4k", "8k")]
    return pd.DataFrame(rows)


def test_a_degenerate_default_fit_is_detected_and_refitted():
    df = chance_level()
    data = df.assign(_depth=df["depth"].map(lambda d: f"{d:g}"))
    default = smf.mixedlm("precision_at_1 ~ C(_depth) + C(length_bin)", data, groups=data["needle_id"]).fit(reml=True)
    assert default.converged and not np.isfinite(default.llf)  # statsmodels calls this converged
    res = positional_bias_lmm(df)
    assert res.optimizer != "default" and res.converged
    assert res.fit_status == "boundary" and any("default" in n and "degenerate" in n for n in res.fit_notes)
    assert all(np.isfinite(e.std_err) and e.std_err > 0 for e in res.estimates)
    cell = df[(df["depth"] == 0.0) & (df["length_bin"] == "1k")]["precision_at_1"]
    intercept = next(e for e in res.estimates if e.term == "Intercept").estimate
    # at a zero random-intercept variance the fit is OLS: its intercept is OLS's, not the degenerate ~0
    ols = smf.ols("precision_at_1 ~ C(_depth) + C(length_bin)", data).fit()
    assert intercept == pytest.approx(ols.params["Intercept"], abs=1e-6) and abs(default.params["Intercept"]) < 1e-9
    assert len(cell) == 25


def test_no_usable_optimizer_is_reported_unreliable(monkeypatch):
    import mmbench.evaluators.stats.positional as positional

    monkeypatch.setattr(positional, "FIT_METHODS", ("default",))
    res = positional_bias_lmm(chance_level())
    assert res.fit_status == "unreliable" and not res.converged


def test_a_sound_default_fit_is_kept():
    res = positional_bias_lmm(simulate(0, lambda d: 0.0, needles=10))
    assert res.optimizer == "default" and res.fit_status == "ok" and res.fit_notes == []


def test_a_blind_model_is_labelled_not_typed():
    """A text-only model: text anchors score best on image-only haystacks (the anchor is the only text it sees),
    which plain typing reads as 'modality-biased (image)'; the report types by what the model saw."""
    from mmbench.reports.report import robustness_numbers
    from report_helpers import grounding_per_query

    pq = grounding_per_query(0, needles=8)
    text = pq["anchor_kind"] == "text"
    pq.loc[text & (pq["background_modality"] == "image"), "precision_at_1"] = 1.0
    pq.loc[text & (pq["background_modality"] != "image"), "precision_at_1"] = 0.3
    pq.loc[~text, "precision_at_1"] = 0.04
    naive = {r["anchor_kind"]: r for r in robustness_numbers(pq, "m", "precision_at_1", None)}
    assert naive["text"]["kind"] == "modality-biased (image)"  # the misreading this guards against
    typed = {r["anchor_kind"]: r for r in robustness_numbers(pq, "m", "precision_at_1", {"text"})}
    assert typed["image"]["kind"] == "blind (image anchors unseen)"
    assert typed["text"]["kind"] == "not typed (image backgrounds unseen)"
    full = {r["anchor_kind"]: r for r in robustness_numbers(pq, "m", "precision_at_1", {"text", "image"})}
    assert full["text"]["kind"] == "modality-biased (image)"  # a model that sees both is typed as before
