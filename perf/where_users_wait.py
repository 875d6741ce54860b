"""Issue 38's figures in one run: a warm re-run against the import floor, and mmbench against stock mteb.

Usage: python perf/where_users_wait.py [--runs 5] [--pairs 2]
Runs `perf/warm_floor.py` (the cut Visual Grounding sample, every vector cached: the warm CLI run against a process
that only imports numpy, pandas, pyarrow and mmbench) and `perf/mteb_vs_mmbench.py` (MiniLM on the Multi-Source
Reasoning sample, cold: stock mteb with a stock SentenceTransformer against `mmbench run`, each pair reading the same
text), then prints the ratios side by side with the targets. Takes about 2 min per mteb round on two cores; read the
medians, and rerun on a loaded machine.
"""
from __future__ import annotations

import argparse

import mteb_vs_mmbench  # perf/ is on sys.path when this script runs
import warm_floor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="warm runs (and floor processes), alternating")
    ap.add_argument("--pairs", type=int, default=2, help="rounds of the mteb comparison")
    args = ap.parse_args()
    print("== warm re-run against the import floor (perf/warm_floor.py)")
    warm = warm_floor.measure(runs=args.runs)
    print("\n== mmbench against stock mteb, cold (perf/mteb_vs_mmbench.py)")
    vs = mteb_vs_mmbench.compare(pairs=args.pairs)
    print("\n== issue 38")
    print(f"warm run / import floor: {warm:.2f}x (target: at most 2x)")
    print(f"stock mteb / mmbench, same text, head truncation (the tool as a user runs it): {vs['plain']:.1f}x; "
          f"middle truncation (mteb given the truncated text): {vs['seen']:.1f}x; P@1 "
          f"{'the same in both' if vs['same_p1'] else 'NOT the same'} (target: at least 8x with the same P@1)")


if __name__ == "__main__":
    main()
