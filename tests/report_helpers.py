"""Synthetic per-query results for the statistics and report tests (no model is run)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mmbench.evaluators.metrics import first_relevant_rank, item_metrics
from mmbench.results.mteb_layout import summary_json
from mmbench.results.store import write_results

DEPTHS = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
LENGTHS = ["256", "1k", "4k", "32k"]
POOL = 25


def _row(item_id, subset, rank, rng, **meta):
    cands = [f"c{k}" for k in range(POOL)]
    order = list(rng.permutation(cands[1:]))
    order.insert(rank - 1, cands[0])
    scores = sorted(rng.random(POOL).tolist(), reverse=True)
    row = {"item_id": item_id, "query_id": item_id.split("@")[0], "subset": subset, "relevant_ids": [cands[0]],
           "ranked_ids": order, "scores": scores, "first_relevant_rank": first_relevant_rank(order, [cands[0]])}
    row.update(item_metrics(order, [cands[0]]))
    row.update(meta)
    return row


def _rank(rng, p_top: float) -> int:
    return 1 if rng.random() < p_top else int(rng.integers(2, POOL + 1))


def grounding_per_query(seed: int = 0, skill: float = 0.6, mid_loss: float = 0.3, mixed_loss: float = 0.0,
                        needles: int = 6) -> pd.DataFrame:
    """Visual-grounding-like items: needle × depth × length × background, text and image anchors."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in range(needles):
        anchor = "text" if n % 2 == 0 else "image"
        for d in DEPTHS:
            for i, length in enumerate(LENGTHS):
                for bg in ("text", "mixed", "image"):
                    p = skill - 0.08 * i - mid_loss * (1 - (2 * d - 1) ** 2) - (mixed_loss if bg == "mixed" else 0.0)
                    rows.append(_row(f"q{n}@{d}@{length}@{bg}", f"{anchor}_anchor/{bg}", _rank(rng, min(max(p, 0.02), 0.98)), rng,
                                     length_bin=length, length_tokens=int(float(length.rstrip("k")) * (1000 if "k" in length else 1)),
                                     depth=d, background_modality=bg, anchor_kind=anchor, needle_id=f"needle{n}"))
    return pd.DataFrame(rows)


def real_per_query(seed: int = 0, easy: float = 0.8, hard: float = 0.3, n: int = 10) -> pd.DataFrame:
    """Real-task-like items: dataset × difficulty × length, no depth."""
    rng = np.random.default_rng(seed)
    rows = []
    for ds in ("hotpotqa", "mmdocrag"):
        for diff, p in (("easy", easy), ("hard", hard)):
            for i, length in enumerate(("8k", "16k", "32k")):
                for q in range(n):
                    rows.append(_row(f"{ds}-{q}@{diff}@{length}", f"{ds}/{diff}/{length}", _rank(rng, p - 0.05 * i), rng,
                                     length_bin=length, difficulty=diff, dataset=ds))
    return pd.DataFrame(rows)


def write_run(out: Path, per_query: pd.DataFrame, model: str, task: str = "visual_grounding",
              content_hash: str = "hash-aaaa") -> Path:
    summary = summary_json(task, "1", content_hash, {"name": model, "revision": "test"}, per_query,
                           {"n_items": len(per_query)}, evaluation_time=0.0)
    write_results(out, per_query, pd.DataFrame({"doc_id": ["x"], "tokens_seen": [1]}), summary)
    return out
