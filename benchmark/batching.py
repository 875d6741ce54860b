"""Batching by a token budget: sort by length, then fill each batch up to `budget` padded tokens.

Padded cost of a batch is (longest item) × (items), which is what a padded forward pass
computes; sorting by length keeps that close to the real token count.
"""
from __future__ import annotations

from typing import Sequence


def token_budget_batches(lengths: Sequence[int], budget: int, max_batch_size: int = 256) -> list[list[int]]:
    """Indices grouped into batches whose padded size stays within `budget` (longest first)."""
    if budget <= 0:
        raise ValueError("token budget must be positive")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        length = max(1, lengths[i])
        new_longest = max(longest, length)
        if current and (new_longest * (len(current) + 1) > budget or len(current) >= max_batch_size):
            batches.append(current)
            current, new_longest = [], length
        current.append(i)
        longest = new_longest
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
