"""The fresh-draw overfitting test: is a model's score on the public draw higher than fresh draws allow?

A board publishes one draw of a task and keeps a secret seed. Fresh draws built with seeds derived from
that secret are new, equally valid samples of the same task. A model that did not adapt to the public
draw scores on it like on any other draw: its public score x_0 and its fresh scores x_1..x_F are then
exchangeable draws of one distribution. The gap g = x_0 - mean(x_1..x_F) has expectation 0 and, for
normal scores with between-draw sd sigma, g / (s sqrt(1 + 1/F)) follows Student's t with F - 1 degrees
of freedom (s: the sd of the fresh scores); this is the classical prediction interval for one new
observation (e.g. Hahn & Meeker 1991, "Statistical Intervals", ch. 4).

* expected gap from draw variance alone: 0 ± t_{1-alpha/2, F-1} s sqrt(1 + 1/F) (two-sided 1 - alpha);
* the gap's CI: g ± the same half-width;
* flagged (overfit) when g lies above that interval: the public score is higher than draw variance
  explains. A fair model is flagged with probability alpha / 2; a gap below the interval is reported,
  not flagged (a model that is worse on the public draw did not overfit it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from mmbench.evaluators.stats._base import StatResult, as_vector

DEFAULT_ALPHA = 0.05


@dataclass
class OverfitGap(StatResult):
    public: float
    fresh_mean: float
    fresh_sd: float
    n_fresh: int
    gap: float
    half_width: float           # of the interval of gaps draw variance alone gives
    expected_low: float
    expected_high: float
    ci_low: float
    ci_high: float
    t: float | None
    p_value: float | None       # two-sided
    flagged: bool
    alpha: float
    method: str = "prediction interval of one draw's score from F fresh draws, Student t with F - 1 df"


def overfit_gap(public: float, fresh: Sequence[float], alpha: float = DEFAULT_ALPHA) -> OverfitGap:
    """The public − fresh gap and whether draw variance alone explains it (see module doc)."""
    x = as_vector(fresh, "fresh")
    if x.size < 2:
        raise ValueError(f"the overfitting test needs at least 2 fresh draws, got {x.size}")
    if not 0 < alpha < 1:
        raise ValueError("alpha must lie strictly between 0 and 1")
    f = int(x.size)
    mean, sd = float(x.mean()), float(np.std(x, ddof=1))
    gap = float(public) - mean
    scale = sd * np.sqrt(1 + 1 / f)
    half = float(stats.t.ppf(1 - alpha / 2, f - 1) * scale)
    if scale > 0:
        t = gap / scale
        p = float(2 * stats.t.sf(abs(t), f - 1))
    else:
        t, p = None, (1.0 if gap == 0 else 0.0)
    return OverfitGap(public=float(public), fresh_mean=mean, fresh_sd=sd, n_fresh=f, gap=gap, half_width=half,
                      expected_low=-half, expected_high=half, ci_low=gap - half, ci_high=gap + half,
                      t=t, p_value=p, flagged=bool(gap > half), alpha=float(alpha))
