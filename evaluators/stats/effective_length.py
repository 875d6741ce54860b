"""Effective context: how far along the tokens a model actually consumed its score holds up.

Nominal length bins are the same for every model, but what a model consumes is not (images resized, frames
capped, documents middle-truncated to its window). This module works on the consumed length of each item
(the seen tokens of its relevant document, from seen.parquet) and never on the nominal bin.

Definitions (tolerance `tol`, window `k` items, both stated in every result):

* Items are ordered by consumed length. The *reference* is the mean score of the shortest `k` items (the
  score at short lengths).
* A *window* is `k` consecutive items in that order; it *holds* when its mean score is at least
  reference − tol.
* The first window that does not hold contains the drop. Inside it, the drop is placed at the split that
  maximises the standardised difference of means, (mean left − mean right)·sqrt(n_l·n_r/k), the statistic
  of binary segmentation (Scott and Knott 1974; Vostrikova 1981). The *effective context* is the consumed
  length of the last item before that split; `first_drop_tokens` is the next item's. If every window holds,
  the effective context is the longest consumed length seen: the model never dropped within the data, so
  the true value may be longer (`censored`).

With a score that steps down at length L, the first failing window holds the step, and the split finds it
at the last item before L whatever bins the items were built in. Windows of k
items have equal sampling error; choose tol above that noise (for 0/1 scores with success rate p the standard
error of a window mean is sqrt(p(1-p)/k)), otherwise chance dips end the effective context early.

The curve for plotting groups items by consumed length in half-doubling (factor sqrt 2) steps, merging steps
with fewer than `min_items` items into their longer neighbour.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

DEFAULT_TOLERANCE = 0.05
DEFAULT_WINDOW = 20
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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


def effective_length(tokens: Sequence[float], scores: Sequence[float], tolerance: float = DEFAULT_TOLERANCE,
                     window: int = DEFAULT_WINDOW, min_items: int = DEFAULT_MIN_ITEMS) -> EffectiveLength:
    """The effective context of one run from its items' consumed lengths and scores (NaN items left out)."""
    if not (tolerance >= 0 and math.isfinite(tolerance)):
        raise ValueError(f"tolerance must be a finite non-negative number, not {tolerance!r}")
    if window < 1:
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
    curve = length_curve(t, s, min_items)
    if n < window:
        return EffectiveLength(None, False, None, None, tolerance, window, n, int(t.max()) if n else None, curve)
    sums = np.concatenate([[0.0], np.cumsum(s)])
    means = (sums[window:] - sums[:-window]) / window      # means[j]: items j .. j+window-1
    reference = float(means[0])
    fails = np.flatnonzero(means < reference - tolerance - 1e-12)
    if len(fails) == 0:
        return EffectiveLength(int(t[-1]), True, None, reference, tolerance, window, n, int(t[-1]), curve)
    j = int(fails[0])                      # the first failing window: items j .. j+window-1
    last = j + _split(s[j:j + window])     # the drop's place inside it
    return EffectiveLength(int(t[last]), False, int(t[last + 1]), reference, tolerance, window, n, int(t[-1]), curve)


def _split(w: np.ndarray) -> int:
    """Index of the last item before the change inside window `w`: the split that maximises the standardised
    difference of means (left - right) * sqrt(nl * nr / n), the statistic of binary segmentation."""
    n = len(w)
    if n < 2:
        return 0
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


def run_effective_length(per_query: Any, seen: Any, metric: str, tolerance: float = DEFAULT_TOLERANCE,
                         window: int = DEFAULT_WINDOW) -> EffectiveLength:
    """`effective_length` of one run's scored items (failed items, with an error or no score, left out)."""
    ok = per_query["error"].isna().to_numpy() if "error" in per_query.columns else np.ones(len(per_query), bool)
    tokens = item_consumed_tokens(per_query, seen)
    scores = per_query[metric].to_numpy(dtype=float) if metric in per_query.columns else np.full(len(per_query), np.nan)
    return effective_length(tokens[ok], scores[ok], tolerance, window)
