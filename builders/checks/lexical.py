"""The lexical ceiling: how far two cheap word matchers get on each subset (information, never a refusal).

- `bm25_first_unit`: BM25 (`bm25s`, the builders' look-alike settings: Robertson IDF, k1 = 1.5, b = 0.75) of the
  query's words against each candidate's *first text unit* (its first text segment: a title line, a report's
  opening quote), indexed per pool. A high score means one line gives the answer away.
- `query_ngrams`: how many of the query's distinct word 4-grams occur in the candidate's whole text. A high score
  means the query quotes its document.

Each is scored like a leak baseline, by the expected P@1 under a uniform tie-break, per subset and over all items;
the subset's ceiling is the better of the two. Easy pools may be lexical by design (their distractors are other
records, and a query names what it asks about); the ceiling says how much, and a Hard subset whose ceiling is above
its Easy one is worth a look (the Hard distractors should be as lexically close as the relevant document).
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Callable, Sequence

import numpy as np

from mmbench.builders.checks.leaks import expected_p1
from mmbench.builders.parts.lookalikes import LookalikeIndex
from mmbench.data.documents import Document, Text
from mmbench.data.lexical import tokenize
from mmbench.data.poolset import PoolSet

NGRAM = 4
NOTE = ("information, not a check: Easy pools may be lexical by design (a query names what it asks about, and "
        "the distractors are other records); Hard distractors should be as lexically close as the relevant document")


def first_unit(doc: Document) -> str:
    return next((s.text.strip() for s in doc.segments if isinstance(s, Text) and s.text.strip()), "")


def grams(words: Sequence[str]) -> set[str]:
    return {" ".join(words[i:i + NGRAM]) for i in range(len(words) - NGRAM + 1)}


class _QueryGrams:
    """Each candidate's word 4-grams made only of words some query uses (the only ones a query 4-gram can equal),
    memoised by id, so a long candidate is read once however many pools hold it."""

    def __init__(self, vocabulary: set[str]) -> None:
        self.vocabulary: set[str] = vocabulary
        self.memo: dict[str, set[str]] = {}

    def __call__(self, doc: Document) -> set[str]:
        if doc.id not in self.memo:
            words = tokenize(doc.text)
            keep = [w in self.vocabulary for w in words]
            self.memo[doc.id] = {" ".join(words[i:i + NGRAM]) for i in range(len(words) - NGRAM + 1)
                                 if all(keep[i:i + NGRAM])}
        return self.memo[doc.id]


def ngram_scores(query: str, docs: Sequence[Document], found: Callable[[Document], set[str]]) -> list[float]:
    """How many of the query's distinct word 4-grams each candidate's text holds."""
    wanted = grams(tokenize(query))
    return [float(len(wanted & found(d))) for d in docs]


class _PoolIndex:
    """BM25 over each candidate set's first text units, built once per set (pools over one set share it)."""

    def __init__(self) -> None:
        self.memo: dict[tuple[str, ...], tuple[LookalikeIndex | None, dict[str, int]]] = {}

    def __call__(self, query: str, docs: Sequence[Document]) -> list[float]:
        key = tuple(sorted(d.id for d in docs))
        if key not in self.memo:
            by_id = {d.id: d for d in docs}
            units = [first_unit(by_id[i]) for i in key]
            index = LookalikeIndex(list(key), units) if len(key) >= 2 and any(units) else None
            self.memo[key] = (index, {i: k for k, i in enumerate(key)})
        index, at = self.memo[key]
        if index is None:
            return [0.0] * len(docs)
        s = np.round(index.scores(query), 6)
        return [float(s[at[d.id]]) for d in docs]


def bm25_scores(query: str, docs: Sequence[Document]) -> list[float]:
    """BM25 of the query against each candidate's first text unit (one pool)."""
    return _PoolIndex()(query, docs)


def ceiling(ps: PoolSet) -> dict[str, Any]:
    """Per subset and over all items: each matcher's P@1, the chance, and the ceiling (the better matcher)."""
    queries, cands, index = ps.query_by_id(), ps.candidate_by_id(), _PoolIndex()
    found = _QueryGrams({w for q in ps.queries for w in tokenize(q.text)})
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for item in ps.pools:
        q = queries[item.query_id].text
        docs = [cands[c] for c in item.candidate_ids]
        rel = [c in set(item.relevant_ids) for c in item.candidate_ids]
        if not q.strip() or len(docs) < 2 or not any(rel):
            continue
        hits = {"bm25_first_unit": expected_p1(index(q, docs), rel),
                "query_ngrams": expected_p1(ngram_scores(q, docs, found), rel)}
        for subset in (item.subset, "all"):
            acc = sums[subset]
            acc["n"] += 1
            acc["chance"] += sum(rel) / len(rel)
            for k, v in hits.items():
                acc[k] += v
    per = {}
    for subset, acc in sorted(sums.items()):
        n = acc["n"]
        row = {k: round(acc[k] / n, 6) for k in ("bm25_first_unit", "query_ngrams", "chance")}
        per[subset] = {**row, "ceiling": max(row["bm25_first_unit"], row["query_ngrams"]), "n": int(n)}
    return {"matchers": {"bm25_first_unit": "BM25 (bm25s, Robertson, k1 1.5, b 0.75) of the query against each "
                                            "candidate's first text segment, indexed per pool",
                         "query_ngrams": f"distinct query word {NGRAM}-grams found in the candidate's text"},
            "note": NOTE, "per_subset": per, "hard_above_easy": hard_above_easy(per)}


def hard_above_easy(per: dict[str, dict[str, Any]]) -> list[str]:
    """Hard subsets whose ceiling is above the Easy subset of the same name ('.../hard/...' vs '.../easy/...')."""
    out = []
    for subset, row in per.items():
        easy = re.sub(r"(^|/)hard(/|$)", r"\1easy\2", subset)
        if easy != subset and easy in per and row["ceiling"] > per[easy]["ceiling"]:
            out.append(f"{subset}: lexical ceiling {row['ceiling']:.3f} above {easy}'s {per[easy]['ceiling']:.3f}")
    return out
