"""Selection robustness (Appendix K): top-1 pick as the candidate pool grows from the worst encoder.

For each LLM, encoders are ordered by ground-truth Avg ascending; for pool size m = 1..M the pool
is the m worst encoders, the method picks its highest-scoring encoder (ties → the one listed first
in ground-truth order, i.e. the lower-GT one: conservative), and we report the pick's GT and the
oracle (best GT in the pool).
"""
from __future__ import annotations

import pandas as pd


def selection_curve(merged: pd.DataFrame, *, target: str = "Avg") -> pd.DataFrame:
    rows = []
    for llm, g in merged.groupby("llm", sort=False):
        g = g.sort_values([target, "encoder"], kind="stable").reset_index(drop=True)
        s = g["score"].to_numpy(float)
        y = g[target].to_numpy(float)
        best = 0
        for m in range(1, len(g) + 1):
            if s[m - 1] > s[best]:
                best = m - 1
            rows.append({"llm": llm, "pool_size": m, "picked": g["encoder"][best], "picked_gt": y[best],
                         "oracle_gt": y[m - 1], "regret": y[m - 1] - y[best]})
    return pd.DataFrame(rows)


def summarize(curve: pd.DataFrame) -> pd.DataFrame:
    return curve.groupby("llm", sort=False).agg(mean_regret=("regret", "mean"), final_regret=("regret", "last"),
                                                 final_pick=("picked", "last")).reset_index()
