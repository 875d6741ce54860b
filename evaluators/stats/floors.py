"""Resolution floors: the smallest paired difference in a metric that n items can detect.

The floor (minimum detectable effect, MDE) is the true mean difference delta between two models at
which a two-sided paired t-test at level alpha rejects with probability `power`. For per-item
differences with standard deviation sigma(delta) the test statistic follows a noncentral t with n - 1
degrees of freedom and noncentrality delta sqrt(n) / sigma(delta); the floor solves

    P(|T| > t_{1-alpha/2, n-1}) = power,   T ~ nct(n - 1, delta sqrt(n) / sigma(delta))

for delta (Cohen 1988, "Statistical Power Analysis for the Behavioral Sciences", ch. 2).

* Binary metrics (P@1, R@1) with discordance psi (the share of items where exactly one model hits):
  the per-item difference is +1, 0 or -1 and sigma(delta)^2 = psi - delta^2, so the floor shrinks as
  the models agree more (Connor 1987, "Sample size for testing differences in proportions for the
  paired-sample design", Biometrics 43(1)).
* Design time, before any run: psi = 0.5, the discordance of two independent models at 50 % hit
  rate. It is not an upper bound: two models right on different items disagree more (0.68 has been seen),
  and their observed floor is then above the design floor. At n = 164 this gives 15.2 points.
* Observed, from two runs: psi is their measured discordance (binary metrics) or sigma is the sample
  standard deviation of their per-item differences (continuous metrics such as MRR).
* Each metric on its own scale: a metric whose per-item score lies in [0, c] (P@5 with one relevant
  candidate: c = 0.2; every other metric: c = 1, `metrics.item_ceiling`) has design floors c times those
  of a 0/1 metric, and the per-item sd of a mean over different items is the observed one or, where the
  scores do not vary, its bound c / 2 (Popoviciu's inequality: a variable in [0, c] has variance at most
  c^2 / 4) (`metric_sd`).
* Every floor is safe where nothing varies: an sd within `SD_TOLERANCE` is 0 and gives no floor (None),
  and the root finder only runs on a bracket whose ends straddle the target power.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from mmbench.common.value_memo import remembered
from mmbench.evaluators.stats._base import StatResult, Values, sample_sd

DESIGN_DISCORDANCE = 0.5
DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.8


@dataclass
class Floor(StatResult):
    n: int
    mde: float | None     # None: too few items (n < 2) or no variation to detect anything with
    basis: str            # "design (discordance 0.5)", "observed discordance", "observed sd"
    discordance: float | None
    sd: float | None
    alpha: float
    power: float


def t_test_power(delta: float, n: int, sd: float, alpha: float = DEFAULT_ALPHA) -> float:
    """Power of the two-sided one-sample (paired) t-test at true mean `delta`, per-item sd `sd`, n items."""
    from scipy import stats  # imported when a floor is computed, not with this module (see design_floor)

    df = n - 1
    crit = stats.t.ppf(1 - alpha / 2, df)
    nc = delta * np.sqrt(n) / sd
    upper, lower = stats.nct.sf(crit, df, nc), stats.nct.cdf(-crit, df, nc)
    # scipy's noncentral t can give NaN far in a tail, where that tail's mass is 0 to float precision
    return float(np.nan_to_num(upper, nan=0.0 if nc < 0 else 1.0) + np.nan_to_num(lower, nan=0.0))


def _solve(power_at: Callable[[float], float], upper: float, power: float) -> float | None:
    """The difference in (0, upper] at which `power_at` reaches `power`; None where even `upper` does not.
    The bracket's low end scales with `upper`, so a tiny sd never puts the root below the bracket."""
    if not upper > 0 or power_at(upper) < power:
        return None
    low = upper * 1e-9
    if power_at(low) >= power:
        return low
    from scipy import optimize  # only a continuous floor needs the root finder

    return float(optimize.brentq(lambda d: power_at(d) - power, low, upper, xtol=upper * 1e-9))


def binary_floor(n: int, discordance: float = DESIGN_DISCORDANCE, alpha: float = DEFAULT_ALPHA,
                 power: float = DEFAULT_POWER) -> float | None:
    """Floor of a binary metric's paired difference at discordance psi (sd^2 = psi - delta^2)."""
    if n < 2 or not 0 < discordance <= 1:
        return None
    upper = discordance * (1 - 1e-9)
    return _solve(lambda d: t_test_power(d, n, np.sqrt(max(discordance - d * d, 1e-300)), alpha), upper, power)


def binary_floor_bounds(n: int, discordance: float, alpha: float, power: float) -> Callable[[float | None], bool]:
    """Whether a value can be `binary_floor(n, discordance, alpha, power)`: what its definition allows, checked
    without scipy before a remembered value is believed. None only where no floor exists (n < 2, a discordance
    outside (0, 1]); otherwise finite, at most the discordance (|p10 - p01| <= p10 + p01), and at least 0.9 of the
    normal approximation's floor k sqrt(psi) / sqrt(n + k^2), k = z(1 - alpha/2) + z(power), which a t-test never
    beats by more than 0.1 % (n = 2 to 100,000, alpha 0.01 to 0.1, power 0.5 to 0.9). A None from the root finder
    (too few items for the power) fails too: it is computed afresh, not remembered."""
    def valid(value: float | None) -> bool:
        if value is None:
            return n < 2 or not 0 < discordance <= 1
        if not (math.isfinite(value) and 0 < value <= discordance):
            return False
        k = normal_quantile_bound(1 - alpha / 2) + normal_quantile_bound(power)
        return value >= 0.9 * k * math.sqrt(discordance) / math.sqrt(n + k * k)

    return valid


def normal_cdf(x: float) -> float:
    """The standard normal CDF from `math.erfc` (no scipy): accurate in relative terms in the lower tail."""
    return 0.5 * math.erfc(-x / math.sqrt(2))


def normal_quantile_bound(p: float) -> float:
    """The standard normal quantile at `p` in (0, 1) by bisection on `normal_cdf`, to within 1e-12: for range checks
    of remembered values, never for a printed number (those are scipy's)."""
    low, high = -40.0, 40.0
    while high - low > 1e-12:
        mid = (low + high) / 2
        low, high = (mid, high) if normal_cdf(mid) < p else (low, mid)
    return (low + high) / 2


def sd_floor(n: int, sd: float, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER) -> float | None:
    """Floor of a continuous metric's paired difference whose per-item differences have sd `sd`."""
    if n < 2 or not sd > 0:
        return None
    return _solve(lambda d: t_test_power(d, n, sd, alpha), 100 * sd, power)


def design_floor(n: int, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER, ceiling: float = 1.0) -> Floor:
    """Design-time floor from the number of items alone: a 0/1 metric at discordance 0.5, scaled to a metric
    whose per-item score lies in [0, `ceiling`] (0.2 for P@5 with one relevant candidate). The unscaled floor is
    scipy's, remembered per scipy version (`mmbench.common.value_memo`): a run summary prints these floors, and
    importing scipy.stats for them took most of a warm run's time."""
    mde = remembered("binary_floor", (n, DESIGN_DISCORDANCE, alpha, power),
                     lambda: binary_floor(n, DESIGN_DISCORDANCE, alpha, power),
                     binary_floor_bounds(n, DESIGN_DISCORDANCE, alpha, power))
    scale = "" if ceiling == 1.0 else f", scaled to the metric's range [0, {ceiling:g}]"
    return Floor(n=int(n), mde=None if mde is None else mde * float(ceiling),
                 basis=f"design (discordance {DESIGN_DISCORDANCE}{scale})", discordance=DESIGN_DISCORDANCE, sd=None,
                 alpha=alpha, power=power)


def metric_sd(scores: Values, ceiling: float = 1.0) -> tuple[float, str]:
    """(sd, basis) of a metric's per-item scores for a floor over different items: the observed sample sd,
    at most the bound `ceiling` / 2 (a score in [0, ceiling] has variance at most ceiling^2 / 4); the bound
    itself where the scores do not vary (within `SD_TOLERANCE`) or are fewer than two."""
    bound = float(ceiling) / 2
    sd = sample_sd(np.asarray(scores, dtype=float)[np.isfinite(np.asarray(scores, dtype=float))])
    if sd == 0.0:
        return bound, "bound"
    return min(sd, bound), "observed"


def observed_floor(a: Sequence[float], b: Sequence[float], alpha: float = DEFAULT_ALPHA,
                   power: float = DEFAULT_POWER) -> Floor:
    """Floor from two runs' paired per-item scores: their discordance for 0/1 scores, else their sd."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError("paired scores need the same items")
    n = int(x.size)
    if np.all(np.isin(x, (0.0, 1.0))) and np.all(np.isin(y, (0.0, 1.0))):
        psi = float(np.mean(x != y)) if n else 0.0
        return Floor(n=n, mde=binary_floor(n, psi, alpha, power), basis="observed discordance", discordance=psi,
                     sd=None, alpha=alpha, power=power)
    sd = sample_sd(x - y)
    return Floor(n=n, mde=sd_floor(n, sd, alpha, power), basis="observed sd", discordance=None, sd=sd,
                 alpha=alpha, power=power)


def two_sample_floor(n1: int, n2: int, sd: float = 0.5, alpha: float = DEFAULT_ALPHA,
                     power: float = DEFAULT_POWER) -> float | None:
    """Floor of a difference between two means over different items (a step along a length curve or
    across heatmap cells): the two-sided two-sample t-test with pooled per-item sd `sd` (0.5: the
    largest a 0/1 metric has) and n1 + n2 - 2 degrees of freedom reaches `power` at this difference."""
    if n1 < 1 or n2 < 1 or n1 + n2 < 3 or not sd > 0 or not np.isfinite(sd):
        return None
    from scipy import stats

    df = n1 + n2 - 2
    crit = stats.t.ppf(1 - alpha / 2, df)
    scale = sd * np.sqrt(1 / n1 + 1 / n2)

    def power_at(d: float) -> float:
        nc = d / scale
        return float(np.nan_to_num(stats.nct.sf(crit, df, nc), nan=1.0) + np.nan_to_num(stats.nct.cdf(-crit, df, nc), nan=0.0))

    return _solve(power_at, 100 * scale, power)


def step_floors(counts: Sequence[int], values: Sequence[float | None], sd: float = 0.5,
                alpha: float = DEFAULT_ALPHA) -> list[dict[str, float | bool | None]]:
    """For each step between neighbouring points (counts, means): its size, its floor at per-item sd `sd` (the
    metric's own, `metric_sd`; 0.5 is the bound of a 0/1 metric), and whether it is below the floor (a step
    the items cannot tell from no change)."""
    out = []
    for (n0, v0), (n1, v1) in zip(zip(counts, values), zip(counts[1:], values[1:])):
        floor = two_sample_floor(int(n0), int(n1), sd, alpha)
        step = None if v0 is None or v1 is None else float(v1) - float(v0)
        below = None if step is None else (floor is None or abs(step) < floor)
        out.append({"step": step, "floor": floor, "below_floor": below})
    return out
