"""Pool-aware leak baselines: rankers that read the whole pool, or the whole pool set, but never the query.

The label-blind baselines of `mmbench.builders.checks.leaks` score each candidate alone. A listwise reranker (an
LLM given the whole pool, `mmbench rank`) sees every candidate of a pool at once, and an evaluator that keeps a
pool set's stored order sees every pool. Two signals are open to them and to nothing that scores a candidate alone:

- ``pool_medoid``: the medoid of the pool, the candidate most like the rest. A family of look-alikes made by
  editing one document (Hard variants that each replace one span of the relevant one) has the original at its
  centre. Each candidate's content is cut into word shingles (``SHINGLE_WORDS`` consecutive words, casefolded,
  within one text segment; an image or a video frame is one shingle named by its content-addressed ref), and its
  score is its summed Jaccard similarity with the pool's other candidates,

      medoid(i) = sum_{j != i} |A_i & A_j| / |A_i | A_j|,

  so the top-scored candidate minimises the summed Jaccard distance to the rest: the pool's medoid. The query is
  never read.
- ``pool_order_turnover``: the slot whose occupant changes between pools over the same candidate set. Pools that
  rank one set of candidates against different queries must store them in one order; if the builder's per-pool
  order leaks through (the relevant candidate first, then a fixed permutation), the relevant slot is the one that
  changes. A slot's score is the number of other pools over the same set that hold another candidate there.

Both are scored like the label-blind baselines, by expected P@1 under a uniform random tie-break, against chance,
per subset and over all items, with the exact two-sided binomial test of `leaks.tail_p` (`leaks.tally`), reported in
the validity report (``leak_audit`` -> ``pool_aware``), by `mmbench validate` and on the dataset card. A leak of
`pool_order_turnover` breaks the common invariant `pool_order_blind`. The medoid is enforced by its own one-sided
rule, the learned probe's (`centre`: P(X >= floor S) < 0.01 for X ~ Binomial(n, chance + 0.08)), per subset, per
dataset and difficulty and over all items (`leaks.groups`): the common invariant `pool_centre_free` (issue 43).
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from mmbench.builders.checks import leaks, probe
from mmbench.builders.checks.shingles import ShingleCoder, distinct, intersections
from mmbench.data.documents import Document, Image, Text, Video
from mmbench.data.poolset import PoolSet

SHINGLE_WORDS = 5
_WORD = re.compile(r"\w+")

PoolScores = dict[str, list[float]]      # pool item id -> one score per candidate, in stored order
PoolBaseline = Callable[[PoolSet], PoolScores]


class Shingler:
    """Stable shingle codes of documents (`shingles.ShingleCoder`), with a cache of text segments shared between
    calls (the pools of a pool set repeat the same backgrounds and passages many times)."""

    def __init__(self, words: int = SHINGLE_WORDS) -> None:
        self.coder = ShingleCoder(words)
        self.segments: dict[str, np.ndarray] = {}

    def _text(self, text: str) -> np.ndarray:
        hit = self.segments.get(text)
        if hit is None:
            hit = self.segments[text] = self.coder.codes(_WORD.findall(text.casefold()))
        return hit

    def __call__(self, doc: Document) -> np.ndarray:
        """The sorted distinct shingle codes of `doc`."""
        parts: list[np.ndarray] = []
        refs: list[int] = []
        for s in doc.segments:
            if isinstance(s, Text):
                parts.append(self._text(s.text))
            elif isinstance(s, Image):
                refs.append(self.coder.media(s.ref))
            elif isinstance(s, Video):
                refs.extend(self.coder.media(f) for f in s.frames)
        parts.append(np.array(refs, dtype=np.uint64))
        return distinct(np.concatenate(parts))


def medoid_from_shingles(sets: Sequence[np.ndarray]) -> list[float]:
    """Each set's summed Jaccard similarity with the other sets (one sparse product gives every intersection)."""
    if len(sets) < 2:
        return [0.0] * len(sets)
    inter = intersections(sets)
    size = np.array([len(a) for a in sets], dtype=float)
    union = size[:, None] + size[None, :] - inter
    jaccard = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    np.fill_diagonal(jaccard, 0.0)
    return [float(v) for v in jaccard.sum(axis=1)]


def medoid_scores(ps: PoolSet) -> PoolScores:
    """`pool_medoid` for every pool (see the module text); pools over one candidate set are scored once."""
    cands = ps.candidate_by_id()
    shingle = Shingler()
    memo: dict[str, np.ndarray] = {}
    by_set: dict[tuple[str, ...], dict[str, float]] = {}
    out: PoolScores = {}
    for item in ps.pools:
        key = tuple(sorted(item.candidate_ids))
        if key not in by_set:
            sets = [memo[c] if c in memo else memo.setdefault(c, shingle(cands[c])) for c in key]
            by_set[key] = dict(zip(key, medoid_from_shingles(sets)))
        out[item.id] = [by_set[key][c] for c in item.candidate_ids]
    return out


def turnover_scores(ps: PoolSet) -> PoolScores:
    """`pool_order_turnover` for every pool: per slot, how many other pools over the same candidate set store
    another candidate there (all 0 when the set has one stored order, as blinding gives it)."""
    orders: dict[frozenset[str], list[tuple[str, ...]]] = defaultdict(list)
    for item in ps.pools:
        orders[frozenset(item.candidate_ids)].append(tuple(item.candidate_ids))
    held: dict[frozenset[str], list[Counter[str]]] = {
        key: [Counter(slot) for slot in zip(*found)] for key, found in orders.items() if len(set(found)) > 1}
    out: PoolScores = {}
    for item in ps.pools:
        key = frozenset(item.candidate_ids)
        n = len(orders[key])
        counts = held.get(key)   # one stored order: no slot changes
        out[item.id] = [float(n - counts[i][c]) if counts else 0.0 for i, c in enumerate(item.candidate_ids)]
    return out


POOL_BASELINES: dict[str, PoolBaseline] = {"pool_medoid": medoid_scores, "pool_order_turnover": turnover_scores}
# The baselines whose two-sided leak (p < 1e-6) refuses a pool set (the `pool_order_blind` invariant). The medoid
# has its own one-sided rule with the probe's margin (`centre`, the `pool_centre_free` invariant): a medoid below
# chance is no shortcut for a reader that ranks by it.
ENFORCED = ("pool_order_turnover",)
CENTRE = "pool_medoid"


@dataclass(frozen=True)
class CentreScore:
    """The pool medoid's P@1 over one group of items (`leaks.groups`), with the probe's one-sided rule."""
    group: str
    n: int
    score: float
    chance: float
    p_margin: float        # P(X >= floor S), X ~ Binomial(n, chance + probe.MARGIN)

    @property
    def refuses(self) -> bool:
        return self.p_margin < probe.ALPHA

    def line(self) -> str:
        return (f"the query-blind pool medoid scores P@1 {self.score:.3f} on {self.group} (chance "
                f"{self.chance:.3f}, n={self.n}; binomial p={self.p_margin:.1e} against chance + "
                f"{probe.MARGIN:g} < {probe.ALPHA:g}): the relevant candidate is the centre of its pool")


def centre(ps: PoolSet, medoid: PoolScores | None = None) -> list[CentreScore]:
    """The medoid's P@1 per subset, per dataset and difficulty and over all items, each refused when
    P(X >= floor S) < probe.ALPHA for X ~ Binomial(n, chance + probe.MARGIN), the learned probe's rule."""
    scores = medoid_scores(ps) if medoid is None else medoid
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for item in ps.pools:
        rel = [c in set(item.relevant_ids) for c in item.candidate_ids]
        if len(item.candidate_ids) < 2 or not any(rel):
            continue
        p1 = leaks.expected_p1(scores[item.id], rel)
        for key in leaks.groups(item):
            acc = sums[key]
            acc[0] += p1
            acc[1] += sum(rel) / len(rel)
            acc[2] += 1
    return [CentreScore(k, int(n), s / n, c / n, probe.upper_p(s, int(n), c / n + probe.MARGIN))
            for k, (s, c, n) in sorted(sums.items())]


def audit(ps: PoolSet, baselines: dict[str, PoolBaseline] | None = None,
          computed: dict[str, PoolScores] | None = None) -> list[leaks.LeakScore]:
    """Every pool-aware baseline on every subset and on all items ('all'), tested like the label-blind ones
    (`computed`: scores already computed, by baseline name)."""
    chosen = POOL_BASELINES if baselines is None else baselines

    def rows() -> Iterable[tuple[str, str, float, float]]:
        for name, fn in chosen.items():
            scores = (computed or {}).get(name) or fn(ps)
            for item in ps.pools:
                rel = [c in set(item.relevant_ids) for c in item.candidate_ids]
                if item.candidate_ids and any(rel):
                    yield name, item.subset, leaks.expected_p1(scores[item.id], rel), sum(rel) / len(rel)
    return leaks.tally(rows())


def summary(scores: Sequence[leaks.LeakScore], centred: Sequence[CentreScore] = ()) -> dict[str, Any]:
    """What a validity report stores under `leak_audit` -> `pool_aware`: the rule, each baseline's score over all
    items, the worst subset of each, every leak, and the medoid's one-sided figures per group (`centre`)."""
    overall = {s.baseline: s for s in scores if s.subset == "all"}
    worst: dict[str, leaks.LeakScore] = {}
    for s in scores:
        if s.subset != "all" and (s.baseline not in worst or s.p_value < worst[s.baseline].p_value):
            worst[s.baseline] = s
    return {"rule": "query-blind rankers that read the whole pool (medoid: word-shingle overlap with the rest of "
                    "the pool) or the whole pool set (turnover: the slot whose occupant changes between pools over "
                    f"the same candidates), tested as the label-blind baselines: p < {leaks.ALPHA:g}",
            "shingle_words": SHINGLE_WORDS,
            "enforced": list(ENFORCED),
            "reported_only": sorted(set(overall) - set(ENFORCED)),
            "all": {k: _row(v) for k, v in sorted(overall.items())},
            "worst_subset": {k: {"subset": v.subset, **_row(v)} for k, v in sorted(worst.items())},
            "leaks": [s.line() for s in scores if s.leaks],
            "centre": {"baseline": CENTRE, "margin": probe.MARGIN, "alpha": probe.ALPHA,
                       "rule": f"{CENTRE} refuses a group (subset; dataset and difficulty; all) when its P@1 S over n "
                               f"items has P(X >= floor S) < {probe.ALPHA:g} for X ~ Binomial(n, chance + "
                               f"{probe.MARGIN:g})",
                       "per_group": {c.group: {"score": round(c.score, 6), "chance": round(c.chance, 6), "n": c.n,
                                               "p_margin": float(f"{c.p_margin:.3g}")} for c in centred},
                       "refusals": [c.line() for c in centred if c.refuses]}}


def _row(s: leaks.LeakScore) -> dict[str, Any]:
    return {"score": round(s.score, 6), "chance": round(s.chance, 6), "p_value": float(f"{s.p_value:.3g}"), "n": s.n}
