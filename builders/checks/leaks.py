"""Leak audit: label-blind baselines that must score no better (and no worse) than chance.

A baseline ranks a pool's candidates from something that is not the content a model should read: the stored
position, the ids, the length, one metadata column. If one of them beats chance, the label is written where it
should not be, and any evaluator that reads it (or keeps the stored order on ties) scores what it did not see.

Each baseline is a pure function ``(query, candidates in stored order) -> one score per candidate`` (higher ranks
first). It is scored by its expected precision at 1 under a uniform random tie-break: the share of relevant
candidates among those with the top score. Chance is the share of relevant candidates in the pool. Per subset
(and over all items) the summed P@1 of a baseline, S over n items, is compared with chance c (the mean over the
items) by an exact binomial test: the baseline leaks when

    P(X >= floor(S)) < ALPHA   or   P(X <= ceil(S)) < ALPHA,   X ~ Binomial(n, c),   ALPHA = 1e-6

A truly blind baseline fails by luck about once in a million tests (a build runs a few thousand), while a label
stored first (S = n) fails as soon as c^n < 1e-6: ten items at chance 1/4, five at chance 1/25. The rounding of S
towards chance keeps tie-broken fractions from counting against a baseline.

Metadata columns named in `provenance_columns` (how a record was built: its source record, its difficulty, the
`provenance` dict) are not in what an evaluator sees: the pool set stores them in `provenance.parquet`, apart from
the query and candidate tables (`mmbench.data.poolset`), and a model's view carries no metadata. So they are not
scored; every column left in the document tables is, with no exemption. Several of them do name the label (a
Flickr candidate's `image_id` equals its query's for the relevant image and no other), which is why they are kept
apart rather than exempted.
"""
from __future__ import annotations

import difflib
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from mmbench.builders.checks import sequence_ratio
from mmbench.data.documents import Document
from mmbench.data.poolset import PoolSet

ALPHA = 1e-6
MAX_VALUES = 12        # a categorical column with more distinct values than this is scored by query match only
ALWAYS_PROVENANCE = ("provenance",)   # blinding's dict of built ids: kept apart in every pool set

Baseline = Callable[[Document, Sequence[Document]], list[float]]


def first_position(q: Document, cands: Sequence[Document]) -> list[float]:
    return [-float(i) for i in range(len(cands))]


def last_position(q: Document, cands: Sequence[Document]) -> list[float]:
    return [float(i) for i in range(len(cands))]


def _id_tokens(text: str) -> set[str]:
    return {t for t in re.split(r"[^0-9a-zA-Z]+", text.lower()) if t}


def id_shared_tokens(q: Document, cands: Sequence[Document]) -> list[float]:
    """How many id tokens (split at non-alphanumerics) a candidate's id shares with the query's."""
    qt = _id_tokens(q.id)
    return [float(len(qt & _id_tokens(c.id))) for c in cands]


def id_similarity(q: Document, cands: Sequence[Document]) -> list[float]:
    """difflib's ratio between the query id and the candidate id."""
    return [difflib.SequenceMatcher(None, q.id, c.id).ratio() for c in cands]


def id_shortest(q: Document, cands: Sequence[Document]) -> list[float]:
    return [-float(len(c.id)) for c in cands]


def id_longest(q: Document, cands: Sequence[Document]) -> list[float]:
    return [float(len(c.id)) for c in cands]


def shortest(q: Document, cands: Sequence[Document]) -> list[float]:
    return [-float(c.tokens) for c in cands]


def longest(q: Document, cands: Sequence[Document]) -> list[float]:
    return [float(c.tokens) for c in cands]


FIXED_BASELINES: dict[str, Baseline] = {
    "first_position": first_position, "last_position": last_position,
    "id_shared_tokens": id_shared_tokens, "id_similarity": id_similarity,
    "id_shortest": id_shortest, "id_longest": id_longest,
    "length_shortest": shortest, "length_longest": longest,
}


def _value(v: Any) -> Any:
    return v if isinstance(v, (str, int, float, bool)) or v is None else json.dumps(v, sort_keys=True)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def metadata_baselines(ps: PoolSet, kept_apart: Iterable[str] = ()) -> dict[str, Baseline]:
    """One baseline per thing a single candidate metadata column can say: equal to the query's same column,
    each of its values (for columns with few values), and its order (numeric columns, both ways). Columns
    `kept_apart` (stored outside the document tables) are not what an evaluator sees and get none."""
    hidden = set(kept_apart)
    values: dict[str, set] = defaultdict(set)
    numeric: dict[str, bool] = defaultdict(lambda: True)
    for c in ps.candidates:
        for k, v in c.meta.items():
            if k in hidden:
                continue
            values[k].add(_value(v))
            numeric[k] = numeric[k] and _is_number(v)
    out: dict[str, Baseline] = {}
    for k in sorted(values):
        out[f"meta:{k}=query"] = (lambda key: lambda q, cs: [
            float(key in q.meta and _value(c.meta.get(key)) == _value(q.meta[key])) for c in cs])(k)
        if numeric[k]:
            out[f"meta:{k}:ascending"] = (lambda key: lambda q, cs: [-float(c.meta.get(key, 0)) for c in cs])(k)
            out[f"meta:{k}:descending"] = (lambda key: lambda q, cs: [float(c.meta.get(key, 0)) for c in cs])(k)
        elif len(values[k]) <= MAX_VALUES:
            for v in sorted(values[k], key=repr):
                out[f"meta:{k}={v}"] = (lambda key, val: lambda q, cs: [
                    float(_value(c.meta.get(key)) == val) for c in cs])(k, v)
    return out


def expected_p1(scores: Sequence[float], relevant: Sequence[bool]) -> float:
    """Precision at 1 expected under a uniform random tie-break: relevant share of the top-scored candidates."""
    top = max(scores)
    tied = [r for s, r in zip(scores, relevant) if s == top]
    return sum(tied) / len(tied)


def groups(item: Any) -> tuple[str, ...]:
    """The groups a pool item's figures are tallied in by the enforced probes: its subset, its dataset and
    difficulty with the other axes pooled (``hotpotqa/hard`` for ``hotpotqa/hard/8k``; where the pool's metadata
    names them and the subset is finer), and all items ('all'). A dataset and difficulty is never averaged with
    another, where two shortcuts of opposite sign would cancel."""
    parts = [str(item.meta[k]) for k in ("dataset", "difficulty") if item.meta.get(k)]
    pooled = "/".join(parts)
    return (item.subset, pooled, "all") if pooled and pooled != item.subset else (item.subset, "all")


def tail_p(total: float, n: int, chance: float) -> float:
    """The smaller binomial tail probability of a summed P@1 `total` over n items at chance `chance` (rounded
    towards chance), doubled for the two sides and capped at 1."""
    from scipy.stats import binom

    upper = float(binom.sf(math.floor(total + 1e-9) - 1, n, chance))
    lower = float(binom.cdf(math.ceil(total - 1e-9), n, chance))
    return min(1.0, 2 * min(upper, lower))


@dataclass(frozen=True)
class LeakScore:
    baseline: str
    subset: str
    n: int
    score: float
    chance: float
    p_value: float

    @property
    def leaks(self) -> bool:
        return self.p_value < ALPHA

    def line(self) -> str:
        return (f"baseline {self.baseline} scores P@1 {self.score:.3f} on subset {self.subset} "
                f"(chance {self.chance:.3f}, n={self.n}, binomial p={self.p_value:.1e} < {ALPHA:g})")


def audit(ps: PoolSet, provenance_columns: Iterable[str] = ()) -> list[LeakScore]:
    """Every baseline on every subset and on all items ('all'), over what an evaluator sees: the metadata
    columns other than `provenance_columns` (which the pool set stores apart)."""
    baselines = dict(FIXED_BASELINES)
    baselines.update(metadata_baselines(ps, tuple(provenance_columns)))
    queries, cands = ps.query_by_id(), ps.candidate_by_id()
    baselines["id_similarity"] = _id_similarities(ps)

    def rows() -> Iterable[tuple[str, str, float, float]]:
        for item in ps.pools:
            q = queries[item.query_id]
            docs = [cands[c] for c in item.candidate_ids]
            rel = [c in set(item.relevant_ids) for c in item.candidate_ids]
            if not docs or not any(rel):
                continue
            for name, fn in baselines.items():
                yield name, item.subset, expected_p1(fn(q, docs), rel), sum(rel) / len(rel)
    return tally(rows())


def _id_similarities(ps: PoolSet) -> Baseline:
    """`id_similarity` of every pool, its ratios computed for all pools at once (`sequence_ratio`: difflib's)."""
    pairs = list(dict.fromkeys((item.query_id, c) for item in ps.pools for c in item.candidate_ids))
    ratio = dict(zip(pairs, sequence_ratio.ratios(pairs)))
    return lambda q, cands: [ratio[(q.id, c.id)] for c in cands]


def tally(rows: Iterable[tuple[str, str, float, float]]) -> list[LeakScore]:
    """(baseline, subset, expected P@1, chance) per item -> one `LeakScore` per baseline and subset and per
    baseline over all items ('all'), each with its exact binomial tail probability."""
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for name, subset, p1, chance in rows:
        for key in ((name, subset), (name, "all")):
            acc = sums[key]
            acc[0] += p1
            acc[1] += chance
            acc[2] += 1
    out = []
    for (name, subset), (s, c, n) in sorted(sums.items()):
        chance = c / n
        out.append(LeakScore(name, subset, int(n), s / n, chance, tail_p(s, int(n), chance)))
    return out


def summary(scores: Sequence[LeakScore], provenance_columns: Iterable[str] = ()) -> dict[str, Any]:
    """What a validity report stores: the rule, the baselines, the columns kept apart (not scored), the worst
    baseline per subset, every leak."""
    worst: dict[str, LeakScore] = {}
    for s in scores:
        if s.subset not in worst or s.p_value < worst[s.subset].p_value:
            worst[s.subset] = s
    return {"rule": f"a baseline leaks when its summed P@1 S over n items has a two-sided binomial tail "
                    f"probability below {ALPHA:g} at chance c: 2 * min(P(X >= floor S), P(X <= ceil S)), "
                    "X ~ Binomial(n, c)",
            "alpha": ALPHA,
            "baselines": sorted({s.baseline for s in scores}),
            "kept_apart": sorted(set(provenance_columns)),
            "worst_per_subset": {k: {"baseline": v.baseline, "score": round(v.score, 6), "chance": round(v.chance, 6),
                                     "p_value": float(f"{v.p_value:.3g}"), "n": v.n} for k, v in sorted(worst.items())},
            "leaks": [s.line() for s in scores if s.leaks]}
