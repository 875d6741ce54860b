"""Batching by a token budget: sort by length, then fill each batch up to `budget` padded tokens.

Padded cost of a batch is (longest item) × (items), which is what a padded forward pass
computes. Sorting by length keeps that close to the real token count, and a batch is also
closed when taking the next (shorter) item would drop its share of real tokens below
`min_fill`, so every batch (and hence the whole run) wastes at most 1 − min_fill on padding.
"""
from __future__ import annotations

from typing import Sequence

DEFAULT_MIN_FILL = 0.9


def token_budget_batches(lengths: Sequence[int], budget: int, max_batch_size: int = 256,
                         min_fill: float = DEFAULT_MIN_FILL) -> list[list[int]]:
    """Indices grouped into batches (longest first) whose padded size stays within `budget` and whose
    real tokens are at least `min_fill` of the padded ones (0 turns that rule off)."""
    if budget <= 0:
        raise ValueError("token budget must be positive")
    if not 0 <= min_fill <= 1:
        raise ValueError("min_fill must be between 0 and 1")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = real = 0
    for i in order:
        length = max(1, lengths[i])
        n = len(current) + 1
        new_longest = max(longest, length)
        if current and (new_longest * n > budget or len(current) >= max_batch_size
                        or real + length < min_fill * new_longest * n):
            batches.append(current)
            current, new_longest, real = [], length, 0
        current.append(i)
        longest = new_longest
        real += length
    if current:
        batches.append(current)
    return batches


def fixed_size_batches(n: int, size: int) -> list[list[int]]:
    """Indices in input order, `size` at a time (the baseline batching)."""
    return [list(range(i, min(n, i + size))) for i in range(0, n, size)]


def padding_ratio(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> float:
    """Padded tokens computed divided by real tokens (1.0 means no padding)."""
    real = sum(max(1, lengths[i]) for b in batches for i in b)
    padded = sum(max(max(1, lengths[i]) for i in b) * len(b) for b in batches if b)
    return padded / real if real else 1.0
