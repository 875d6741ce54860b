"""The fresh-draw overfitting test: is a model's score on the public draw higher than fresh draws allow?

A board publishes one draw of a task and keeps a secret seed. Fresh draws built with seeds derived from
that secret are new, equally valid samples of the same task. A model that did not adapt to the public
draw scores on it like on any other draw: its public score x_0 and its fresh scores x_1..x_F are then
draws of one distribution, each the task's mean plus a draw effect (variance tau^2, what a new draw
changes beyond its items: sources, families, fillers) plus item noise (variance se_k^2, the draw's own
standard error, known from its per-item scores). The gap g = x_0 - mean(x_1..x_F) has expectation 0 and

    V = var(g) = tau^2 (1 + 1/F) + se_0^2 + mean_k(se_k^2) / F.

* tau^2 is estimated from every source of draws at hand, pooled with their degrees of freedom: each
  reference (another model's draws on the board, or the keeper's reference models: K draws with
  between-draw sd s and root-mean-square standard error w) gives s^2 - w^2 with K - 1 df, and the
  model's own fresh draws give theirs with F - 1 df. The pooled estimate is cut at 0, so the item noise
  se is a floor under V: a model's gap is never judged against less noise than its own items carry.
* The statistic T = g / sqrt(V) is referred to Student's t with the Satterthwaite degrees of freedom of
  V (Satterthwaite 1946), flagged (overfit) when T > t_{1 - alpha/2, df}: a fair model is flagged with
  probability about alpha / 2; a gap below the band is reported, not flagged.
* Without standard errors (scores alone) the item part is unknown and V falls back to the fresh scores'
  own variance: s_F^2 (1 + 1/F) with F - 1 df, the classical prediction interval of one new draw (Hahn &
  Meeker 1991, ch. 4). When nothing varies and no reference exists there is no estimate of the noise:
  the test refuses ("cannot judge: no draw variance") instead of flagging.
* The detectable gap: the gap the test catches with 80 % power at this F and noise, from the noncentral
  t (df, gap / sqrt(V)). "Not flagged" means no gap of that size, never "not overfitted".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import optimize, stats

from mmbench.evaluators.stats._base import SD_TOLERANCE, StatResult, as_vector

DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.8
NO_VARIANCE = "cannot judge: no draw variance"


@dataclass(frozen=True)
class DrawVariance:
    """One reference estimate of a task's draw variance: `draws` draws of a model whose scores had sd
    `between_sd` over the draws and root-mean-square standard error `within_se` inside them."""

    between_sd: float
    within_se: float
    draws: int
    source: str = ""


@dataclass
class OverfitGap(StatResult):
    public: float
    fresh_mean: float
    fresh_sd: float
    n_fresh: int
    gap: float
    judged: bool                 # False: no estimate of the noise (see `reason`)
    reason: str | None
    se_gap: float | None         # sqrt(V)
    excess_sd: float | None      # the pooled tau (draw variance beyond item noise), cut at 0
    item_se: float | None        # sqrt(se_0^2 + mean se_k^2 / F), the floor of se_gap
    df: float | None
    references: int              # reference draw sets pooled besides the model's own fresh draws
    half_width: float | None     # of the interval of gaps draw variance alone gives
    expected_low: float | None
    expected_high: float | None
    ci_low: float | None
    ci_high: float | None
    t: float | None
    p_value: float | None        # two-sided
    flagged: bool
    alpha: float
    power: float
    detectable_gap: float | None  # the gap flagged with probability `power`
    method: str = ("gap / sqrt(pooled draw variance (1 + 1/F) + item variance), Student t with Satterthwaite df; "
                   "item standard errors as the floor")


def detectable_gap(se_gap: float, df: float, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER) -> float:
    """The true gap the one-sided test at alpha / 2 flags with probability `power` (noncentral t, `df`)."""
    crit = stats.t.ppf(1 - alpha / 2, df)
    hit = lambda d: float(stats.nct.sf(crit, df, d / se_gap)) - power  # noqa: E731
    guess = se_gap * (crit + stats.norm.ppf(power))     # the normal answer; the t answer lies just above it
    low, high = 0.9 * guess, 1.2 * guess
    while hit(high) < 0:
        low, high = high, 2 * high
    return float(optimize.brentq(hit, low if hit(low) < 0 else 0.0, high, xtol=se_gap * 1e-6))


def gap_noise(f: int, fresh_var: Any, fresh_item: Any, item2: Any, ref_df: Any, ref_s2: Any,
              ref_w2: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised core: (V, df, tau) of the gap from F fresh draws' score variance `fresh_var` and mean squared
    standard error `fresh_item`, the item variance of the gap `item2` and references (arrays over their last
    axis: df K - 1, between-draw variance s^2, squared within-draw error w^2). Broadcasts over leading axes."""
    fresh_var, fresh_item, item2 = (np.asarray(a, dtype=float) for a in (fresh_var, fresh_item, item2))
    d = np.concatenate([np.broadcast_to(np.asarray(ref_df, float), np.shape(ref_s2)),
                        np.full(fresh_var.shape + (1,), float(f - 1))], axis=-1)
    s2 = np.concatenate([np.asarray(ref_s2, float), fresh_var[..., None]], axis=-1)
    w2 = np.concatenate([np.asarray(ref_w2, float), fresh_item[..., None]], axis=-1)
    total = d.sum(axis=-1)
    tau2 = np.maximum((d * (s2 - w2)).sum(axis=-1) / total, 0.0)
    c = 1 + 1 / f
    v = tau2 * c + item2
    fourth = (d * s2 * s2).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(fourth > 0, v * v * total * total / (c * c * fourth), 1e6)
    return v, np.clip(df, 1.0, 1e6), np.sqrt(tau2)


def overfit_gap(public: float, fresh: Sequence[float], alpha: float = DEFAULT_ALPHA, *,
                public_se: float | None = None, fresh_se: Sequence[float] | None = None,
                reference: Sequence[DrawVariance] = (), power: float = DEFAULT_POWER) -> OverfitGap:
    """The public − fresh gap and whether draw variance and item noise explain it (see module doc).
    `public_se`, `fresh_se`: the draws' standard errors (from their per-item scores); `reference`: other
    estimates of the task's draw variance (the board's draws reports, reference models)."""
    x = as_vector(fresh, "fresh")
    if x.size < 2:
        raise ValueError(f"the overfitting test needs at least 2 fresh draws, got {x.size}")
    if not 0 < alpha < 1:
        raise ValueError("alpha must lie strictly between 0 and 1")
    if (public_se is None) != (fresh_se is None):
        raise ValueError("give the standard errors of the public draw and of the fresh draws, or neither")
    f = int(x.size)
    mean = float(x.mean())
    sd = float(np.std(x, ddof=1))
    sd = sd if sd > SD_TOLERANCE else 0.0
    gap = float(public) - mean
    item2: float | None = None
    fresh_item: float | None = None
    if public_se is not None and fresh_se is not None:
        se_f = as_vector(fresh_se, "fresh_se")
        if se_f.size != f:
            raise ValueError(f"fresh_se: {se_f.size} standard errors for {f} fresh draws")
        fresh_item = float(np.mean(se_f ** 2))
        item2 = float(public_se) ** 2 + fresh_item / f
    if item2 is None:
        if reference:
            raise ValueError("reference draw variances need the draws' standard errors (public_se, fresh_se)")
        # scores alone: the fresh scores' variance is all the noise there is (prediction interval)
        v, df, tau = sd * sd * (1 + 1 / f), float(f - 1), sd
        refs: list[DrawVariance] = []
        method = "prediction interval of one draw's score from the F fresh scores alone, Student t with F - 1 df"
    else:
        refs = [r for r in reference if r.draws >= 2]
        method = OverfitGap.method
        nv, ndf, ntau = gap_noise(f, sd * sd, fresh_item, item2, [r.draws - 1 for r in refs],
                                  [r.between_sd ** 2 for r in refs], [r.within_se ** 2 for r in refs])
        v, df, tau = float(nv), float(ndf), float(ntau)
    common: dict[str, Any] = dict(public=float(public), fresh_mean=mean, fresh_sd=sd, n_fresh=f, gap=gap,
                                  alpha=float(alpha), power=float(power), references=len(refs), excess_sd=tau,
                                  item_se=None if item2 is None else float(np.sqrt(item2)), method=method)
    if not v > SD_TOLERANCE ** 2:
        return OverfitGap(**common, judged=False, reason=NO_VARIANCE, se_gap=None, df=None, half_width=None,
                          expected_low=None, expected_high=None, ci_low=None, ci_high=None, t=None, p_value=None,
                          flagged=False, detectable_gap=None)
    se = float(np.sqrt(v))
    crit = float(stats.t.ppf(1 - alpha / 2, df))
    half = crit * se
    t = gap / se
    p = float(2 * stats.t.sf(abs(t), df))
    return OverfitGap(**common, judged=True, reason=None, se_gap=se, df=df, half_width=half, expected_low=-half,
                      expected_high=half, ci_low=gap - half, ci_high=gap + half, t=t, p_value=p,
                      flagged=bool(t > crit), detectable_gap=detectable_gap(se, df, alpha, power))
