"""The pool-aware part of a pool set's leak audit in words, one line per baseline.

The validity report in a manifest (``validity`` -> ``leak_audit`` -> ``pool_aware``, written by
`mmbench.builders.checks.pool_aware.summary`) holds each query-blind pool-aware baseline's P@1 over all items against
chance, its worst subset and whether its leak refuses the pool set (the medoid: its one-sided rule per group, under
``centre``). `mmbench build`, `mmbench validate` and the
dataset card print the same lines from it, so the three never disagree.
"""
from __future__ import annotations

from typing import Any


def pool_aware_lines(leak_audit: dict[str, Any] | None) -> list[str]:
    """One line per pool-aware baseline, or nothing for a report written before the pool-aware audit."""
    pooled = (leak_audit or {}).get("pool_aware")
    if not pooled:
        return []
    enforced = set(pooled.get("enforced", ()))
    centre = pooled.get("centre") or {}
    out = []
    for name, row in sorted((pooled.get("all") or {}).items()):
        worst = (pooled.get("worst_subset") or {}).get(name)
        where = (f"; worst subset {worst['subset']} {worst['score']:.3f} (p={worst['p_value']:.2g})"
                 if worst else "")
        verdict = "refuses the pool set if it leaks" if name in enforced else "reported, refuses nothing"
        if name == centre.get("baseline"):
            verdict = (f"refuses the pool set when a subset, a dataset and difficulty or all items score "
                       f"significantly above chance + {centre['margin']:g} (one-sided p < {centre['alpha']:g})")
        out.append(f"{name}: P@1 {row['score']:.3f} over {row['n']} items (chance {row['chance']:.3f}, binomial "
                   f"p={row['p_value']:.2g}){where}; {verdict}")
    return out
