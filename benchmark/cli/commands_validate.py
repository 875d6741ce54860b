"""`mmbench validate`: re-check a built pool set's invariants and print its design-time resolution floors."""
from __future__ import annotations

import argparse
from pathlib import Path

from mmbench.common.errors import CLIError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="re-check a pool set's invariants (exit 2 naming each broken one)")
    p.add_argument("poolset", type=Path, help="pool set folder")
    p.set_defaults(func=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    from mmbench.tasks import UnknownTaskError
    from mmbench.tasks.validation import validate
    from mmbench.data.poolset import PoolSetError, load_poolset

    try:
        ps = load_poolset(args.poolset, verify=True)
        report = validate(ps)
    except PoolSetError as exc:
        raise CLIError(str(exc)) from None
    except UnknownTaskError as exc:
        raise CLIError(f"{args.poolset}: {exc}") from None
    for name, text in sorted(report.invariants.items()):
        n = report.checked.get(name, 0)
        bad = report.counts().get(name, 0)
        print(f"{'FAIL' if bad else 'ok  '} {name} ({n} checked{f', {bad} broken' if bad else ''}): {text}")
    if report.leak_audit:
        print(f"leak audit: {report.leak_audit['rule']}")
        print_shortcuts(report.leak_audit)
    print_pool_aware(report.leak_audit)
    for v in report.violations[:20]:
        print(f"  {v.line()}")
    if len(report.violations) > 20:
        print(f"  ... and {len(report.violations) - 20} more")
    if not report.ok:
        raise CLIError(f"{args.poolset}: {report.summary_line()}")
    print(f"{args.poolset}: {ps.task} v{ps.task_version} is valid ({report.summary_line()})")
    print_design_floors(ps)
    return 0


def print_pool_aware(leak_audit: dict | None, indent: str = "") -> None:
    """The pool-aware baselines of a leak audit (query-blind rankers reading the whole pool), one line each."""
    from mmbench.data.audit_lines import pool_aware_lines

    lines = pool_aware_lines(leak_audit)
    if lines:
        print(f"{indent}pool-aware leak audit (query-blind, reads the whole pool or pool set):")
    for line in lines:
        print(f"{indent}  {line}")


def print_shortcuts(audit: dict) -> None:
    """The learned probe over all items per feature set, and the subsets' lexical baseline (whole text, first unit, 4-grams)."""
    probe = audit.get("shortcut_probe") or {}
    if probe:
        print(f"shortcut probe: {probe['model']}; {probe['rule']}")
    for name, fs in sorted((probe.get("feature_sets") or {}).items()):
        row = fs["per_subset"].get("all", {})
        top = ", ".join(f"{k} {v:.2f}" for k, v in fs["importances"])
        print(f"  {name} features{'' if fs['enforced'] else ' (reported only)'}: held-out P@1 "
              f"{row.get('score', 0):.3f} (chance {row.get('chance', 0):.3f}, n={row.get('n', 0)}, binomial p "
              f"{row.get('p_chance', 1):.2g}); importances: {top}")
    for line in probe.get("not_enforced", [])[:5]:
        print(f"  reported only: {line}")
    lexical = audit.get("lexical_ceiling") or {}
    if lexical.get("per_subset"):
        print(f"lexical baseline ({lexical['note']}):")
        for k, v in lexical["per_subset"].items():
            whole = f"BM25 whole text {v['bm25_whole_text']:.3f}, " if "bm25_whole_text" in v else ""
            said = f"; query verbatim in {v['verbatim']} of {v['n']}" if v.get("verbatim") else ""
            print(f"  {k}: {whole}BM25 first unit {v['bm25_first_unit']:.3f}, query 4-grams "
                  f"{v['query_ngrams']:.3f} (chance {v['chance']:.3f}){said}")


def print_design_floors(ps) -> None:
    """Resolution floors of the pool set's groups, derived from its item counts (nothing is stored)."""
    from mmbench.data.selection import design_groups
    from mmbench.evaluators.stats.floors import design_floor

    groups = design_groups(ps.pools)
    print("resolution floors (design-time): the smallest paired difference in a 0/1 main metric (e.g. P@1) "
          "between two models that each group's items detect with 80 % power at alpha 0.05 (discordance 0.5)")
    for name, n in groups.items():
        mde = design_floor(n).mde
        print(f"  {name}: {n} items, floor {'n/a (too few items)' if mde is None else f'{mde:.3f}'}")
