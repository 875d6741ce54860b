"""Okapi BM25 as a sparse "embedding": document vectors hold BM25 term weights, query
vectors hold term counts, so their dot product is the BM25 score.

Corpus statistics (document frequencies, average length) come from the candidates the run
ranks, passed to `fit`. IDF is the non-negative Lucene form log(1 + (N - n + 0.5)/(n + 0.5)).
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from ..documents import Document
from ..media import MediaStore
from .base import EmbeddingModel, ModelCard, Role

TOKEN = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


class BM25Model(EmbeddingModel):
    cacheable = False  # vectors depend on the corpus statistics of the run

    def __init__(self, k1: float = 1.5, b: float = 0.75, **_: Any) -> None:
        self.k1, self.b = float(k1), float(b)
        self.vocab: dict[str, int] = {}
        self.idf = np.zeros(0)
        self.avgdl = 0.0
        self._fitted = False  # a fitted corpus may have an empty vocabulary (e.g. video-only candidates)
        self.card = ModelCard(name="bm25", family="lexical", modalities=frozenset({"text"}), max_tokens=None,
                              similarity="dot", revision="1", settings={"k1": self.k1, "b": self.b,
                                                                        "tokenizer": r"lowercase \w+"},
                              notes="text only: images and videos are not seen")

    def fit(self, documents: Sequence[Document], media: MediaStore | None) -> None:
        df: Counter[str] = Counter()
        lengths = []
        for d in documents:
            toks = tokenize(d.text)
            lengths.append(len(toks))
            df.update(set(toks))
        self.vocab = {t: i for i, t in enumerate(sorted(df))}
        n = len(documents)
        freq = np.array([df[t] for t in sorted(df)], dtype=np.float64)
        self.idf = np.log1p((n - freq + 0.5) / (freq + 0.5))
        self.avgdl = float(np.mean(lengths)) if lengths else 0.0
        self._fitted = True

    def encode(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> sp.csr_matrix:
        if not self._fitted:
            raise RuntimeError("BM25 needs fit() on the candidate corpus before encoding")
        rows, cols, vals = [], [], []
        for r, d in enumerate(documents):
            counts = Counter(t for t in tokenize(d.text) if t in self.vocab)
            dl = sum(Counter(tokenize(d.text)).values())
            for term, tf in counts.items():
                j = self.vocab[term]
                if role == "query":
                    w = float(tf)
                else:
                    norm = self.k1 * (1 - self.b + self.b * dl / (self.avgdl or 1.0))
                    w = self.idf[j] * tf * (self.k1 + 1) / (tf + norm)
                rows.append(r)
                cols.append(j)
                vals.append(w)
        return sp.csr_matrix((vals, (rows, cols)), shape=(len(documents), len(self.vocab)), dtype=np.float64)
