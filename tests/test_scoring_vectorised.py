"""The block scoring of `mmbench.running.scoring` gives the per-item path's rows bit for bit (issue 38)."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from mmbench.data.poolset import PoolItem
from mmbench.running.runner import PoolScorer, _score_item
from mmbench.running.scoring import score_items


def _pools(seed: int) -> tuple[list[PoolItem], dict, dict, dict]:
    rng = np.random.default_rng(seed)
    # few distinct coordinates and dims: many exactly tied scores; pools of several sizes; 1-3 relevant ids
    c_vecs = {f"c{i}": rng.integers(-1, 2, size=3).astype(np.float32) for i in range(40)}
    q_vecs = {f"q{i}": rng.integers(-1, 2, size=3).astype(np.float32) for i in range(30)}
    c_vecs["c0"] = np.full(3, np.nan, dtype=np.float32)  # a non-finite score takes the seeded path too
    items = []
    for i in range(200):
        n = int(rng.choice([1, 3, 12, 25]))
        cands = [str(c) for c in rng.choice(list(c_vecs), size=n, replace=False)]
        rel = [str(c) for c in rng.choice(cands, size=min(n, int(rng.integers(1, 4))), replace=False)]
        meta = {"bin": int(rng.integers(0, 3))} if i % 2 else {"bin": 1, "tags": ["a", "b"]}
        items.append(PoolItem(f"item{i}", f"q{int(rng.integers(0, 32))}", f"s{i % 3}", cands, rel, meta))
    failures = {"c5": "model error: boom"}
    return items, q_vecs, c_vecs, failures


def _parquet(rows: list[dict]) -> bytes:
    buf = io.BytesIO()
    pd.DataFrame(rows).to_parquet(buf, index=False)
    return buf.getvalue()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("similarity", ["cosine", "dot"])
def test_block_scoring_matches_the_per_item_path(seed: int, similarity: str) -> None:
    items, q_vecs, c_vecs, failures = _pools(seed)
    scorer = PoolScorer(c_vecs, similarity)
    old = [_score_item(p, q_vecs, c_vecs, scorer, 7, failures) for p in items]
    ready = [p.query_id in q_vecs and p.query_id not in failures
             and all(c in c_vecs and c not in failures for c in p.candidate_ids) for p in items]
    assert 0 < sum(ready) < len(items)  # both paths are exercised
    new = score_items(items, ready, lambda p: scorer(q_vecs[p.query_id], p.candidate_ids),
                      lambda p: _score_item(p, q_vecs, c_vecs, scorer, 7, failures), 7)
    for a, b in zip(old, new):
        assert list(a) == list(b)
        assert repr(a) == repr(b)  # the same values, types and float bits (nan included)
    assert _parquet(old) == _parquet(new)
