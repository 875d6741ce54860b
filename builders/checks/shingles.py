"""Word shingles of documents as stable 64-bit codes, and their pairwise overlap.

Shared by the pool-aware medoid baseline (`pool_aware`), Logical Summarization's `hard_family_no_centre` invariant
and the learned probe's pool-overlap feature (`probe_features`), which each cut documents into their own word lists.

A code depends on the words alone, never on the process: each word's number is the first 8 bytes of its BLAKE2b
digest (not Python's `hash`, which changes with PYTHONHASHSEED, and not the order words were first seen), and a
shingle of k words w_1..w_k is coded as the polynomial

    code = sum_j id(w_j) * M^(k-j)  (mod 2^64),  M = 0x9E3779B97F4A7C15 (odd),

computed with wrapping uint64 arithmetic. An image or a video frame is one shingle coded from the BLAKE2b digest of
its content-addressed ref (a separate domain: the digest's input starts with a byte no word contains). Equal shingles
always get equal codes; two different shingles share a code only by a 64-bit accident: for a fixed pair the chance
is at most 2^-58 over the word numbers (the coefficients M^j are odd, their differences have at most 5 factors of
two for k <= 5), so the expected number of colliding pairs among N distinct shingles is below N^2 / 2^59 — under
1e-5 for the ten million shingles of the largest default build. `tests/test_shingles.py` counts collisions against
exact tuple sets on built pool sets (zero) and checks that codes are the same under several hash seeds.
"""
from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

MIX = np.uint64(0x9E3779B97F4A7C15)   # odd multiplier of the polynomial shingle code (wraps modulo 2^64)
DENSE_CELLS = 1 << 24    # incidence matrices up to this many cells (64 MiB of float32) are multiplied dense


def stable_id(token: str) -> int:
    """A word's (or a media ref's) 64-bit number: the first 8 bytes of its BLAKE2b digest, little-endian."""
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")


class ShingleCoder:
    """Stable shingle codes of word lists, with a cache of word numbers shared between calls."""

    def __init__(self, words: int) -> None:
        self.words = words
        self.ids: dict[str, int] = {}

    def word_ids(self, words: Sequence[str]) -> np.ndarray:
        ids = self.ids
        for w in words:
            if w not in ids:
                ids[w] = stable_id(w)
        return np.fromiter(map(ids.__getitem__, words), dtype=np.uint64, count=len(words))

    def codes(self, words: Sequence[str]) -> np.ndarray:
        """The code of every window of `self.words` consecutive words (one code of all words when there are
        fewer; none for no words), in text order, duplicates kept."""
        return self.codes_of_ids(self.word_ids(words))

    def codes_of_ids(self, ids: np.ndarray) -> np.ndarray:
        """`codes` of the words whose numbers (`word_ids`) are `ids`."""
        k = min(self.words, len(ids))
        codes = np.zeros(len(ids) - k + 1 if k else 0, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for j in range(k):
                codes = codes * MIX + ids[j:len(ids) - k + 1 + j]
        return codes

    def media(self, ref: str) -> int:
        """The one shingle of an image or a video frame, from its content-addressed ref."""
        return stable_id("\x00" + ref)


def distinct(codes: np.ndarray) -> np.ndarray:
    """The sorted distinct values of `codes` (a sort and a mask: several times faster than np.unique here)."""
    codes = np.sort(codes)
    return codes[np.concatenate(([True], codes[1:] != codes[:-1]))] if len(codes) else codes


def intersections(sets: Sequence[np.ndarray]) -> np.ndarray:
    """(n x n) float64 counts |A_i & A_j| of n sets of distinct codes (exact: counts are far below 2^53).

    Each code is numbered by its place among the distinct codes of all the sets (one stable sort, which merges
    the sets' sorted runs), and the 0/1 incidence matrix (sets x codes) is multiplied by its transpose: dense while
    it is small (float32 sums of 0/1 are exact below 2^24, and a count is at most one set's size), else sparse."""
    from scipy import sparse  # only when an audit runs (the task registry imports the checks)

    sizes = np.array([len(a) for a in sets], dtype=np.int64)
    everything = np.concatenate(list(sets)) if len(sets) else np.zeros(0, dtype=np.uint64)
    order = np.argsort(everything, kind="stable")
    ranked = everything[order]
    column = np.concatenate(([0], np.cumsum(ranked[1:] != ranked[:-1]))) if len(ranked) else order
    rows = np.repeat(np.arange(len(sets)), sizes)[order]
    width = int(column[-1]) + 1 if len(column) else 0
    if len(sets) * width <= DENSE_CELLS and sizes.max(initial=0) < 1 << 24:
        incidence = np.zeros((len(sets), width), dtype=np.float32)
        incidence[rows, column] = 1.0
        return (incidence @ incidence.T).astype(np.float64)
    matrix = sparse.csr_matrix((np.ones(len(column)), (rows, column)), shape=(len(sets), width))
    return (matrix @ matrix.T).toarray()
