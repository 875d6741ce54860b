"""Okapi BM25 as a sparse "embedding": document vectors hold BM25 term weights, query
vectors hold term counts, so their dot product is the BM25 score.

The weights come from `bm25s` (the library the builders' look-alike index uses too, so mmbench
has one BM25), indexed on the candidates the run ranks, passed to `fit`: Lucene IDF
log(1 + (N - n + 0.5)/(n + 0.5)), and the Okapi term factor tf (k1 + 1) / (tf + k1 (1 - b + b dl/avgdl))
(bm25s's "lucene" drops the constant k1 + 1; it is restored here so scores equal rank_bm25's
Okapi form with that IDF, which tests/test_bm25.py checks).
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from mmbench.data.documents import Document
from mmbench.data.lexical import bm25s_module, tokenize
from mmbench.data.media import MediaStore
from mmbench.models.base import EmbeddingModel, ModelCard, Role

if TYPE_CHECKING:
    import scipy.sparse as sp



class BM25Model(EmbeddingModel):
    cacheable = False  # vectors depend on the corpus statistics of the run

    def __init__(self, k1: float = 1.5, b: float = 0.75, **_: Any) -> None:
        import scipy.sparse as sp  # here, not at import: the task registry imports this module on every run

        self.k1, self.b = float(k1), float(b)
        self.vocab: dict[str, int] = {}
        self._weights = sp.csr_matrix((0, 0))
        self._rows: dict[str, int] = {}   # document text -> its row in the fitted weights
        self._fitted = False  # a fitted corpus may have an empty vocabulary (e.g. video-only candidates)
        self.card = ModelCard(name="bm25", family="lexical", modalities=frozenset({"text"}), max_tokens=None,
                              similarity="dot", revision="1", settings={"k1": self.k1, "b": self.b,
                                                                        "tokenizer": r"lowercase \w+",
                                                                        "library": "bm25s (lucene idf, okapi tf)"},
                              notes="text only: images and videos are not seen")

    def fit(self, documents: Sequence[Document], media: MediaStore | None) -> None:
        import scipy.sparse as sp

        tokens = [tokenize(d.text) for d in documents]
        self._rows = {}
        for i, d in enumerate(documents):
            self._rows.setdefault(d.text, i)   # the same text has the same weights
        if not any(tokens):
            self.vocab, self._weights = {}, sp.csr_matrix((len(documents), 0), dtype=np.float64)
        else:
            index = bm25s_module().BM25(k1=self.k1, b=self.b, method="lucene", dtype="float64")
            index.index(tokens, show_progress=False)
            s = index.scores
            width = len(s["indptr"]) - 1   # one column per term; bm25s's empty-string token has none
            weights = sp.csc_matrix((s["data"], s["indices"], s["indptr"]), shape=(s["num_docs"], width))
            # Columns in sorted term order: bm25s numbers terms in set-iteration order, which follows Python's
            # per-process string hashing, and a dot product summed in another column order differs in the last
            # bits (a Ray worker or a resumed run would store other scores).
            terms = sorted(t for t, j in index.vocab_dict.items() if t and j < width)
            self.vocab = {t: k for k, t in enumerate(terms)}
            self._weights = weights[:, [index.vocab_dict[t] for t in terms]].tocsr() * (self.k1 + 1)
        self._fitted = True

    def encode(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> "sp.csr_matrix":
        import scipy.sparse as sp

        if not self._fitted:
            raise RuntimeError("BM25 needs fit() on the candidate corpus before encoding")
        width = self._weights.shape[1]
        if role != "query":
            missing = [d.id for d in documents if d.text not in self._rows]
            if missing:
                raise RuntimeError(f"BM25 was fitted on another corpus: documents {missing[:3]} were not in it")
            return self._weights[[self._rows[d.text] for d in documents]].astype(np.float64)
        rows, cols, vals = [], [], []
        for r, d in enumerate(documents):
            for term, tf in Counter(t for t in tokenize(d.text) if t in self.vocab).items():
                rows.append(r)
                cols.append(self.vocab[term])
                vals.append(float(tf))
        return sp.csr_matrix((vals, (rows, cols)), shape=(len(documents), width), dtype=np.float64)
