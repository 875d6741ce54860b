"""Items to settle an inconclusive paired comparison: how many items the paired t-test needs to decide it.

For an observed mean paired difference delta and the per-item spread of the differences, the number
of items n at which the two-sided paired t-test at level `level` rejects with probability `power` is
the smallest n with

    P(|T| > t_{1-level/2, n-1}) >= power,   T ~ nct(n - 1, delta sqrt(n) / sigma)

(the same noncentral-t power as the resolution floors, `floors.t_test_power`; Cohen 1988, ch. 2).
sigma comes from the pair's observed discordance psi for 0/1 metrics (sigma^2 = psi - delta^2,
Connor 1987) or from the sample sd of the differences for continuous metrics. The answer is
conditional: it assumes the true difference and spread equal the observed ones. With m pairwise
comparisons the level is alpha / m (Bonferroni): at that p a pair is rejected by Holm's procedure
whatever the other pairs' p-values are, so the stated number settles the pair inside compare's
family as well as alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mmbench.evaluators.stats._base import StatResult, as_pair
from mmbench.evaluators.stats.floors import DEFAULT_POWER, t_test_power

MAX_ITEMS = 10_000_000


@dataclass
class Settle(StatResult):
    """Items the pair would need in all (`n_needed`) and beyond those it has (`n_more`); None: no observed
    difference (delta = 0) or more than MAX_ITEMS."""

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


def items_to_settle(a: Sequence[float], b: Sequence[float], *, level: float, power: float = DEFAULT_POWER,
                    available: int | None = None) -> Settle:
    """Items needed to settle the paired comparison of per-item scores `a` and `b` at `level` (see module doc);
    `available`: the items the task holds, to say whether it has that many."""
    x, y = as_pair(a, b)
    d = x - y
    delta = float(d.mean())
    binary = bool(np.all(np.isin(x, (0.0, 1.0))) and np.all(np.isin(y, (0.0, 1.0))))
    if binary:
        psi = float(np.mean(d != 0))
        sd, basis, disc = float(np.sqrt(max(psi - delta * delta, 0.0))), "observed discordance", psi
    else:
        sd, basis, disc = (float(np.std(d, ddof=1)) if d.size > 1 else 0.0), "observed sd", None
    needed = smallest_n(delta, sd, level, power)
    more = None if needed is None else max(needed - int(d.size), 0)
    return Settle(n=int(d.size), n_needed=needed, n_more=more, mean_diff=delta, sd=sd, discordance=disc, basis=basis,
                  level=float(level), power=float(power), available=available,
                  task_has_enough=None if available is None or needed is None else bool(needed <= available))
