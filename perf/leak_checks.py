"""How long the validity checks take on a built pool set (default: the Visual Grounding sample), check by check.

Usage: python perf/leak_checks.py POOLSET [--save FILE] [--against FILE]

Loads the pool set once, then times (CPU seconds, `time.process_time`) each check the build runs before it writes a
pool set: the label-blind baselines (`leaks.audit`), the pool-aware baselines (`pool_aware.audit`), the probe's
feature assembly (`probe_features.pool_rows`), the whole learned probe (`probe.probe`, which assembles the features
again and fits the models) and the lexical ceiling. `--save` writes the figures as JSON; `--against` reads figures
saved by an earlier run (another checkout: the code before a change) and prints each check's old/new ratio. The
figures a check reports are not timed here: `tests/` and the official hashes check them.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def measure(root: Path) -> dict[str, float]:
    from mmbench.builders.checks import leaks, lexical, pool_aware, probe
    from mmbench.builders.checks.probe_features import pool_rows
    from mmbench.data.poolset import load_poolset

    ps = load_poolset(root)
    media = root / "media"
    steps = {"label_blind": lambda: leaks.audit(ps, ps.provenance_columns),
             "pool_aware": lambda: pool_aware.audit(ps),
             "probe_features": lambda: pool_rows(ps, ps.provenance_columns, media),
             "probe": lambda: probe.probe(ps, ps.provenance_columns, media),
             "lexical_ceiling": lambda: lexical.ceiling(ps)}
    out = {}
    for name, step in steps.items():
        start = time.process_time()
        step()
        out[name] = round(time.process_time() - start, 2)
    out["checks"] = round(sum(v for k, v in out.items() if k != "probe_features"), 2)   # the probe holds them
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("poolset", type=Path)
    ap.add_argument("--save", type=Path)
    ap.add_argument("--against", type=Path)
    args = ap.parse_args()
    got = measure(args.poolset)
    old = json.loads(args.against.read_text()) if args.against else {}
    for name, secs in got.items():
        ratio = f"  old/new {old[name] / secs:5.1f}x (old {old[name]:.2f} s)" if name in old and secs > 0 else ""
        print(f"{name:16s} {secs:7.2f} s{ratio}")
    if args.save:
        args.save.write_text(json.dumps(got, indent=1) + "\n")


if __name__ == "__main__":
    main()
