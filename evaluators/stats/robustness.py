"""Modality robustness: how a model's score moves across text / mixed / image background noise.

For one model, take its score (e.g. P@1) on the three background columns and compute the mean
and the sample standard deviation (N - 1 in the denominator) across the three. Scores are in the
metric's own units (0..1). Typing, checked in this order:

1. ``stable``                    sd <= STABLE_MAX_SD
2. ``disrupted by mixed noise``  mixed < min(text, image) - MIXED_DROP_MIN
3. ``modality-biased (text)`` / ``modality-biased (image)``
                                 |text - image| >= MODALITY_GAP_MIN (named after the better column)
4. ``variable``                  none of the above (spread without a clear pattern)

The seed gives the three groups but no numbers; these thresholds are this project's choice.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from mmbench.evaluators.stats._base import StatResult

MODALITIES = ("text", "mixed", "image")
STABLE_MAX_SD = 0.05       # sd across the three columns at or below this: stable
MIXED_DROP_MIN = 0.05      # mixed this far below both pure columns: disrupted by mixed noise
MODALITY_GAP_MIN = 0.10    # text and image this far apart: modality-biased

THRESHOLDS = {"STABLE_MAX_SD": STABLE_MAX_SD, "MIXED_DROP_MIN": MIXED_DROP_MIN, "MODALITY_GAP_MIN": MODALITY_GAP_MIN}


@dataclass
class ModalityRobustness(StatResult):
    scores: dict[str, float]
    mean: float
    sd: float                 # sample sd, ddof = 1
    kind: str
    reason: str
    thresholds: dict[str, float]


def modality_robustness(scores: Mapping[str, float], *, stable_max_sd: float = STABLE_MAX_SD,
                        mixed_drop_min: float = MIXED_DROP_MIN, modality_gap_min: float = MODALITY_GAP_MIN) -> ModalityRobustness:
    """Mean, sample sd and type of one model's scores on the text / mixed / image columns."""
    missing = [m for m in MODALITIES if m not in scores or scores[m] is None]
    if missing:
        raise ValueError(f"modality_robustness: no score for {missing}")
    vals = {m: float(scores[m]) for m in MODALITIES}
    arr = np.array([vals[m] for m in MODALITIES])
    mean, sd = float(arr.mean()), float(arr.std(ddof=1))
    gap = vals["text"] - vals["image"]
    drop = min(vals["text"], vals["image"]) - vals["mixed"]
    if sd <= stable_max_sd:
        kind, reason = "stable", f"sd {sd:.3f} <= {stable_max_sd}"
    elif drop > mixed_drop_min:
        kind, reason = "disrupted by mixed noise", f"mixed is {drop:.3f} below the weaker pure column (> {mixed_drop_min})"
    elif abs(gap) >= modality_gap_min:
        better = "text" if gap > 0 else "image"
        kind, reason = f"modality-biased ({better})", f"|text - image| = {abs(gap):.3f} >= {modality_gap_min}"
    else:
        kind, reason = "variable", f"sd {sd:.3f} > {stable_max_sd} without a mixed drop or a modality gap"
    return ModalityRobustness(scores=vals, mean=mean, sd=sd, kind=kind, reason=reason,
                              thresholds={"STABLE_MAX_SD": stable_max_sd, "MIXED_DROP_MIN": mixed_drop_min,
                                          "MODALITY_GAP_MIN": modality_gap_min})
