"""Items to settle an inconclusive paired comparison: how many items the paired t-test needs to decide it.

For a planning difference D and the per-item spread of the differences, the number of items n at which the
two-sided paired t-test at level `level` rejects with probability `power` is the smallest n with

    P(|T| > t_{1-level/2, n-1}) >= power,   T ~ nct(n - 1, D sqrt(n) / sigma)

(the same noncentral-t power as the resolution floors, `floors.t_test_power`; Cohen 1988, ch. 2).

D is a difference the reader can see, never the observed one (taking the observed difference as the truth is
post-hoc power: the stated number then settles anywhere from 4 % to 93 % of pairs, and two equal models get a
number of items though nothing separates them): by default the pair's resolution floor (the difference its
items detect with 80 % power at the compare's alpha), or the one the user names (`--settle-at D`). sigma comes
from the pair's observed discordance psi for 0/1 metrics (sigma^2 = psi - D^2, Connor 1987) or from the sample sd
of the differences for continuous metrics. The answer is conditional on that spread and is printed with its
assumption. With m pairwise comparisons the level is alpha / m (Bonferroni): at that p a pair is rejected by
Holm's procedure whatever the other pairs' p-values are.

Nothing is stated for a pair of which both models are at chance (neither beats the score of a random ranking,
one-sided t-test at 0.05), or with fewer than MIN_DISCORDANT items on which the two differ: their spread is
too poorly known for a number of items to mean anything.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mmbench.evaluators.stats._base import StatResult, as_pair
from mmbench.evaluators.stats.floors import DEFAULT_POWER, t_test_power

MAX_ITEMS = 10_000_000
MIN_DISCORDANT = 10      # items on which the two models differ, at least, before a number of items is stated
CHANCE_LEVEL = 0.05      # one-sided level of "beats chance"


@dataclass
class Settle(StatResult):
    """Items the pair would need in all (`n_needed`) and beyond those it has (`n_more`) for a true difference
    `planning_diff`; None: see `reason` (both at chance, too few discordant items, no spread) or more than MAX_ITEMS."""

    n: int
    n_needed: int | None
    n_more: int | None
    mean_diff: float
    sd: float | None
    discordance: float | None
    basis: str
    level: float
    power: float
    available: int | None = None      # items the task holds (None: unknown)
    task_has_enough: bool | None = None
    planning_diff: float | None = None    # the true difference the number is for
    planning_basis: str = ""              # "resolution floor" or "--settle-at"
    discordant: int = 0                   # items on which the two models differ
    reason: str | None = None             # why no number is stated


def smallest_n(delta: float, sd: float, level: float, power: float = DEFAULT_POWER, n_max: int = MAX_ITEMS) -> int | None:
    """Smallest n >= 2 at which the two-sided paired t-test at `level` has `power` against mean `delta`, sd `sd`."""
    if delta == 0 or not sd > 0 or not np.isfinite(sd):
        return None
    power_at = lambda n: t_test_power(abs(delta), n, sd, level)  # noqa: E731
    if power_at(n_max) < power:
        return None
    low, high = 2, 2
    while power_at(high) < power:
        low, high = high, min(2 * high, n_max)
    while low < high:  # power grows with n: bisect for the first n that reaches it
        mid = (low + high) // 2
        if power_at(mid) >= power:
            high = mid
        else:
            low = mid + 1
    return high


def beats_chance(x: np.ndarray, chance: float) -> bool:
    """Whether per-item scores `x` are above the chance score `chance` (one-sided t-test at CHANCE_LEVEL)."""
    from scipy import stats

    d = x - chance
    if d.size < 2 or not np.std(d) > 0:
        return bool(d.size and d.mean() > 0)
    return bool(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue < CHANCE_LEVEL)


def items_to_settle(a: Sequence[float], b: Sequence[float], *, level: float, power: float = DEFAULT_POWER,
                    available: int | None = None, settle_at: float | None = None, floor_alpha: float | None = None,
                    chance: float | None = None) -> Settle:
    """Items needed to settle the paired comparison of per-item scores `a` and `b` at `level` for a true difference
    `settle_at` (default: the pair's resolution floor at `floor_alpha`, default `level`); see module doc.
    `available`: the items the task holds; `chance`: the metric's score under a random ranking."""
    from mmbench.evaluators.stats.floors import observed_floor

    x, y = as_pair(a, b)
    d = x - y
    delta = float(d.mean())
    discordant = int(np.sum(np.abs(d) > 1e-12))
    binary = bool(np.all(np.isin(x, (0.0, 1.0))) and np.all(np.isin(y, (0.0, 1.0))))
    psi = float(np.mean(d != 0)) if binary else None
    if settle_at is None:
        planning, basis = observed_floor(x.tolist(), y.tolist(), alpha=floor_alpha or level, power=power).mde, "resolution floor"
    else:
        planning, basis = abs(float(settle_at)), "--settle-at"
    reason = None
    if chance is not None and not beats_chance(x, chance) and not beats_chance(y, chance):
        reason = "both models at chance"
    elif discordant < MIN_DISCORDANT:
        reason = f"fewer than {MIN_DISCORDANT} items on which the two differ ({discordant})"
    elif planning is None or not planning > 0:
        reason = "no planning difference (the pair's floor is undefined)"
    if binary:
        assert psi is not None
        p2 = (planning or 0.0) ** 2
        sd, sd_basis, disc = float(np.sqrt(max(psi - p2, 0.0))), "observed discordance", psi
        if reason is None and not psi > p2:
            reason = f"a difference of {planning:.4f} cannot occur with discordance {psi:.3f}"
    else:
        sd, sd_basis, disc = (float(np.std(d, ddof=1)) if d.size > 1 else 0.0), "observed sd", None
    needed = None if reason is not None or planning is None else smallest_n(planning, sd, level, power)
    more = None if needed is None else max(needed - int(d.size), 0)
    return Settle(n=int(d.size), n_needed=needed, n_more=more, mean_diff=delta, sd=sd, discordance=disc,
                  basis=sd_basis, level=float(level), power=float(power), available=available,
                  task_has_enough=None if available is None or needed is None else bool(needed <= available),
                  planning_diff=planning, planning_basis=basis, discordant=discordant, reason=reason)
