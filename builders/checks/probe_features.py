"""Query-blind features of each candidate in each pool: what the learned shortcut probe may read.

A feature says something about a candidate that a model should *not* be able to use: its size (unified tokens,
characters, text segments, images, video frames, media bytes), its id (length, digits, the value of an opaque
hex id), where it is stored in the pool, any numeric metadata column an evaluator sees, and how much of its text it
shares with the rest of the pool (word 5-gram shingles: the Jaccard overlap with each other candidate, averaged).
None of them reads the query or the label.

Each raw feature is turned into two pool-relative ones, because a shortcut is relative ("the relevant document is 3 %
longer than the others in its pool"): its rank in the pool scaled to [0, 1] (ties share the mean rank) and its
z-score within the pool (0 where the pool has no spread). `pool_rows` returns one row per (pool, candidate) in stored
order. Everything is exact integer or float64 arithmetic in a fixed order, so the same pool set gives the same matrix
on every machine.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from mmbench.builders.checks.shingles import ShingleCoder, distinct, intersections
from mmbench.data.documents import Document, Image, Text, Video
from mmbench.data.lexical import tokenize
from mmbench.data.media import MediaError, MediaStore
from mmbench.data.poolset import PoolSet

SHINGLE = 5                      # words per shingle in the pool-overlap feature
BASE_FEATURES = ("tokens", "text_chars", "text_segments", "images", "video_frames", "media_bytes", "id_length",
                 "id_digits", "id_value", "position", "pool_overlap")
HEX_ID = re.compile(r"^[a-z]+-([0-9a-f]{6,})$")


class _MediaSizes:
    """File sizes of media refs under `root` (0 without a root, for a missing file or a ref leaving the folder:
    loading the pool set refuses those). Where a ref may lead is `MediaStore.path`'s rule, not a copy of it."""

    def __init__(self, root: Path | None) -> None:
        self.store: MediaStore | None = MediaStore(root) if root is not None else None
        self.sizes: dict[str, int] = {}

    def __call__(self, ref: str) -> int:
        if ref not in self.sizes:
            self.sizes[ref] = self._size(ref)
        return self.sizes[ref]

    def _size(self, ref: str) -> int:
        if self.store is None:
            return 0
        try:
            path = self.store.path(ref)
        except MediaError:
            return 0
        return path.stat().st_size if path.is_file() else 0


def _id_value(doc_id: str) -> float:
    m = HEX_ID.match(doc_id)
    return int(m.group(1)[:12], 16) / 16 ** min(12, len(m.group(1))) if m else 0.0


class _Shingles:
    """Sorted distinct stable codes (`shingles.ShingleCoder`) of each document's word 5-grams, over its whole text.

    The words of a text segment are numbered once for every document that holds it: `tokenize` finds no word
    across the newline that joins a document's segments in `Document.text`, so the document's words are its text
    segments' words end to end (and its shingles cross segments as before)."""

    def __init__(self) -> None:
        self.coder = ShingleCoder(SHINGLE)
        self.segments: dict[str, np.ndarray] = {}
        self.memo: dict[str, np.ndarray] = {}

    def _ids(self, text: str) -> np.ndarray:
        got = self.segments.get(text)
        if got is None:
            got = self.segments[text] = self.coder.word_ids(tokenize(text))
        return got

    def __call__(self, doc: Document) -> np.ndarray:
        if doc.id not in self.memo:
            ids = [self._ids(s.text) for s in doc.segments if isinstance(s, Text)]
            words = np.concatenate(ids) if ids else np.zeros(0, dtype=np.uint64)
            self.memo[doc.id] = distinct(self.coder.codes_of_ids(words))
        return self.memo[doc.id]


def _numeric_columns(ps: PoolSet, kept_apart: Iterable[str]) -> list[str]:
    hidden, seen = set(kept_apart), set()
    numeric: dict[str, bool] = {}
    for c in ps.candidates:
        for k, v in c.meta.items():
            if k in hidden:
                continue
            seen.add(k)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            numeric[k] = numeric.get(k, True) and ok
    return sorted(k for k in seen if numeric.get(k))


def raw_features(doc: Document, position: int, size: int, media: _MediaSizes) -> list[float]:
    """The candidate-alone raw features (all but the pool overlap), in BASE_FEATURES order."""
    texts = [s for s in doc.segments if isinstance(s, Text)]
    images = sum(isinstance(s, Image) for s in doc.segments)
    frames = sum(len(s.frames) for s in doc.segments if isinstance(s, Video))
    return [float(doc.tokens), float(sum(len(s.text) for s in texts)), float(len(texts)), float(images),
            float(frames), float(sum(media(r) for r in doc.media_refs())), float(len(doc.id)),
            float(sum(ch.isdigit() for ch in doc.id)), _id_value(doc.id), position / max(1, size - 1)]


def pool_relative(raw: np.ndarray) -> np.ndarray:
    """(candidates x features) -> (candidates x 2·features): each feature's rank in [0, 1] and its z-score."""
    from scipy.stats import rankdata  # scipy.stats only when a probe runs (the task registry imports this module)

    ranks = (rankdata(raw, axis=0) - 1) / max(1, raw.shape[0] - 1)
    sd = raw.std(axis=0)
    z = np.where(sd > 0, (raw - raw.mean(axis=0)) / np.where(sd > 0, sd, 1.0), 0.0)
    return np.column_stack([ranks, z])


def pool_relative_blocks(blocks: list[np.ndarray]) -> np.ndarray:
    """`pool_relative` of each block (one pool's raw rows), stacked in order: the blocks of one shape are turned
    together, a rank and a mean and spread along the candidate axis of one 3-D array. numpy reduces that axis in
    the order it reduces a single block's first axis, so every row is the same bits (tests/test_check_speed.py)."""
    from scipy.stats import rankdata

    if not blocks:
        return np.zeros((0, 0))
    out: list[np.ndarray] = [np.zeros(0)] * len(blocks)
    by_shape: dict[tuple[int, ...], list[int]] = {}
    for k, b in enumerate(blocks):
        by_shape.setdefault(b.shape, []).append(k)
    for (n, _), where in by_shape.items():
        raw = np.stack([blocks[k] for k in where])
        ranks = (rankdata(raw, axis=1) - 1) / max(1, n - 1)
        sd = raw.std(axis=1, keepdims=True)
        z = np.where(sd > 0, (raw - raw.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1.0), 0.0)
        both = np.concatenate([ranks, z], axis=2)
        for j, k in enumerate(where):
            out[k] = both[j]
    return np.vstack(out)


def feature_names(columns: Sequence[str]) -> list[str]:
    base = [*BASE_FEATURES, *(f"meta:{c}" for c in columns)]
    return [f"{b}:rank" for b in base] + [f"{b}:z" for b in base]


def _overlaps(sets: list[np.ndarray]) -> np.ndarray:
    """(n x n) Jaccard overlaps of n shingle sets (1.0 for two empty sets), |a ∩ b| / |a ∪ b| for each pair."""
    inter = intersections(sets)
    size = np.array([len(a) for a in sets], dtype=np.float64)
    union = size[:, None] + size[None, :] - inter
    return np.divide(inter, union, out=np.ones_like(inter), where=union > 0)


def _mean_overlap(ids: list[str], by_set: dict[tuple[str, ...], tuple[dict[str, int], np.ndarray]],
                  shingles: _Shingles, cands: dict[str, Document]) -> list[float]:
    """Each candidate's mean overlap with the pool's other candidates, averaged in stored order (the pair matrix
    is computed once per candidate set: the pools of a pool set repeat their candidate sets)."""
    key = tuple(sorted(set(ids)))
    if key not in by_set:
        by_set[key] = ({c: k for k, c in enumerate(key)}, _overlaps([shingles(cands[c]) for c in key]))
    where, overlap = by_set[key]
    perm = np.array([where[c] for c in ids])
    full = overlap[np.ix_(perm, perm)]
    if len(key) == len(ids):
        return [float(v) for v in full[~np.eye(len(ids), dtype=bool)].reshape(len(ids), -1).mean(axis=1)]
    other = np.array(ids)
    return [float(np.mean(full[k][other != c])) for k, c in enumerate(ids)]


def pool_rows(ps: PoolSet, kept_apart: Iterable[str] = (), media_root: Path | None = None):
    """(X, relevant 0/1, item index per row, feature names): one row per candidate of each labelled pool, pools in
    the order of their ids (the order `load_poolset` gives), so the folds, and the probe's figures, are the same at
    build time and in `mmbench validate`."""
    columns = _numeric_columns(ps, kept_apart)
    cands, media, shingles = ps.candidate_by_id(), _MediaSizes(media_root), _Shingles()
    alone: dict[str, list[float]] = {}      # candidate id -> its raw features but the position
    by_set: dict[tuple[str, ...], tuple[dict[str, int], np.ndarray]] = {}
    blocks, labels, items = [], [], []
    for i in sorted(range(len(ps.pools)), key=lambda j: ps.pools[j].id):
        item = ps.pools[i]
        rel = set(item.relevant_ids)
        n = len(item.candidate_ids)
        if n < 2 or not rel:
            continue
        overlap = _mean_overlap(item.candidate_ids, by_set, shingles, cands)
        rows = []
        for k, c in enumerate(item.candidate_ids):
            if c not in alone:
                d = cands[c]
                alone[c] = raw_features(d, 0, n, media)[:-1] + [float(d.meta.get(m, 0.0)) for m in columns]
            base = alone[c]
            rows.append(base[:-len(columns) or None] + [k / max(1, n - 1), overlap[k]] + base[len(base) - len(columns):])
        blocks.append(np.asarray(rows, dtype=np.float64))
        labels.extend(float(c in rel) for c in item.candidate_ids)
        items.extend([i] * n)
    width = 2 * (len(BASE_FEATURES) + len(columns))
    X = pool_relative_blocks(blocks) if blocks else np.zeros((0, width))
    return X, np.asarray(labels), np.asarray(items, dtype=np.int64), feature_names(columns)
