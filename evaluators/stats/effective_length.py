"""Effective context: how far along the tokens a model actually consumed its score holds up.

Nominal length bins are the same for every model, but what a model consumes is not (images resized, frames
capped, documents middle-truncated to its window). This module works on the consumed length of each item
(the seen tokens of its relevant document, from seen.parquet) and never on the nominal bin.

Definitions (tolerance `tol`, window `k` items, both stated in every result):

* Items are ordered by consumed length. The *reference* is the mean score of the shortest `k` items (the
  score at short lengths). By default `k` is a tenth of the items, at least 20 (`default_window`).
* A *window* is `k` consecutive items in that order; it *holds* when its mean score is at least
  reference - tol.
* The first window that does not hold contains the drop. Inside it, the drop is placed at the split that
  maximises the standardised difference of means, (mean left - mean right)·sqrt(n_l·n_r/k), the statistic
  of binary segmentation (Scott and Knott 1974; Vostrikova 1981). The *effective context* is the consumed
  length of the last item before that split; `first_drop_tokens` is the next item's. If every window holds,
  the effective context is the longest consumed length seen: the model never dropped by more than `tol`
  within the data, so the true value may be longer (`censored`).

The tolerance, by default, is the *resolution floor* of the comparison made: a mean of `k` items against
another mean of `k` items (the reference), i.e. the difference a two-sided two-sample t-test at level
`alpha` (0.05) detects with probability `power` (0.8) (`floors.two_sample_floor`), with the per-item sd
observed over all the run's scored items. That sd includes any drop, so it errs large and the floor is not
understated; where the scores do not vary it is the design value 0.5 (the largest a 0/1 score has). A
window that falls less than the floor below the reference is within what `k` items can tell from no change,
so chance dips do not end the effective context; a drop of the floor or more ends it. At k = 20 and sd 0.5
the floor is 0.45, at k = 60 it is 0.26, at k = 200 it is 0.14: more items resolve smaller drops. A fixed
`tolerance=` replaces the floor (stated as fixed).

With a score that steps down at length L, the first failing window holds the step (the floor is below 1),
and the split finds it at the last item before L whatever bins the items were built in.

The curve for plotting groups items by consumed length in half-doubling (factor sqrt 2) steps, merging steps
with fewer than `min_items` items into their longer neighbour.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from mmbench.evaluators.stats.floors import DEFAULT_ALPHA, DEFAULT_POWER, two_sample_floor

MIN_WINDOW = 20          # the smallest default window (and reference), in items
WINDOW_SHARE = 10        # the default window is one item in WINDOW_SHARE, at least MIN_WINDOW
DESIGN_SD = 0.5          # the per-item sd the floor assumes where the scores do not vary
FLOOR = "resolution floor"
FIXED = "fixed"
DEFAULT_MIN_ITEMS = 5
STEPS_PER_DOUBLING = 2


@dataclass
class EffectiveLength:
    effective_tokens: int | None       # None: fewer items than one window
    censored: bool                     # True: the score never dropped, the model may reach further
    first_drop_tokens: int | None      # consumed length of the first item past the effective context
    reference: float | None
    tolerance: float
    window: int
    n_items: int
    max_tokens: int | None
    curve: list[dict[str, Any]] = field(default_factory=list)   # {low, high, tokens, value, n} per length step
    tolerance_basis: str = FIXED       # FLOOR: the resolution floor of a window against the reference; FIXED: given
    sd: float | None = None            # the per-item sd the floor was computed with (FLOOR only)
    sd_basis: str | None = None        # "observed" (all scored items) or "design" (scores that do not vary)
    alpha: float | None = None
    power: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_window(n_items: int) -> int:
    """A tenth of the items, at least MIN_WINDOW: larger runs resolve smaller drops (the floor falls as 1/sqrt k)."""
    return max(MIN_WINDOW, int(n_items) // WINDOW_SHARE)


def window_floor(window: int, scores: Sequence[float], alpha: float = DEFAULT_ALPHA,
                 power: float = DEFAULT_POWER) -> tuple[float, float, str]:
    """(floor, sd, sd basis): the resolution floor of a `window`-item mean against a `window`-item reference,
    with the sd of `scores` (ddof 1), or DESIGN_SD where they do not vary."""
    s = np.asarray(scores, dtype=float)
    sd = float(np.std(s, ddof=1)) if len(s) > 1 else 0.0
    basis = "observed"
    if not sd > 0:
        sd, basis = DESIGN_SD, "design"
    floor = two_sample_floor(window, window, sd, alpha, power)
    if floor is None:
        raise ValueError(f"a window of {window} item has no resolution floor: give a window of at least 2 items "
                         "or a fixed tolerance")
    return floor, sd, basis


def tolerance_statement(e: Mapping[str, Any]) -> str:
    """How the tolerance of a result (`EffectiveLength.to_dict()`) was chosen, in words."""
    if e.get("tolerance_basis") != FLOOR:
        return f"{e['tolerance']:g} (a fixed tolerance)"
    return (f"{e['tolerance']:.3f} (resolution floor of {e['window']} items against {e['window']}: two-sample t-test, "
            f"alpha {e['alpha']:g}, power {e['power']:g}, sd {e['sd']:.3f} "
            f"{'observed' if e['sd_basis'] == 'observed' else 'assumed: the scores do not vary'})")


def length_curve(tokens: Sequence[float], scores: Sequence[float], min_items: int = DEFAULT_MIN_ITEMS,
                 steps_per_doubling: int = STEPS_PER_DOUBLING) -> list[dict[str, Any]]:
    """Mean score per geometric step of consumed length: {low, high (item lengths), tokens (median), value, n}."""
    t = np.asarray(tokens, dtype=float)
    s = np.asarray(scores, dtype=float)
    keep = np.isfinite(t) & np.isfinite(s) & (t > 0)
    t, s = t[keep], s[keep]
    if len(t) == 0:
        return []
    step = np.floor(np.log2(t) * steps_per_doubling).astype(int)
    groups: list[np.ndarray] = []
    pending = np.zeros(0, dtype=int)
    for k in np.unique(step):
        pending = np.concatenate([pending, np.flatnonzero(step == k)])
        if len(pending) >= min_items:
            groups.append(pending)
            pending = np.zeros(0, dtype=int)
    if len(pending):
        if groups:
            groups[-1] = np.concatenate([groups[-1], pending])
        else:
            groups.append(pending)
    return [{"low": int(t[g].min()), "high": int(t[g].max()), "tokens": float(np.median(t[g])),
             "value": float(s[g].mean()), "n": int(len(g))} for g in groups]


def effective_length(tokens: Sequence[float], scores: Sequence[float], tolerance: float | None = None,
                     window: int | None = None, min_items: int = DEFAULT_MIN_ITEMS, alpha: float = DEFAULT_ALPHA,
                     power: float = DEFAULT_POWER) -> EffectiveLength:
    """The effective context of one run from its items' consumed lengths and scores (NaN items left out).
    `tolerance` None: the resolution floor of the window against the reference (at `alpha`, `power`); a number:
    that fixed tolerance. `window` None: `default_window` of the scored items."""
    if tolerance is not None and not (tolerance >= 0 and math.isfinite(tolerance)):
        raise ValueError(f"tolerance must be a finite non-negative number, not {tolerance!r}")
    if window is not None and window < 1:
        raise ValueError(f"window must be at least 1 item, not {window!r}")
    t = np.asarray(tokens, dtype=float)
    s = np.asarray(scores, dtype=float)
    if t.shape != s.shape:
        raise ValueError(f"{len(t)} lengths for {len(s)} scores")
    keep = np.isfinite(t) & np.isfinite(s) & (t > 0)
    t, s = t[keep], s[keep]
    order = np.lexsort((s, t))   # by length; ties by score so the order does not depend on the input order
    t, s = t[order], s[order]
    n = len(t)
    window = default_window(n) if window is None else int(window)
    if tolerance is None:
        tolerance, sd, sd_basis = window_floor(window, s, alpha, power)
        how: dict[str, Any] = {"tolerance_basis": FLOOR, "sd": sd, "sd_basis": sd_basis, "alpha": alpha, "power": power}
    else:
        how = {"tolerance_basis": FIXED}
    tolerance = float(tolerance)
    curve = length_curve(t, s, min_items)
    if n < window:
        return EffectiveLength(None, False, None, None, tolerance, window, n, int(t.max()) if n else None, curve, **how)
    sums = np.concatenate([[0.0], np.cumsum(s)])
    means = (sums[window:] - sums[:-window]) / window      # means[j]: items j .. j+window-1
    reference = float(means[0])
    fails = np.flatnonzero(means < reference - tolerance - 1e-12)
    if len(fails) == 0:
        return EffectiveLength(int(t[-1]), True, None, reference, tolerance, window, n, int(t[-1]), curve, **how)
    j = int(fails[0])                      # the first failing window: items j .. j+window-1
    last = j + _split(s[j:j + window])     # the drop's place inside it
    return EffectiveLength(int(t[last]), False, int(t[last + 1]), reference, tolerance, window, n, int(t[-1]), curve,
                           **how)


def _split(w: np.ndarray) -> int:
    """Index of the last item before the change inside window `w`: the split that maximises the standardised
    difference of means (left - right) * sqrt(nl * nr / n), the statistic of binary segmentation. A window of
    one item is the change itself: -1, the item before it (the first window, the reference, never fails)."""
    n = len(w)
    if n < 2:
        return -1
    left = np.cumsum(w)[:-1]
    nl = np.arange(1, n)
    nr = n - nl
    stat = (left / nl - (w.sum() - left) / nr) * np.sqrt(nl * nr / n)
    return int(np.argmax(stat))


def item_consumed_tokens(per_query: Any, seen: Any) -> np.ndarray:
    """Per item (row of per_query): the mean seen tokens of its relevant documents as the model consumed them
    (seen.parquet, role 'document'); NaN where none of them was encoded."""
    if seen is None or len(seen) == 0 or "seen_tokens" not in seen.columns:
        return np.full(len(per_query), np.nan)
    docs = seen[seen["role"] == "document"] if "role" in seen.columns else seen
    by_id = dict(zip(docs["doc_id"].astype(str), docs["seen_tokens"].astype(float)))
    out = []
    for relevant in per_query["relevant_ids"]:
        vals = [by_id[str(d)] for d in (list(relevant) if relevant is not None else []) if str(d) in by_id]
        out.append(float(np.mean(vals)) if vals else np.nan)
    return np.asarray(out, dtype=float)


def run_effective_length(per_query: Any, seen: Any, metric: str, tolerance: float | None = None,
                         window: int | None = None) -> EffectiveLength:
    """`effective_length` of one run's scored items (failed items, with an error or no score, left out);
    `tolerance` and `window` as there (None: the resolution floor, a tenth of the items)."""
    ok = per_query["error"].isna().to_numpy() if "error" in per_query.columns else np.ones(len(per_query), bool)
    tokens = item_consumed_tokens(per_query, seen)
    scores = per_query[metric].to_numpy(dtype=float) if metric in per_query.columns else np.full(len(per_query), np.nan)
    return effective_length(tokens[ok], scores[ok], tolerance, window)
