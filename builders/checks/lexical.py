"""The lexical baseline: how far word matching alone gets on each subset, and the two lexical shortcuts refused.

Three matchers, each scored like a leak baseline by the expected P@1 under a uniform tie-break, per subset, per
dataset and difficulty (`leaks.groups`) and over all items:

- `bm25_whole_text`: BM25 of the query's words against each candidate's whole text, indexed per pool (Robertson
  IDF floored at 0, k1 = 1.5, b = 0.75: the builders' look-alike settings, `bm25s`'s scoring functions over term
  counts read once per candidate; a test checks it against a `bm25s` index of the pool's texts). The lexical
  baseline proper: what a bag of words gets on the whole pool.
- `bm25_first_unit`: the same against each candidate's *first text unit* (its first text segment: a title line, a
  report's opening quote). A high score means one line gives the answer away.
- `query_ngrams`: how many of the query's distinct word 4-grams occur in the candidate's whole text. A high score
  means the query quotes its document.

The subset's ceiling is the best of the three. Easy pools may be lexical by design (their distractors are other
records, and a query names what it asks about), so a high Easy figure refuses nothing. Two things are refused (the
common invariant `lexical_baseline`):

- **A Hard group lexically easier than its Easy group** (``x/hard/y`` against ``x/easy/y``, for subsets and for
  dataset and difficulty): Hard distractors are made to be as close to the query as the relevant candidate, so
  whole-text BM25 must not find the relevant one more often there. The test is one-sided Fisher exact on the BM25
  hits (Hard's summed P@1 rounded down, Easy's rounded up): refused when p < ALPHA (0.01), so two groups at the
  same true rate are refused in well under 1 % of builds.
- **A query its relevant candidate holds verbatim**: a group in which, in more than half of the pools, the query's
  words (at least VERBATIM_WORDS of them, lower-cased, in order) occur as one run in a relevant candidate and in
  no other candidate. A search for the query string answers those pools without ranking anything.
"""
from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from mmbench.builders.checks.leaks import expected_p1, groups
from mmbench.builders.parts.lookalikes import B, K1, LookalikeIndex
from mmbench.data.documents import Document, Text
from mmbench.data.lexical import bm25s_module, tokenize
from mmbench.data.poolset import PoolSet

NGRAM = 4
ALPHA = 0.01            # the Hard-against-Easy test's level (the learned probe's)
VERBATIM_WORDS = 4      # a query shorter than this is not looked for verbatim (a name is matched, not quoted)
NOTE = ("Easy pools may be lexical by design (a query names what it asks about, and the distractors are other "
        "records), so a high Easy figure refuses nothing; refused: a Hard group lexically easier than its Easy group "
        f"(whole-text BM25 hits, one-sided Fisher exact p < {ALPHA:g}) and a group where most relevant candidates "
        "alone hold their query verbatim")
MATCHERS = ("bm25_whole_text", "bm25_first_unit", "query_ngrams")
LONG_TEXT = 5000        # words past which a text's words are numbered in one pandas lookup
GRAM = np.dtype((np.void, 8 * NGRAM))   # a 4-gram's code: its four int64 word numbers as one byte string (exact)


def first_unit(doc: Document) -> str:
    return next((s.text.strip() for s in doc.segments if isinstance(s, Text) and s.text.strip()), "")


@dataclass
class _Row:
    """What the matchers read of one candidate: its length in words, the count of each word some query uses (by
    the word's number in `_QueryGrams.vocabulary`), the codes of its word 4-grams made only of such words, and its
    words joined by single spaces (for the verbatim search)."""
    length: int
    counts: np.ndarray
    grams: np.ndarray
    joined: str


class _QueryGrams:
    """Each candidate's `_Row`, memoised by id, so a long candidate is read once however many pools hold it; words
    are numbered in the vocabulary of the queries (the only words a matcher scores) and a 4-gram is coded as the
    bytes of its four word numbers, so reading a candidate is a few array operations after tokenising it.

    Each distinct text segment is tokenised and numbered once for every candidate that holds it (`segment`; a
    Visual Grounding family shares its haystack at every depth): `tokenize` finds no word across the newline that
    joins a document's text segments in `Document.text` (a word is a run of ``\\w``, and lower-casing, whose only
    context is the final sigma, looks no further than a newline), so the document's words are its segments' words
    end to end, and its joined words are the segments' non-empty joined words joined by one space."""

    def __init__(self, vocabulary: set[str]) -> None:
        import pandas as pd

        self.index = pd.Index(sorted(vocabulary), dtype=object)   # a hash table: words -> numbers in one call
        self.number = {w: k for k, w in enumerate(self.index)}
        self.memo: dict[str, _Row] = {}
        self.queries: dict[str, tuple[list[str], np.ndarray]] = {}
        self.segments: dict[str, tuple[int, np.ndarray, str]] = {}

    def ids(self, words: Sequence[str]) -> np.ndarray:
        """Each word's number in the vocabulary, -1 for a word no query uses (a long text in one pandas lookup,
        a short one word by word: the lookup's fixed cost is larger than a short text's words)."""
        if len(words) > LONG_TEXT:
            return self.index.get_indexer(list(words)).astype(np.int64)
        get = self.number.get
        return np.fromiter((get(w, -1) for w in words), dtype=np.int64, count=len(words))

    def query(self, text: str) -> tuple[list[str], np.ndarray]:
        """A query's words and the codes of its 4-grams, memoised (a Visual Grounding query ranks 144 cells)."""
        if text not in self.queries:
            words = tokenize(text)
            self.queries[text] = (words, self.codes(self.ids(words)))
        return self.queries[text]

    def codes(self, ids: np.ndarray) -> np.ndarray:
        """The distinct codes of the NGRAM-word windows of `ids` made only of vocabulary words."""
        if len(ids) < NGRAM:
            return np.zeros(0, dtype=GRAM)
        windows = np.lib.stride_tricks.sliding_window_view(ids, NGRAM)
        windows = np.ascontiguousarray(windows[(windows >= 0).all(axis=1)])
        return np.unique(windows.view(GRAM).ravel())

    def segment(self, text: str) -> tuple[int, np.ndarray, str]:
        """One text segment's word count, word numbers and words joined by single spaces, memoised by its text."""
        got = self.segments.get(text)
        if got is None:
            words = tokenize(text)
            got = self.segments[text] = (len(words), self.ids(words), " ".join(words))
        return got

    def row(self, doc: Document) -> _Row:
        if doc.id not in self.memo:
            parts = [self.segment(s.text) for s in doc.segments if isinstance(s, Text)]
            ids = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
            joined = " ".join(p[2] for p in parts if p[0])
            self.memo[doc.id] = _Row(sum(p[0] for p in parts), np.bincount(ids[ids >= 0], minlength=len(self.number)),
                                     self.codes(ids), " " + joined + " ")
        return self.memo[doc.id]


def ngram_scores(query: str, docs: Sequence[Document], found: _QueryGrams) -> list[float]:
    """How many of the query's distinct word 4-grams each candidate's text holds."""
    wanted = found.query(query)[1]
    return [float(len(np.intersect1d(wanted, found.row(d).grams, assume_unique=True))) for d in docs]


def bm25_whole(query: str, rows: Sequence[_Row], found: _QueryGrams) -> list[float]:
    """BM25 of the query against each candidate's whole text, the candidates of one pool the index: `bm25s`'s
    Robertson scoring functions (IDF floored at 0) over the counts `rows` hold, each query word counted as often as
    the query says it, as a `bm25s` index of the pool's texts scores it (rounded to 6 decimals: ties are ties)."""
    bm25s_module()            # bm25s, its logger quietened
    from bm25s import scoring

    asked = Counter(found.number[w] for w in found.query(query)[0] if w in found.number)
    terms = sorted(asked)
    tf = np.array([r.counts[terms] for r in rows], dtype=np.float64).reshape(len(rows), len(terms))
    length = np.array([max(1, r.length) for r in rows], dtype=np.float64)   # bm25s indexes an empty text as one word
    df = (tf > 0).sum(axis=0)
    idf_of = scoring._select_idf_scorer("robertson")
    idf = np.array([idf_of(int(d), N=len(rows)) if d else 0.0 for d in df]) * np.array([asked[t] for t in terms])
    tfc = scoring._select_tfc_scorer("robertson")(tf_array=tf, l_d=length[:, None], l_avg=length.mean(), k1=K1, b=B)
    return [float(v) for v in np.round((tfc * idf).sum(axis=1), 6)]


def verbatim(words: Sequence[str], rows: Sequence[_Row], rel: Sequence[bool]) -> bool:
    """Whether the query's words (at least VERBATIM_WORDS) occur as one run in a relevant candidate and in no
    other candidate of the pool."""
    if len(words) < VERBATIM_WORDS:
        return False
    run = " " + " ".join(words) + " "
    held = [run in r.joined for r in rows]
    return any(h and r for h, r in zip(held, rel)) and not any(h and not r for h, r in zip(held, rel))


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
    """Per group (`leaks.groups`): each matcher's P@1, the chance, the ceiling (the best matcher), the pools whose
    relevant candidate alone holds the query verbatim; and the refusals (`refusals`)."""
    queries, cands, index = ps.query_by_id(), ps.candidate_by_id(), _PoolIndex()
    found = _QueryGrams({w for q in ps.queries for w in tokenize(q.text)})
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for item in ps.pools:
        q = queries[item.query_id].text
        docs = [cands[c] for c in item.candidate_ids]
        rel = [c in set(item.relevant_ids) for c in item.candidate_ids]
        if not q.strip() or len(docs) < 2 or not any(rel):
            continue
        rows = [found.row(d) for d in docs]
        hits = {"bm25_whole_text": expected_p1(bm25_whole(q, rows, found), rel),
                "bm25_first_unit": expected_p1(index(q, docs), rel),
                "query_ngrams": expected_p1(ngram_scores(q, docs, found), rel),
                "verbatim": float(verbatim(found.query(q)[0], rows, rel))}
        for group in groups(item):
            acc = sums[group]
            acc["n"] += 1
            acc["chance"] += sum(rel) / len(rel)
            for k, v in hits.items():
                acc[k] += v
    per = {}
    for group, acc in sorted(sums.items()):
        n = acc["n"]
        row = {k: round(acc[k] / n, 6) for k in (*MATCHERS, "chance")}
        per[group] = {**row, "ceiling": max(row[k] for k in MATCHERS), "n": int(n), "verbatim": int(acc["verbatim"]),
                      "bm25_whole_text_hits": round(acc["bm25_whole_text"], 6)}
    return {"matchers": {"bm25_whole_text": "BM25 (bm25s scoring, Robertson, k1 1.5, b 0.75) of the query against "
                                            "each candidate's whole text, indexed per pool",
                         "bm25_first_unit": "BM25 (bm25s, Robertson, k1 1.5, b 0.75) of the query against each "
                                            "candidate's first text segment, indexed per pool",
                         "query_ngrams": f"distinct query word {NGRAM}-grams found in the candidate's text"},
            "note": NOTE, "per_subset": per, "hard_above_easy": hard_above_easy(per),
            "refusals": [f"{group}: {why}" for group, why in refusals(per)]}


def hard_above_easy(per: dict[str, dict[str, Any]]) -> list[str]:
    """Hard groups whose ceiling is above the Easy group of the same name ('.../hard/...' vs '.../easy/...')
    (information: the refusal is `refusals`' Fisher test on whole-text BM25)."""
    out = []
    for subset, row in per.items():
        easy = _easy_of(subset)
        if easy != subset and easy in per and row["ceiling"] > per[easy]["ceiling"]:
            out.append(f"{subset}: lexical ceiling {row['ceiling']:.3f} above {easy}'s {per[easy]['ceiling']:.3f}")
    return out


def _easy_of(group: str) -> str:
    return re.sub(r"(^|/)hard(/|$)", r"\1easy\2", group)


def hard_easier_p(hard: dict[str, Any], easy: dict[str, Any]) -> float:
    """One-sided Fisher exact p that the Hard group's whole-text BM25 hit rate is above the Easy group's (Hard's
    summed P@1 rounded down, Easy's rounded up, so tie-broken fractions never count towards a refusal)."""
    from scipy.stats import fisher_exact

    h = math.floor(hard["bm25_whole_text_hits"] + 1e-9)
    e = math.ceil(easy["bm25_whole_text_hits"] - 1e-9)
    table = [[h, hard["n"] - h], [e, easy["n"] - e]]
    return float(fisher_exact(table, alternative="greater")[1])


def refusals(per: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """(group, why) for each Hard group lexically easier than its Easy group and each group where the relevant
    candidate alone holds the query verbatim in more than half of the pools."""
    out = []
    for group, row in per.items():
        easy = per.get(_easy_of(group))
        if easy is not None and easy is not row:
            p = hard_easier_p(row, easy)
            if p < ALPHA:
                out.append((group, f"whole-text BM25 finds the relevant candidate more often on {group} "
                                   f"(P@1 {row['bm25_whole_text']:.3f}, n={row['n']}) than on {_easy_of(group)} "
                                   f"({easy['bm25_whole_text']:.3f}, n={easy['n']}): one-sided Fisher exact "
                                   f"p={p:.1e} < {ALPHA:g}; Hard distractors must be as close to the query"))
        if 2 * row["verbatim"] > row["n"]:
            out.append((group, f"the relevant candidate alone holds its query verbatim in {row['verbatim']} of "
                               f"{row['n']} pools of {group}: a string search answers them"))
    return out
