"""difflib's `SequenceMatcher(None, a, b).ratio()` for many pairs of short strings at once, with difflib's numbers.

The label-blind baseline `id_similarity` scores every candidate of every pool by difflib's ratio between the query's
id and the candidate's: 180,000 pairs on the Visual Grounding sample, each a small dynamic programme in Python.

The ratio is 2 M / (len(a) + len(b)), where M is the number of characters in difflib's matching blocks: it finds
the longest block a[i:i+k] == b[j:j+k] inside a box (first the whole strings), keeping the first one met with the
largest k (the smallest i, then the smallest j: its loop visits a's positions in order and b's in order, and
replaces the best only by a longer one), then does the same in the boxes left and right of it. With no junk (no
`isjunk`, and autojunk, which needs len(b) >= 200, does not apply) the block it keeps is maximal, so its extension
steps add nothing. Here every pair's run lengths L[i, j] (the matching characters ending at a[i], b[j]) are computed
once as arrays; a run inside a box is min(L[i, j], i - alo + 1, j - blo + 1), the first largest one in row-major
order is difflib's block, and all pairs' boxes advance together, round after round. M is summed as an integer and
the ratio computed with difflib's own expression, so every ratio is difflib's to the last bit
(`tests/test_check_speed.py` compares them on random strings). A pair with len(b) >= 200 goes to difflib itself.
"""
from __future__ import annotations

import difflib
from collections import defaultdict
from typing import Sequence

import numpy as np

AUTOJUNK_FROM = 200      # difflib drops popular characters of b from this length on
CHUNK = 20_000           # pairs of one length shape worked on at a time


def ratios(pairs: Sequence[tuple[str, str]]) -> list[float]:
    """difflib.SequenceMatcher(None, a, b).ratio() for each pair (a, b)."""
    out = [0.0] * len(pairs)
    by_shape: dict[tuple[int, int], list[int]] = defaultdict(list)
    for k, (a, b) in enumerate(pairs):
        if len(b) >= AUTOJUNK_FROM or not a or not b:
            out[k] = difflib.SequenceMatcher(None, a, b).ratio()
        else:
            by_shape[(len(a), len(b))].append(k)
    for (la, lb), where in by_shape.items():
        for start in range(0, len(where), CHUNK):
            part = where[start:start + CHUNK]
            matched = _matches([pairs[k][0] for k in part], [pairs[k][1] for k in part], la, lb)
            for k, m in zip(part, matched.tolist()):
                out[k] = 2.0 * m / (la + lb)
    return out


def _codes(texts: list[str], length: int) -> np.ndarray:
    return np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32).reshape(len(texts), length)


def _runs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """L[p, i, j]: how many characters match ending at a[p, i] and b[p, j]."""
    equal = a[:, :, None] == b[:, None, :]
    runs = np.zeros(equal.shape, dtype=np.int32)
    runs[:, 0, :] = equal[:, 0, :]
    for i in range(1, equal.shape[1]):
        runs[:, i, 0] = equal[:, i, 0]
        runs[:, i, 1:] = equal[:, i, 1:] * (runs[:, i - 1, :-1] + 1)
    return runs


def _matches(a_texts: list[str], b_texts: list[str], la: int, lb: int) -> np.ndarray:
    """M of each pair of strings of lengths la and lb."""
    runs = _runs(_codes(a_texts, la), _codes(b_texts, lb))
    matched = np.zeros(len(a_texts), dtype=np.int64)
    boxes = np.zeros((len(a_texts), 5), dtype=np.int64)      # pair, alo, ahi, blo, bhi
    boxes[:, 0], boxes[:, 2], boxes[:, 4] = np.arange(len(a_texts)), la, lb
    while len(boxes):
        shape = (boxes[:, 2] - boxes[:, 1]) * (lb + 1) + boxes[:, 4] - boxes[:, 3]
        boxes = boxes[np.argsort(shape, kind="stable")]
        shape = np.sort(shape, kind="stable")
        cuts = np.flatnonzero(np.diff(shape)) + 1
        found = [_largest(runs, same, *divmod(int(code[0]), lb + 1))
                 for same, code in zip(np.split(boxes, cuts), np.split(shape, cuts))]
        b, i0, j0, size = (np.concatenate(x) for x in zip(*found))
        np.add.at(matched, b[:, 0], size)
        left = (b[:, 1] < i0) & (b[:, 3] < j0)
        right = (i0 + size < b[:, 2]) & (j0 + size < b[:, 4])
        boxes = np.concatenate([
            np.column_stack([b[left, 0], b[left, 1], i0[left], b[left, 3], j0[left]]),
            np.column_stack([b[right, 0], (i0 + size)[right], b[right, 2], (j0 + size)[right], b[right, 4]])])
    return matched


def _largest(runs: np.ndarray, boxes: np.ndarray, h: int, w: int):
    """Each box's (h x w) longest block: (the boxes that hold one, its start in a, in b, its size)."""
    rows = boxes[:, 1, None] + np.arange(h)
    cols = boxes[:, 3, None] + np.arange(w)
    inside = runs[boxes[:, 0, None, None], rows[:, :, None], cols[:, None, :]]
    k = np.minimum(inside, np.minimum(np.arange(1, h + 1)[:, None], np.arange(1, w + 1)[None, :]))
    flat = k.reshape(len(boxes), -1)
    best = flat.argmax(axis=1)                      # the first largest in row-major order: difflib's block
    size = flat[np.arange(len(boxes)), best].astype(np.int64)
    keep = size > 0
    i0 = boxes[:, 1] + best // w - size + 1
    j0 = boxes[:, 3] + best % w - size + 1
    return boxes[keep], i0[keep], j0[keep], size[keep]
