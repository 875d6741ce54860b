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


class _Normalised:
    """Each candidate's words joined by single spaces, padded with one on each side (memoised by id)."""

    def __init__(self) -> None:
        self.memo: dict[str, str] = {}

    def __call__(self, doc: Document) -> str:
        if doc.id not in self.memo:
            self.memo[doc.id] = " " + " ".join(tokenize(doc.text)) + " "
        return self.memo[doc.id]


def ngram_scores(query: str, docs: Sequence[Document], text: Callable[[Document], str]) -> list[float]:
    words = tokenize(query)
    grams = {" " + " ".join(words[i:i + NGRAM]) + " " for i in range(len(words) - NGRAM + 1)}
    return [float(sum(g in text(d) for g in grams)) for d in docs]


def bm25_scores(query: str, docs: Sequence[Document]) -> list[float]:
    units = [first_unit(d) for d in docs]
    if len({d.id for d in docs}) < 2 or not any(units):
        return [0.0] * len(docs)
    return [float(x) for x in np.round(LookalikeIndex([d.id for d in docs], units).scores(query), 6)]


def ceiling(ps: PoolSet) -> dict[str, Any]:
    """Per subset and over all items: each matcher's P@1, the chance, and the ceiling (the better matcher)."""
    queries, cands, text = ps.query_by_id(), ps.candidate_by_id(), _Normalised()
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for item in ps.pools:
        q = queries[item.query_id].text
        docs = [cands[c] for c in item.candidate_ids]
        rel = [c in set(item.relevant_ids) for c in item.candidate_ids]
        if not q.strip() or len(docs) < 2 or not any(rel):
            continue
        found = {"bm25_first_unit": expected_p1(bm25_scores(q, docs), rel),
                 "query_ngrams": expected_p1(ngram_scores(q, docs, text), rel)}
        for subset in (item.subset, "all"):
            acc = sums[subset]
            acc["n"] += 1
            acc["chance"] += sum(rel) / len(rel)
            for k, v in found.items():
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
