"""Seeded random generators: one per purpose, derived from the build seed and a few labels."""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np


def seeded_rng(seed: int, *parts: Any) -> np.random.Generator:
    digest = hashlib.sha256(":".join(map(str, (seed, *parts))).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))
