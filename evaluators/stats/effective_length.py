"""Effective context: how far along the tokens a model actually consumed its score holds up, within the task's design.

Nominal length bins are the same for every model, but what a model consumes is not (images resized or unseen,
frames capped, documents middle-truncated to its window). This module works on the consumed length of each item
(the seen tokens of its relevant document, from seen.parquet), and it reads that length *within each stratum of
the task's design* (`TaskSpec.strata`: Visual Grounding's anchor kind x background, Multi-Source Reasoning's
dataset x difficulty, ...): across strata, consumed length also tracks what the items are (a text anchor in an
image-only haystack consumes a few tokens for a text-only model), so ordering all items by length reads the
subset mix as length.

Definitions (significance `alpha`, power `power`, reference size `window`, all stated in every result):

1. *Points.* Items are grouped by consumed length in half-doubling steps (factor sqrt 2; steps with fewer than
   `min_items` items merge into their longer neighbour). Items of equal consumed length always share a point:
   they are never put in an order (a truncating model has most items at exactly its window).
2. *Reference per stratum.* Each stratum's reference is the mean score of its items at its own shortest lengths:
   the shortest whole length groups that hold at least `window` items (default a tenth of the stratum, at least
   `MIN_WINDOW`). A stratum with fewer items than `window` cannot fill its reference and is left out (counted).
3. *At chance.* A stratum whose reference is not above its items' random-ranking expectation (one-sided z-test
   on the reference mean at `alpha` Bonferroni-corrected over the strata, per-item sd the stratum's own) can
   show no drop and is left out of the curve; if every stratum is, the run has *no effective context (at
   chance at the shortest lengths)*.
4. *The task's curve.* At each point the drop of each stratum is its mean there minus its reference; the task's
   drop is their item-weighted mean, D = sum n_s d_s / sum n_s, with variance
   sum (n_s / N)^2 sd_s^2 (1/n_s + 1/r_s) (r_s: the stratum's reference items; sd_s its observed per-item sd,
   or the bound c/2 of a metric in [0, c] where its scores do not vary, `floors.metric_sd`). The curve's value
   is the item-weighted reference plus D.
5. *The floor.* A point *holds* when D is no more than its resolution floor below 0: the drop that a two-sided
   z-test at `alpha` detects with probability `power`, (z_{1-alpha/2} + z_power) * sd(D). A fixed `tolerance`
   replaces the floor (stated as fixed).
6. *Effective context.* The first point that does not hold contains the drop. It is placed between two
   consumed lengths by binary segmentation (Scott and Knott 1974; Vostrikova 1981) of the items' residuals
   (score minus their stratum's reference) over that point and the one before, splitting only between distinct
   lengths: the *effective context* is the longest length before the split, `first_drop_tokens` the next one.
   If every point holds, the run has an effective context of *at least* the longest consumed length seen
   (`censored`).

`effective_bin` names the longest nominal length bin among the items the model read whole up to the effective
context (not truncated, no image or frame it cannot see): "at least 20,885 tokens consumed" of a model with its
own tokenizer is the 32k bin; a text model's items in image-only haystacks, where it reads only the anchor, name
no bin.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from mmbench.common.value_memo import remembered
from mmbench.evaluators.ordering import label_key
from mmbench.evaluators.stats.floors import DEFAULT_ALPHA, DEFAULT_POWER, metric_sd, normal_cdf

MIN_WINDOW = 10          # the smallest default reference, in items
WINDOW_SHARE = 10        # the default reference is one item of a stratum in WINDOW_SHARE, at least MIN_WINDOW
FLOOR = "resolution floor"
FIXED = "fixed"
DEFAULT_MIN_ITEMS = 5
STEPS_PER_DOUBLING = 2
# result kinds
DROP, AT_LEAST, AT_CHANCE, UNFILLED, NO_ITEMS = "drop", "at least", "at chance", "unfilled", "no items"


@dataclass
class EffectiveLength:
    status: str                        # DROP, AT_LEAST, AT_CHANCE, UNFILLED or NO_ITEMS
    effective_tokens: int | None       # None: no effective context (at chance, unfilled, no items)
    censored: bool                     # True: the score never dropped, the model may reach further
    first_drop_tokens: int | None      # consumed length of the first item past the effective context
    reference: float | None            # the item-weighted reference of the strata on the curve
    tolerance: float | None            # the floor (or fixed tolerance) at the deciding point; the largest if none failed
    window: int | None                 # the reference size asked for (None: a tenth of each stratum)
    n_items: int
    max_tokens: int | None
    curve: list[dict[str, Any]] = field(default_factory=list)   # {low, high, tokens, value, drop, floor, holds, n}
    tolerance_basis: str = FIXED       # FLOOR: the resolution floor of each point; FIXED: given
    alpha: float | None = None
    power: float | None = None
    strata_axes: list[str] = field(default_factory=list)
    strata: list[dict[str, Any]] = field(default_factory=list)  # {key, n, reference, reference_n, chance, sd, ...}
    effective_bin: str | None = None   # the longest nominal bin read whole up to the effective context
    n_strata_unfilled: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_window(n_items: int) -> int:
    """A tenth of a stratum's items, at least MIN_WINDOW: larger strata have a steadier reference."""
    return max(MIN_WINDOW, int(n_items) // WINDOW_SHARE)


def _steps(t: np.ndarray, min_items: int, steps_per_doubling: int) -> np.ndarray:
    """Each item's point: its half-doubling step of consumed length, thin steps merged into the longer one."""
    step = np.floor(np.log2(t) * steps_per_doubling).astype(int)
    point = np.zeros(len(t), dtype=int)
    pending: list[int] = []
    k = 0
    for s in np.unique(step):
        pending.append(int(s))
        if int(np.isin(step, pending).sum()) >= min_items:
            point[np.isin(step, pending)] = k
            k, pending = k + 1, []
    if pending:
        point[np.isin(step, pending)] = max(k - 1, 0)
    return point


def normal_quantile(p: float) -> float:
    """scipy's standard normal quantile at `p`, remembered per scipy version (a warm run then needs no scipy.stats)."""
    def compute() -> float:
        from scipy import stats

        return float(stats.norm.ppf(p))

    def valid(value: float | None) -> bool:
        """Whether `value` is the quantile at p: the normal CDF there (math.erfc, no scipy) gives p back, relative
        to the nearer tail's mass, to 1e-9."""
        if value is None or not (0 < p < 1 and math.isfinite(value)):
            return False
        tail, got = (p, normal_cdf(value)) if p <= 0.5 else (1 - p, normal_cdf(-value))
        return abs(got - tail) <= 1e-9 * tail

    value = remembered("norm.ppf", (p,), compute, valid)
    assert value is not None
    return value


def _stratum(key: str, t: np.ndarray, s: np.ndarray, c: np.ndarray, window: int | None, alpha: float,
             ceiling: float) -> dict[str, Any]:
    n = len(t)
    k = default_window(n) if window is None else int(window)
    out: dict[str, Any] = {"key": key, "n": n, "window": k, "filled": n >= k and n > 0}
    if not out["filled"]:
        return out
    lengths, counts = np.unique(t, return_counts=True)
    edge = lengths[int(np.searchsorted(np.cumsum(counts), k))]     # whole length groups up to k items
    ref = t <= edge
    sd, basis = metric_sd(s, ceiling)
    r, chance = float(s[ref].mean()), float(c[ref].mean())
    se = sd / math.sqrt(int(ref.sum()))
    out.update({"reference": r, "reference_n": int(ref.sum()), "reference_tokens": int(edge), "chance": chance,
                "sd": sd, "sd_basis": basis, "at_chance": bool(r - chance <= normal_quantile(1 - alpha) * se)})
    return out


def effective_length(tokens: Sequence[float] | np.ndarray, scores: Sequence[float] | np.ndarray,
                     strata: Sequence[str] | None = None, chance: Sequence[float] | np.ndarray | None = None,
                     tolerance: float | None = None,
                     window: int | None = None, min_items: int = DEFAULT_MIN_ITEMS, alpha: float = DEFAULT_ALPHA,
                     power: float = DEFAULT_POWER, ceiling: float = 1.0, bins: Sequence[str | None] | None = None,
                     whole: Sequence[bool] | np.ndarray | None = None,
                     strata_axes: Sequence[str] = ()) -> EffectiveLength:
    """The effective context of one run from its items' consumed lengths and scores (NaN items left out).
    `strata`: each item's stratum of the design (None: one); `chance`: each item's random-ranking score (None: 0);
    `tolerance` None: the resolution floor of each point (at `alpha`, `power`), a number: that fixed drop;
    `window` None: a tenth of each stratum; `ceiling`: the metric's range [0, c]; `bins`, `whole`: each item's
    nominal length bin and whether the model read it untruncated (for `effective_bin`)."""
    if tolerance is not None and not (tolerance >= 0 and math.isfinite(tolerance)):
        raise ValueError(f"tolerance must be a finite non-negative number, not {tolerance!r}")
    if window is not None and window < 1:
        raise ValueError(f"window must be at least 1 item, not {window!r}")
    t = np.asarray(tokens, dtype=float)
    s = np.asarray(scores, dtype=float)
    if t.shape != s.shape:
        raise ValueError(f"{len(t)} lengths for {len(s)} scores")
    n_all = len(t)
    key = np.asarray(["all"] * n_all if strata is None else [str(v) for v in strata], dtype=object)
    c = np.zeros(n_all) if chance is None else np.asarray(chance, dtype=float)
    b = np.asarray([None] * n_all if bins is None else list(bins), dtype=object)
    w = np.ones(n_all, bool) if whole is None else np.asarray(whole, dtype=bool)
    keep = np.isfinite(t) & np.isfinite(s) & (t > 0)
    t, s, key, c, b, w = t[keep], s[keep], key[keep], np.nan_to_num(c[keep]), b[keep], w[keep]
    how: dict[str, Any] = ({"tolerance_basis": FLOOR, "alpha": alpha, "power": power} if tolerance is None
                           else {"tolerance_basis": FIXED})
    base = dict(window=window, n_items=len(t), max_tokens=int(t.max()) if len(t) else None,
                strata_axes=list(strata_axes), **how)
    if len(t) == 0:
        return EffectiveLength(NO_ITEMS, None, False, None, None, tolerance, **base)
    names = sorted(set(key))   # the at-chance tests are Bonferroni-corrected over the strata
    per = [_stratum(k, t[key == k], s[key == k], c[key == k], window, alpha / len(names), ceiling) for k in names]
    unfilled = sum(not p["filled"] for p in per)
    on_curve = [p for p in per if p["filled"] and not p["at_chance"]]
    base.update(strata=per, n_strata_unfilled=unfilled)
    if not any(p["filled"] for p in per):
        return EffectiveLength(UNFILLED, None, False, None, None, tolerance, **base)
    if not on_curve:
        return EffectiveLength(AT_CHANCE, None, False, None, None, tolerance, **base)
    use = np.isin(key, [p["key"] for p in on_curve])
    t, s, key, b, w = t[use], s[use], key[use], b[use], w[use]
    info = {p["key"]: p for p in on_curve}
    resid = s - np.array([info[k]["reference"] for k in key])
    reference = float(sum(p["n"] * p["reference"] for p in on_curve) / sum(p["n"] for p in on_curve))
    point = _steps(t, min_items, STEPS_PER_DOUBLING)
    curve = [_point(t, resid, key, point == g, info, reference, tolerance, alpha, power) for g in np.unique(point)]
    base.update(curve=curve, max_tokens=int(t.max()))
    failed = [g for g, p in enumerate(curve) if not p["holds"]]
    if not failed:
        return EffectiveLength(AT_LEAST, int(t.max()), True, None, reference, curve[-1]["floor"],
                               effective_bin=_longest_bin(b, w, t <= t.max()), **base)
    g = failed[0]
    span = (point == g) | (point == g - 1)
    last, first = _split(t[span], resid[span])
    if last is None:   # one length in the span: the drop is at it; the context before it is what came earlier
        before = t[point < g]
        last = int(before.max()) if len(before) else min(p["reference_tokens"] for p in on_curve)
    return EffectiveLength(DROP, int(last), False, int(first), reference, curve[g]["floor"],
                           effective_bin=_longest_bin(b, w, t <= last), **base)


def _point(t: np.ndarray, resid: np.ndarray, key: np.ndarray, m: np.ndarray, info: Mapping[str, dict],
           reference: float, tolerance: float | None, alpha: float, power: float) -> dict[str, Any]:
    """One point of the task's curve: the item-weighted drop of its strata against their references and its floor."""
    n = int(m.sum())
    drop, var = 0.0, 0.0
    for k in sorted(set(key[m])):
        mk = m & (key == k)
        nk, p = int(mk.sum()), info[k]
        drop += nk / n * float(resid[mk].mean())
        var += (nk / n) ** 2 * p["sd"] ** 2 * (1 / nk + 1 / p["reference_n"])
    floor = float(tolerance) if tolerance is not None else (
        float((normal_quantile(1 - alpha / 2) + normal_quantile(power)) * math.sqrt(var)))
    return {"low": int(t[m].min()), "high": int(t[m].max()), "tokens": float(np.median(t[m])),
            "value": reference + drop, "drop": drop, "floor": floor, "holds": bool(drop >= -floor - 1e-12), "n": n}


def _split(t: np.ndarray, r: np.ndarray) -> tuple[int | None, int]:
    """(last length before, first length after) the split of residuals `r` ordered by length `t` that maximises
    (mean left - mean right) * sqrt(nl * nr / n), splitting only between distinct lengths; (None, the length)
    where all items share one length."""
    order = np.argsort(t, kind="stable")
    t, r = t[order], r[order]
    n = len(t)
    cuts = np.flatnonzero(np.diff(t) > 0) + 1          # a split before item i, between distinct lengths
    if len(cuts) == 0:
        return None, int(t[0])
    left = np.cumsum(r)[cuts - 1]
    stat = (left / cuts - (r.sum() - left) / (n - cuts)) * np.sqrt(cuts * (n - cuts) / n)
    i = int(cuts[int(np.argmax(stat))])
    return int(t[i - 1]), int(t[i])


def _longest_bin(bins: np.ndarray, whole: np.ndarray, upto: np.ndarray) -> str | None:
    read = [str(v) for v in bins[upto & whole] if v is not None]
    return max(read, key=label_key) if read else None


def effective_statement(e: Mapping[str, Any]) -> str:
    """The effective context of a result (`EffectiveLength.to_dict()`) in words."""
    status = e.get("status")
    bin_note = f" (read whole up to the {e['effective_bin']} bin)" if e.get("effective_bin") else ""
    if status == AT_CHANCE:
        return "no effective context (at chance at the shortest lengths)"
    if status == UNFILLED:
        largest = max((p["n"] for p in e.get("strata") or []), default=0)
        return (f"no effective context: the run cannot fill a reference of {e.get('window')} items in any stratum "
                f"(largest: {largest} items)")
    if status == NO_ITEMS or e.get("effective_tokens") is None:
        return "no effective context (no scored item with a consumed length)"
    if e.get("censored"):
        return f"at least {e['effective_tokens']:,} tokens consumed{bin_note}, the longest length seen"
    return (f"{e['effective_tokens']:,} tokens{bin_note} (first drop at {e['first_drop_tokens']:,}; longest consumed "
            f"{e['max_tokens']:,})")


def tolerance_statement(e: Mapping[str, Any]) -> str:
    """How the tolerance of a result (`EffectiveLength.to_dict()`) was chosen, in words."""
    if e.get("tolerance") is None:
        return "–"
    if e.get("tolerance_basis") != FLOOR:
        return f"{e['tolerance']:g} (a fixed tolerance)"
    where = "at the first drop" if e.get("status") == DROP else "at the longest point"
    return (f"{e['tolerance']:.3f} (resolution floor {where}: the drop a z-test at alpha {e['alpha']:g} detects "
            f"with power {e['power']:g} against each stratum's reference)")


def strata_statement(e: Mapping[str, Any]) -> str:
    """Which strata the curve was read in, and which were left out, in words."""
    per = e.get("strata") or []
    chance = [p["key"] for p in per if p.get("filled") and p.get("at_chance")]
    if len(per) <= 1 and not e.get("strata_axes"):
        out = "over the whole task (no strata declared), against its shortest lengths"
    else:
        out = f"within {len(per)} strata ({' x '.join(e.get('strata_axes') or [])}), each against its own reference"
    if chance:
        out += f"; at chance, left out: {', '.join(chance)}"
    if e.get("n_strata_unfilled"):
        out += f"; {e['n_strata_unfilled']} too small for the reference"
    return out


def item_consumed_tokens(per_query: Any, seen: Any, column: str = "seen_tokens") -> np.ndarray:
    """Per item (row of per_query): the mean `column` of its relevant documents as the model consumed them
    (seen.parquet, role 'document'); NaN where none of them was encoded."""
    return items_consumed(per_query, seen, (column,))[column]


def items_consumed(per_query: Any, seen: Any, columns: Sequence[str]) -> dict[str, np.ndarray]:
    """`item_consumed_tokens` for each of `columns`, the items' relevant ids read once."""
    docs = None if seen is None or len(seen) == 0 else seen[seen["role"] == "document"] if "role" in seen.columns else seen
    relevant = [[str(d) for d in r] if r is not None else [] for r in per_query["relevant_ids"].tolist()] \
        if docs is not None and any(c in docs.columns for c in columns) else []
    out = {}
    for column in columns:
        if docs is None or column not in docs.columns:
            out[column] = np.full(len(per_query), np.nan)
            continue
        by_id = dict(zip(docs["doc_id"].astype(str).tolist(), docs[column].astype(float).tolist()))
        values = []
        for ids in relevant:
            vals = [by_id[d] for d in ids if d in by_id]
            # one relevant document (most items): its value, the bits np.mean would give, without its overhead
            values.append(vals[0] if len(vals) == 1 else float(np.mean(vals)) if vals else np.nan)
        out[column] = np.asarray(values, dtype=float)
    return out


def run_effective_length(per_query: Any, seen: Any, metric: str, tolerance: float | None = None,
                         window: int | None = None, strata: Sequence[str] = ()) -> EffectiveLength:
    """`effective_length` of one run's scored items (failed items, with an error or no score, left out), within
    the strata named by `strata` (the task's design axes; those per_query lacks are ignored)."""
    from mmbench.evaluators.metrics import chance_metrics, metric_range

    ok = per_query["error"].isna().to_numpy() if "error" in per_query.columns else np.ones(len(per_query), bool)
    pq = per_query[ok]
    whole_columns = ("truncated", "unseen_images", "unseen_frames")   # read whole: nothing cut, nothing unseen
    consumed = items_consumed(pq, seen, ("seen_tokens", *whole_columns))
    tokens = consumed["seen_tokens"]
    scores = pq[metric].to_numpy(dtype=float) if metric in pq.columns else np.full(len(pq), np.nan)
    axes = [a for a in strata if a in pq.columns]
    cols = [pq[a].astype("string").fillna("?").tolist() for a in axes]
    keys = [" / ".join(v) for v in zip(*cols)] if axes else None
    chance = None
    if {"ranked_ids", "relevant_ids"} <= set(pq.columns):
        levels: dict[tuple[int, int], float] = {}  # chance depends only on the pool's and the relevant set's sizes

        def level(n: int, r: int) -> float:
            if (n, r) not in levels:
                levels[n, r] = chance_metrics(n, r).get(metric, 0.0) if n and r else 0.0
            return levels[n, r]

        chance = [level(len(r), len(rel)) for r, rel in zip(pq["ranked_ids"].tolist(), pq["relevant_ids"].tolist())]
    ceiling = metric_range(metric, pq["relevant_ids"]) if "relevant_ids" in pq.columns else 1.0
    bins = [v if isinstance(v, str) else None for v in pq["length_bin"].tolist()] if "length_bin" in pq.columns else None
    whole = np.ones(len(pq), bool)
    for column in whole_columns:
        if seen is not None and column in seen.columns:
            whole &= ~(np.nan_to_num(consumed[column]) > 0)
    return effective_length(tokens, scores, keys, chance, tolerance, window, ceiling=ceiling, bins=bins, whole=whole,
                            strata_axes=axes)
