"""The learned shortcut probe: a classifier that may read everything about a candidate except the query and content
meaning, and must not find the relevant one.

The fixed baselines of `leaks` each test one signal; a shortcut can also hide in a combination ("the longest of the
candidates that hold one more image"). The probe learns it: a gradient-boosted tree ensemble (scikit-learn's
`GradientBoostingClassifier`, 60 trees of depth 3, single-threaded and seeded, so the same pool set gives the same
result on any machine) over the query-blind, pool-relative features of `probe_features` (size, segments, media counts
and bytes, ids, stored position, numeric metadata, overlap with the rest of the pool), trained K-fold
(`GroupKFold`, K = 5) with the folds grouped by query: pools whose queries ask the same (normalised) text or share a
relevant candidate are one group, so no fold learns a label it is tested on. Each held-out pool ranks its candidates
by the predicted probability; its P@1 is the expected precision at 1 under a uniform tie-break (`leaks.expected_p1`).

Per subset, per dataset and difficulty with the lengths pooled (`leaks.groups`: a pool's ``dataset`` and
``difficulty`` metadata, so two datasets whose shortcuts have opposite signs are never averaged) and over all items,
with S the summed held-out P@1 over n items and c the mean chance, the report gives
the exact one-sided binomial p against chance, P(X >= floor S) with X ~ Binomial(n, c), as information, and the build
**refuses** when the probe is significantly above chance plus a margin:

    P(X >= floor S) < ALPHA,   X ~ Binomial(n, min(1, c + MARGIN)),   ALPHA = 0.01, MARGIN = 0.08

so a probe that is truly at chance refuses far less often than ALPHA (tested by simulation), and a probe 8 points
above chance is not yet a refusal: small learned edges come from the pools' honest structure as well as from leaks,
and the fixed baselines keep their own strict rule. The refusal names the probe, the subset and the features the
model leaned on (impurity importances of one model fitted on every pool).

Known limit: where one candidate is ranked by several queries (a Visual Grounding cell, a Logical Summarization
Easy set), the model can learn a candidate's identity from a training pool where it was relevant and then pick it
in a held-out pool where it is not, which pulls the held-out P@1 below chance (VG's default sample: 0.004 at chance
0.04). Grouping by candidate set would stop that but joins every VG pool into one group (each query is asked in every
cell). The bias makes the probe err towards passing, never towards refusing.
"""
from __future__ import annotations

import functools
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from mmbench.builders.checks import fits, query_structure, text_probe
from mmbench.builders.checks.leaks import expected_p1, groups as tally_groups
from mmbench.builders.checks.probe_features import pool_relative_blocks, pool_rows
from mmbench.data.lexical import tokenize
from mmbench.data.poolset import PoolSet

ALPHA = 0.01
MARGIN = 0.08
FOLDS = 5
TREES, DEPTH, RATE = 60, 3, 0.1
MAX_TRAIN_ROWS = 20_000      # a fold trains on a seeded sample of its groups past this many rows (a big VG build)
TOP_FEATURES = 5
NAME = "shortcut probe"
FEATURE_SETS = ("candidate", "pool", "query", "text")
POOL_FEATURE = "pool_overlap:"
# The pool-aware features are enforced since issue 43, per subset, per dataset and difficulty (`leaks.groups`) and
# over all items. Before, they were reported only: reduced Multi-Source Reasoning builds with four candidates per
# query kept a centre (their Hard pools held one family of three beside a stranger: P@1 1.000 on the 6
# mmdocrag/hard/2k items, led by pool_overlap). Now a Hard pool holds at least two families of one shape and the
# relevant candidate mirrors a variant's change (`hard_variants.decoy_for`), and a shape that cannot be made
# centre-free (three candidates) is refused by the builder.
POOL_AWARE_ENFORCED = True
MODEL = f"gradient boosting ({TREES} trees, depth {DEPTH}) over query-blind candidate features, " \
        f"{FOLDS}-fold by query group"
# What each feature set's model reads: "query" relates the numbers a query states to each candidate's counts
# (`query_structure`: the query-aware structural probe, issue 43), "text" is `text_probe` (hashed n-grams of the
# candidate's own text, a linear model trained on other source records).
MODELS = {"candidate": MODEL, "pool": MODEL,
          "query": f"gradient boosting ({TREES} trees, depth {DEPTH}) over stated numbers against candidate counts, "
                   f"{FOLDS}-fold by query group and source record",
          "text": f"{text_probe.MODEL}, {FOLDS}-fold"}
ENFORCED_SETS = ("candidate", "query", "text") + (("pool",) if POOL_AWARE_ENFORCED else ())


@dataclass(frozen=True)
class ProbeScore:
    features: str         # "candidate" (each candidate alone) or "pool" (the pool overlap added)
    subset: str
    n: int
    score: float
    chance: float
    p_chance: float       # one-sided binomial p against chance (information)
    p_margin: float       # one-sided binomial p against chance + MARGIN (the refusal rule)
    importances: tuple[tuple[str, float], ...] = field(default=())

    @property
    def refuses(self) -> bool:
        return self.p_margin < ALPHA and self.features in ENFORCED_SETS

    def line(self) -> str:
        top = ", ".join(f"{k} {v:.2f}" for k, v in self.importances)
        return (f"{NAME} ({MODELS[self.features]}; {self.features} features) scores held-out P@1 {self.score:.3f} on subset {self.subset} "
                f"(chance {self.chance:.3f}, n={self.n}; binomial p={self.p_margin:.1e} against chance + {MARGIN:g} "
                f"< {ALPHA:g}); feature importances: {top}")


def upper_p(total: float, n: int, p: float) -> float:
    """P(X >= floor(total)) for X ~ Binomial(n, p) (the summed P@1 rounded towards zero: ties never count)."""
    from scipy.stats import binom

    return float(binom.sf(math.floor(total + 1e-9) - 1, n, min(1.0, p)))


def query_groups(ps: PoolSet, items: Iterable[int]) -> np.ndarray:
    """A group number per item: items are joined when their queries ask the same normalised text, share a relevant
    candidate or come from one source record (the query's ``dataset`` and ``record_id``) (union-find), so a fold
    never holds a label its training pools taught, nor a record they read."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    queries = ps.query_by_id()
    keys = []
    for i in items:
        item = ps.pools[i]
        q = "q:" + (" ".join(tokenize(queries[item.query_id].text)) or item.query_id)
        for r in item.relevant_ids:
            parent[find("r:" + r)] = find(q)
        meta = queries[item.query_id].meta
        if meta.get("record_id") is not None:
            parent[find(f"s:{meta.get('dataset')}:{meta['record_id']}")] = find(q)
        keys.append(q)
    roots = [find(k) for k in keys]
    number = {r: k for k, r in enumerate(dict.fromkeys(roots))}
    return np.asarray([number[r] for r in roots], dtype=np.int64)


def _model(seed: int):
    from sklearn.ensemble import GradientBoostingClassifier

    return GradientBoostingClassifier(n_estimators=TREES, max_depth=DEPTH, learning_rate=RATE, random_state=seed)


def held_out_plan(y: np.ndarray, groups: np.ndarray, seed: int) -> fits.HeldOut:
    """The folds of `held_out_scores` (GroupKFold; a fold past MAX_TRAIN_ROWS trains on a seeded sample of its
    groups)."""
    return fits.group_folds(y, groups, FOLDS, MAX_TRAIN_ROWS, seed)


def fit_predict(X: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
    """The probability of relevance of the `test` rows from a model fitted on the `train` rows."""
    return _model(seed).fit(X[train], y[train]).predict_proba(X[test])[:, 1]


def held_out_jobs(X: np.ndarray, y: np.ndarray, plan: fits.HeldOut, seed: int) -> list[Callable[[], np.ndarray]]:
    return [functools.partial(fit_predict, X, y, train, test, seed) for train, test in plan.folds]


def held_out_scores(X: np.ndarray, y: np.ndarray, groups: np.ndarray, seed: int) -> np.ndarray:
    """Each row's predicted probability of being relevant from a model that never saw its group (GroupKFold)."""
    plan = held_out_plan(y, groups, seed)
    return plan.scores(fits.run(held_out_jobs(X, y, plan, seed)))


def importances(X: np.ndarray, y: np.ndarray, names: list[str], seed: int) -> tuple[tuple[str, float], ...]:
    """The TOP_FEATURES largest impurity importances of one model fitted on every pool (rounded)."""
    if len(np.unique(y)) < 2:
        return ()
    rows = np.arange(len(y))
    if len(rows) > MAX_TRAIN_ROWS:
        rows = np.sort(np.random.default_rng(seed).choice(rows, MAX_TRAIN_ROWS, replace=False))
    # a model that never splits (every feature constant, as the query probe's on a task whose queries state no
    # number) has importances 0/0 = NaN: reported as 0, so the manifest's figures equal validate's (NaN != NaN)
    imp = np.nan_to_num(_model(seed).fit(X[rows], y[rows]).feature_importances_, nan=0.0)
    order = sorted(range(len(names)), key=lambda j: (-imp[j], names[j]))[:TOP_FEATURES]
    return tuple((names[j], round(float(imp[j]), 3)) for j in order)


def _tally(ps: PoolSet, features: str, scores: np.ndarray, y: np.ndarray, items: np.ndarray,
           top: tuple[tuple[str, float], ...]) -> list[ProbeScore]:
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for i, rows in item_rows(items):
        p1, chance = expected_p1(scores[rows].tolist(), y[rows].tolist()), float(y[rows].mean())
        for subset in tally_groups(ps.pools[i]):
            acc = sums[subset]
            acc[0] += p1
            acc[1] += chance
            acc[2] += 1
    return [ProbeScore(features, subset, int(n), s / n, c / n, upper_p(s, int(n), c / n),
                       upper_p(s, int(n), c / n + MARGIN), top) for subset, (s, c, n) in sorted(sums.items())]


def item_rows(items: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(item, its row numbers in row order) for each item in the order of its first row: what the mask
    ``items == i`` selects, from one stable sort instead of a pass over every row per item."""
    order = np.argsort(items, kind="stable")
    cuts = np.flatnonzero(np.diff(items[order])) + 1
    groups = np.split(order, cuts) if len(order) else []
    groups.sort(key=lambda rows: rows[0])
    return [(int(items[rows[0]]), rows) for rows in groups]


def probe(ps: PoolSet, kept_apart: Iterable[str] = (), media_root: Path | None = None) -> list[ProbeScore]:
    """The probe's held-out P@1 per subset and over all items ('all') for each of FEATURE_SETS: the candidate-alone
    features, with the pool overlap added, the query-aware structural features, and the candidate's own text;
    [] for a pool set too small to fold."""
    with fits.Pool() as pool:
        return start(ps, kept_apart, media_root, pool)()


def start(ps: PoolSet, kept_apart: Iterable[str], media_root: Path | None,
          pool: fits.Pool) -> Callable[[], list[ProbeScore]]:
    """`probe`'s features, with its fits handed to `pool` as soon as their rows are ready (the gradient boosting
    ones before the text rows are built); the returned function waits for the fits and tallies them."""
    X, y, items, names = pool_rows(ps, kept_apart, media_root)
    order = list(dict.fromkeys(items.tolist()))
    groups_of_item = dict(zip(order, query_groups(ps, order)))
    groups = np.asarray([groups_of_item[i] for i in items], dtype=np.int64)
    if len(np.unique(groups)) < 2:
        return lambda: []
    sets = []
    for features in ("candidate", "pool"):
        keep = [j for j, n in enumerate(names) if features == "pool" or not n.startswith(POOL_FEATURE)]
        sets.append((features, X[:, keep], [names[j] for j in keep]))
    sets.append(("query", query_rows(ps, order),
                 [f"{n}:{k}" for k in ("rank", "z") for n in query_structure.feature_names()]))
    plan = held_out_plan(y, groups, ps.seed)     # one plan: the same folds for every feature set
    jobs: list[Callable[[], Any]] = []
    for _, M, nm in sets:
        jobs += [*held_out_jobs(M, y, plan, ps.seed), functools.partial(importances, M, y, nm, ps.seed)]
    boosted = pool.submit(jobs)
    some = _sample_items(order, groups_of_item, [len(ps.pools[i].candidate_ids) for i in order], ps.seed)
    Xt, yt, owner = text_probe.text_matrix(ps, some)
    tgroups = np.asarray([groups_of_item[i] for i in owner], dtype=np.int64)
    tplan = fits.group_folds(yt, tgroups, FOLDS)
    text = pool.submit([*text_probe.held_out_jobs(Xt, yt, tplan, ps.seed),
                        functools.partial(text_probe.top_terms, Xt, yt, ps.seed, TOP_FEATURES)])

    def finish() -> list[ProbeScore]:
        done = iter(boosted())
        out = []
        for features, _, _ in sets:
            scores = plan.scores([next(done) for _ in plan.folds])
            out.extend(_tally(ps, features, scores, y, items, next(done)))
        *predicted, top = text()
        out.extend(_tally(ps, "text", tplan.scores(predicted), yt, owner, text_probe.name_terms(ps, some, top, Xt)))
        return out
    return finish


def _sample_items(order: list[int], group_of: dict[int, int], sizes: list[int], seed: int) -> list[int]:
    """All items, or past MAX_TRAIN_ROWS candidate rows a seeded sample of whole query groups (in item order) that
    stays under it: the text probe then scores the sampled pools only (a big Visual Grounding build)."""
    if sum(sizes) <= MAX_TRAIN_ROWS:
        return order
    rows: dict[int, int] = defaultdict(int)
    for i, n in zip(order, sizes):
        rows[group_of[i]] += n
    keep, total = set(), 0
    for g in np.random.default_rng(seed).permutation(sorted(rows)):
        if total + rows[int(g)] <= MAX_TRAIN_ROWS:
            keep.add(int(g))
            total += rows[int(g)]
    return [i for i in order if group_of[i] in keep]


def query_rows(ps: PoolSet, order: list[int]) -> np.ndarray:
    """The query-aware structural rows (`query_structure`), pool-relative, in the probe's row order."""
    queries, cands = ps.query_by_id(), ps.candidate_by_id()
    table = query_structure.CountTable()
    return pool_relative_blocks([query_structure.structural_rows(
        queries[ps.pools[i].query_id], [cands[c] for c in ps.pools[i].candidate_ids], table) for i in order])


def summary(scores: list[ProbeScore]) -> dict[str, Any]:
    """What a validity report stores: the model, the rule, per feature set the importances and per subset the
    held-out P@1 against chance, every refusal and every pool-aware finding not (yet) enforced."""
    sets: dict[str, Any] = {}
    for s in scores:
        entry = sets.setdefault(s.features, {"model": MODELS[s.features], "enforced": s.features in ENFORCED_SETS,
                                             "importances": [list(x) for x in s.importances], "per_subset": {}})
        entry["per_subset"][s.subset] = {"score": round(s.score, 6), "chance": round(s.chance, 6), "n": s.n,
                                         "p_chance": float(f"{s.p_chance:.3g}"), "p_margin": float(f"{s.p_margin:.3g}")}
    return {"model": MODEL, "alpha": ALPHA, "margin": MARGIN,
            "rule": f"refuse when the held-out P@1 S over n items has P(X >= floor S) < {ALPHA:g} for "
                    f"X ~ Binomial(n, chance + {MARGIN:g})",
            "feature_sets": sets,
            "refusals": [s.line() for s in scores if s.refuses],
            "not_enforced": [s.line() for s in scores if s.p_margin < ALPHA and not s.refuses]}
