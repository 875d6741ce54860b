"""Hashed n-gram rows of documents built from their pieces, each distinct piece hashed once.

The text probe (`text_probe`) hashes every candidate's whole text: its segments joined with a newline (word 1- and
2-grams, tokens are runs of non-space) and its segments' edges joined end to end (character 1- to 3-grams); its
third block, the shapes of the document's two ends (character 2- to 4-grams), is one short piece per document
(`no_seams`), hashed once per distinct shape text. The
candidates of a pool set repeat their segments many times (a Visual Grounding family shares its haystack at every
depth, a Multi-Source Reasoning Hard variant is its Easy candidate with one unit swapped, filler units recur), so
hashing each document's whole text hashed the same text again and again: 129 million characters for the 15.7 million
distinct ones of the Visual Grounding sample.

A binary row is the set of columns some n-gram of the document hashes to, and the n-grams of a joined text are those
of its pieces plus those that cross a seam between two pieces. `hashed_union` hashes each distinct piece and each
distinct seam string once, with the very vectoriser the probe uses, and ORs them per document (a sparse product and
a binarisation), which gives the rows the vectoriser gives the joined texts, bit for bit
(`tests/test_text_pieces.py` compares the two on built pool sets and on adversarial texts):

- words (`word_seams`): tokens never contain the newline that joins the pieces, so the joined text's tokens are the
  pieces' tokens in order, and its bigrams are each piece's own plus, at each seam, "last token of the previous
  piece that has one" + " " + "first token of the next". The seam string "a b" hashes to the bigram and to a and b,
  which the pieces hold already.
- characters (`char_seams`): the vectoriser first collapses every run of two or more whitespace characters into one
  space; the blocks begin with \\x02 and end with \\x04 (not whitespace), so no run crosses a seam and the collapsed
  joined text is the collapsed blocks end to end. The n-grams (n <= 3) that cross a seam are within the last two
  characters of one collapsed block and the first two of the next, whose 1- and 2-grams the blocks hold already.
"""
from __future__ import annotations

import re
from typing import Callable, Sequence

import numpy as np

WHITESPACE_RUN = re.compile(r"\s\s+")   # scikit-learn's character analyzer collapses these to one space


def word_seams(pieces: Sequence[str]) -> list[str]:
    """The strings whose hashed words and bigrams add, to the pieces', the bigrams across the newline seams."""
    seams, last = [], None
    for piece in pieces:
        head = piece.split(None, 1)        # str.split's whitespace is the regex \s, what ends a \S+ token
        if not head:
            continue                        # a piece without tokens: the bigram spans it
        if last is not None:
            seams.append(f"{last} {head[0]}")
        last = piece.rsplit(None, 1)[-1]
    return seams


def char_seams(blocks: Sequence[str]) -> list[str]:
    """The strings whose character 1- to 3-grams add, to the blocks', those across each seam between blocks."""
    collapsed = [WHITESPACE_RUN.sub(" ", b) for b in blocks]
    return [a[-2:] + b[:2] for a, b in zip(collapsed, collapsed[1:])]


def no_seams(pieces: Sequence[str]) -> list[str]:
    """For a document that is one piece (the text probe's shape text): nothing crosses a seam."""
    return []


def hashed_union(vectoriser, pieces: Sequence[Sequence[str]], seams: Callable[[Sequence[str]], list[str]]):
    """One binary CSR row per document (its list of pieces): what `vectoriser` (binary, unnormalised) gives the
    document's joined text, from each distinct piece and seam string hashed once."""
    from scipy import sparse

    column: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for k, doc in enumerate(pieces):
        for text in (*doc, *seams(doc)):
            cols.append(column.setdefault(text, len(column)))
            rows.append(k)
    width = vectoriser.n_features
    if not column:
        return sparse.csr_matrix((len(pieces), width), dtype=np.float64)
    hashed = sparse.csr_matrix(vectoriser.transform(list(column)))
    incidence = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(pieces), len(column)))
    out = sparse.csr_matrix(incidence @ hashed)
    out.sum_duplicates()     # sorted column indices, as the vectoriser returns them
    out.data.fill(1.0)
    return out
