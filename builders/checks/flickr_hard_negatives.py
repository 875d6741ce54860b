"""Invariants of the flickr_hard_negatives pool sets, checked on the built records (see mmbench.builders.validity)."""
from __future__ import annotations

from typing import Iterable

from mmbench.builders.validity import Violation
from mmbench.poolset import PoolSet

INVARIANTS: dict[str, str] = {}


def check(ps: PoolSet, checked: dict[str, int]) -> Iterable[Violation]:
    return []
