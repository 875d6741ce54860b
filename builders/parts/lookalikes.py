"""BM25 look-alike retrieval over a whole report corpus (Logical Summarization's Hard distractors).

A look-alike of a report is another report that BM25 ranks high for the report's summary:
lexically similar to what the query says, but a different document. The index is built once
over every report the source holds, not just the sampled queries. It uses `bm25s` (the
vectorised library; `perf/bm25_libraries.py` checks it ranks like `rank-bm25` and measures the
speed ratio) with Robertson IDF (negative IDF floored at 0), k1 = 1.5, b = 0.75.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mmbench.data.lexical import bm25s_module, tokenize

K1 = 1.5
B = 0.75
METHOD = "robertson"


@dataclass(frozen=True)
class Lookalike:
    doc_id: str
    rank: int        # 1 = most similar other document
    score: float


class LookalikeIndex:
    """BM25 over `texts` (one per document id); ask it for the documents nearest a query."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str], k1: float = K1, b: float = B) -> None:
        bm25s = bm25s_module()
        if len(ids) != len(texts) or len(ids) < 2:
            raise ValueError("a look-alike index needs at least two documents, one text per id")
        if len(set(ids)) != len(ids):
            raise ValueError("document ids in the look-alike index must be unique")
        self.ids = list(ids)
        self._pos = {d: i for i, d in enumerate(self.ids)}
        self._bm25 = bm25s.BM25(k1=k1, b=b, method=METHOD)
        self._bm25.index([tokenize(t) or ["<empty>"] for t in texts], show_progress=False)
        self._vocab = self._bm25.vocab_dict
        self.params = {"library": f"bm25s {bm25s.__version__}", "method": METHOD, "k1": k1, "b": b,
                       "tokenizer": r"lowercase \w+", "documents": len(self.ids)}

    def scores(self, query: str) -> np.ndarray:
        toks = [t for t in tokenize(query) if t in self._vocab]
        if not toks:
            return np.zeros(len(self.ids))
        return np.asarray(self._bm25.get_scores(toks), dtype=np.float64)

    def nearest(self, query: str, k: int, exclude: Sequence[str] = ()) -> list[Lookalike]:
        """Top `k` documents for `query` other than `exclude`, best first (ties by id order)."""
        s = self.scores(query)
        banned = {self._pos[d] for d in exclude if d in self._pos}
        order = np.lexsort((np.arange(len(s)), -np.round(s, 6)))
        out: list[Lookalike] = []
        for i in order:
            if int(i) in banned:
                continue
            out.append(Lookalike(self.ids[int(i)], len(out) + 1, float(s[i])))
            if len(out) == k:
                break
        return out
