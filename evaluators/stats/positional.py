"""Positional bias: linear mixed-effects model of per-query score on needle depth and length.

Model (statsmodels ``mixedlm``, REML)::

    score ~ C(depth) + C(length_bin) + (1 | needle_id)

depth is categorical (reference = the shallowest depth, 0 %), length bin categorical
(reference = the shortest bin), with a random intercept per needle instance. The joint test of
"no depth effect" is the Wald chi-squared test of all depth coefficients,
``W = b' V^-1 b`` with b the depth estimates and V their block of the fitted covariance,
on k - 1 df for k depth levels (5 df for 6 depths).

The U-shape (mid-sequence loss, boundary preference) is tested with a quadratic-depth model::

    score ~ depth + depth^2 + C(length_bin) + (1 | needle_id)

with depth in [0, 1]; the Wald chi-squared (1 df) of the depth^2 coefficient tests curvature,
and a positive, significant coefficient with its vertex -b1 / (2 b2) inside (0, 1) is reported
as a U-shape. Without a needle column (or with fewer than two needles) both models fall back to
ordinary least squares and say so in `model`.

Fits are checked, not trusted: statsmodels' default optimizer can stop at a degenerate point and
still flag it converged (an infinite log-likelihood, a null standard error, zero variance: typical
of chance-level binary scores). A fit is usable only if it converged with a finite log-likelihood and
finite, positive standard errors for every fixed effect; otherwise the fit is repeated with other
optimizers (`FIT_METHODS`) and the usable one with the highest REML criterion is kept. A random-intercept
variance at the boundary (≈ 0) is a valid but singular fit and is reported as such; when no optimizer
gives a usable fit the result says `fit_status="unreliable"` and why.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from mmbench.evaluators.ordering import label_key
from scipy import stats

from mmbench.evaluators.stats._base import StatResult

DEFAULT_ALPHA = 0.05
# statsmodels MixedLM.fit(method=...), tried in this order; "default" is statsmodels' own chain (bfgs, lbfgs, cg)
FIT_METHODS = ("default", "powell", "nm", "lbfgs")
BOUNDARY_REL = 1e-6  # group variance below this share of the residual variance is "at the boundary"


@dataclass
class Estimate(StatResult):
    term: str
    estimate: float
    std_err: float
    z: float
    p_value: float
    ci_low: float
    ci_high: float


@dataclass
class WaldTest(StatResult):
    terms: list[str]
    chi2: float
    df: int
    p_value: float


@dataclass
class PositionalBiasResult(StatResult):
    score: str
    model: str                       # "mixedlm (random intercept per <group>)" or "ols (...)"
    n_obs: int
    n_groups: int | None
    depth_levels: list[float]
    length_levels: list[str]
    depth_wald: WaldTest             # joint test of the categorical depth terms
    quadratic_wald: WaldTest         # test of the depth^2 term in the quadratic model
    quadratic_coef: float
    linear_coef: float
    vertex: float | None             # depth at the extremum of the fitted parabola
    shape: str                       # "U-shape", "inverted U", "no significant curvature"
    depth_effect: bool               # depth_wald p < alpha
    alpha: float
    estimates: list[Estimate]
    quadratic_estimates: list[Estimate]
    group_variance: float | None
    converged: bool
    warnings: list[str] = field(default_factory=list)
    depth_means: dict[str, float] = field(default_factory=dict)
    optimizer: str = "ols"           # the statsmodels method of the kept fit(s)
    fit_status: str = "ok"           # "ok", "boundary" (variance ≈ 0: singular but valid) or "unreliable"
    fit_notes: list[str] = field(default_factory=list)


def sort_length_bins(values: Iterable[Any]) -> list[str]:
    """Length-bin labels ("256", "1k", "0.25k", "32k") in increasing nominal length."""
    return sorted({str(v) for v in values}, key=label_key)


def _depth_label(d: float) -> str:
    return f"{d:g}"


def _estimates(res: Any, names: list[str], confidence: float) -> list[Estimate]:
    params, bse = res.params, res.bse
    ci = res.conf_int(alpha=1.0 - confidence)
    out = []
    for name in names:
        est, se = float(params[name]), float(bse[name])
        z = est / se if se > 0 else float("nan")
        p = float(2.0 * stats.norm.sf(abs(z))) if math.isfinite(z) else float("nan")
        out.append(Estimate(term=name, estimate=est, std_err=se, z=z, p_value=p,
                            ci_low=float(ci.loc[name].iloc[0]), ci_high=float(ci.loc[name].iloc[1])))
    return out


def wald_chi2(res: Any, terms: list[str]) -> WaldTest:
    """Wald chi-squared test that all `terms` are zero, from the fitted params and covariance."""
    b = np.asarray(res.params[terms], dtype=float)
    cov = res.cov_params().loc[terms, terms].to_numpy(dtype=float)
    rank = int(np.linalg.matrix_rank(cov))
    stat = float(b @ np.linalg.pinv(cov) @ b)
    return WaldTest(terms=list(terms), chi2=stat, df=rank, p_value=float(stats.chi2.sf(stat, rank)) if rank else float("nan"))


def _fit(formula: str, data: pd.DataFrame, use_groups: bool, caught: list[str]) -> tuple[Any, str, list[str]]:
    """(result, method, notes): OLS, or the checked mixed-model fit (see the module docstring)."""
    import statsmodels.formula.api as smf

    if not use_groups:
        return _recorded(lambda: smf.ols(formula, data).fit(), caught), "ols", []
    model = smf.mixedlm(formula, data, groups=data["_g"])
    notes: list[str] = []
    usable = []
    for method in FIT_METHODS:
        try:
            kw = {} if method == "default" else {"method": method}
            res = _recorded(lambda: model.fit(reml=True, **kw), caught if method == FIT_METHODS[0] else [])
        except (ValueError, np.linalg.LinAlgError) as exc:
            notes.append(f"{method}: failed ({exc})")
            continue
        problem = _fit_problem(res)
        if problem is None:
            usable.append((float(res.llf), method, res))
            if method == FIT_METHODS[0]:
                break  # the default fit is sound: keep statsmodels' own answer
        else:
            notes.append(f"{method}: {problem}")
        if usable and method != FIT_METHODS[0]:
            break  # the first sound alternative; the default already failed
    if not usable:
        return res, "none usable", notes
    llf, method, res = max(usable, key=lambda t: t[0])
    if method != FIT_METHODS[0]:
        notes.append(f"kept the {method} fit (REML log-likelihood {llf:.4g})")
    return res, method, notes


def _recorded(fit: Callable[[], Any], caught: list[str]) -> Any:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        res = fit()
    for w in record:
        msg = f"{w.category.__name__}: {w.message}"
        if msg not in caught:
            caught.append(msg)
    return res


def _fit_problem(res: Any) -> str | None:
    """Why a mixed-model fit cannot be trusted, or None."""
    if not bool(getattr(res, "converged", True)):
        return "did not converge"
    if not math.isfinite(float(res.llf)):
        return f"log-likelihood {float(res.llf)} (degenerate optimum)"
    bse = np.asarray(res.bse_fe, dtype=float)
    if not np.all(np.isfinite(bse)) or np.any(bse <= 0) or np.any(bse > 1e6):
        return "fixed-effect standard errors are not finite and positive"
    if not np.all(np.isfinite(np.asarray(res.cov_re, dtype=float))):
        return "random-effect variance is not finite"
    return None


def _status(res: Any, method: str, notes: list[str]) -> str:
    if method == "none usable":
        return "unreliable"
    if method == "ols":
        return "ok"
    var = float(np.asarray(res.cov_re)[0, 0])
    if var <= BOUNDARY_REL * max(float(res.scale), 1e-300):
        notes.append("random-intercept variance at the boundary (≈ 0): a singular fit, equivalent to no needle "
                     "effect; the fixed effects are still estimated")
        return "boundary"
    return "ok"


def positional_bias_lmm(df: pd.DataFrame, *, score: str = "precision_at_1", depth: str = "depth",
                        length: str | None = "length_bin", group: str | None = "needle_id",
                        alpha: float = DEFAULT_ALPHA, confidence: float = 0.95) -> PositionalBiasResult:
    """Fit the categorical- and quadratic-depth models on per-query rows of `df` (one row per item)."""
    for col in (score, depth):
        if col not in df.columns:
            raise ValueError(f"positional_bias_lmm: column {col!r} is missing")
    data = pd.DataFrame({"_y": pd.to_numeric(df[score], errors="coerce"),
                         "_dnum": pd.to_numeric(df[depth], errors="coerce")})
    use_length = bool(length) and length in df.columns
    if use_length:
        data["_len"] = df[length].astype("string")
    has_group = bool(group) and group in df.columns
    if has_group:
        data["_g"] = df[group].astype("string")
    data = data.dropna().reset_index(drop=True)
    depth_levels = sorted(float(v) for v in data["_dnum"].unique())
    if len(depth_levels) < 2:
        raise ValueError("positional_bias_lmm: need at least two depth levels")
    if data["_y"].nunique() < 2:
        raise ValueError(f"positional_bias_lmm: {score} is constant ({data['_y'].iloc[0]:g}) on all "
                         f"{len(data)} rows; there is no variation to model")
    labels = [_depth_label(d) for d in depth_levels]
    data["_depth"] = pd.Categorical(data["_dnum"].map(_depth_label), categories=labels)
    length_levels: list[str] = []
    if use_length:
        length_levels = sort_length_bins(data["_len"].unique())
        data["_len"] = pd.Categorical(data["_len"].astype(str), categories=length_levels)
        use_length = len(length_levels) > 1
    use_groups = has_group and data["_g"].nunique() >= 2 and data.groupby("_g").size().max() >= 2
    length_term = " + C(_len)" if use_length else ""
    caught: list[str] = []

    res, method, notes = _fit(f"_y ~ C(_depth){length_term}", data, use_groups, caught)
    depth_terms = [n for n in res.params.index if n.startswith("C(_depth)")]
    fe_names = list(res.fe_params.index) if use_groups else list(res.params.index)
    depth_test = wald_chi2(res, depth_terms)

    qres, qmethod, qnotes = _fit(f"_y ~ _dnum + I(_dnum ** 2){length_term}", data, use_groups, caught)
    q_fe = list(qres.fe_params.index) if use_groups else list(qres.params.index)
    quad_test = wald_chi2(qres, ["I(_dnum ** 2)"])
    b1, b2 = float(qres.params["_dnum"]), float(qres.params["I(_dnum ** 2)"])
    vertex = -b1 / (2.0 * b2) if b2 != 0 else None
    curved = quad_test.p_value < alpha
    inside = vertex is not None and 0.0 < vertex < 1.0
    if curved and b2 > 0 and inside:
        shape = "U-shape"
    elif curved and b2 < 0 and inside:
        shape = "inverted U"
    elif curved:
        shape = "monotone curvature (vertex outside 0..1)"
    else:
        shape = "no significant curvature"

    group_var = None
    if use_groups:
        group_var = float(np.asarray(res.cov_re)[0, 0])
        model = f"mixedlm REML (random intercept per {group})"
        converged = _fit_problem(res) is None and _fit_problem(qres) is None
    else:
        why = "no group column" if not has_group else "fewer than two groups with repeated rows"
        model = f"ols ({why}; no random intercept)"
        converged = True

    def nice(name: str) -> str:
        return (name.replace("C(_depth)[T.", "depth=").replace("C(_len)[T.", "length_bin=").replace("]", "")
                .replace("I(_dnum ** 2)", "depth^2").replace("_dnum", "depth"))

    ests = _estimates(res, fe_names, confidence)
    qests = _estimates(qres, q_fe, confidence)
    for e in ests + qests:
        e.term = nice(e.term)
    depth_test.terms = [nice(t) for t in depth_test.terms]
    quad_test.terms = [nice(t) for t in quad_test.terms]
    means = data.groupby("_depth", observed=True)["_y"].mean()
    fit_notes = [f"categorical model: {n}" for n in notes] + [f"quadratic model: {n}" for n in qnotes]
    statuses = {_status(res, method, fit_notes), _status(qres, qmethod, fit_notes)}
    fit_status = "unreliable" if "unreliable" in statuses else "boundary" if "boundary" in statuses else "ok"
    fit_notes = list(dict.fromkeys(fit_notes))
    return PositionalBiasResult(
        score=score, model=model, n_obs=int(len(data)), n_groups=int(data["_g"].nunique()) if use_groups else None,
        depth_levels=depth_levels, length_levels=length_levels, depth_wald=depth_test, quadratic_wald=quad_test,
        quadratic_coef=b2, linear_coef=b1, vertex=vertex, shape=shape, depth_effect=bool(depth_test.p_value < alpha),
        alpha=float(alpha), estimates=ests, quadratic_estimates=qests, group_variance=group_var, converged=converged,
        warnings=caught, depth_means={str(k): float(v) for k, v in means.items()},
        optimizer=method if method == qmethod else f"{method} / {qmethod}", fit_status=fit_status, fit_notes=fit_notes)
