"""`mmbench inspect`: print items of a run with their query, top candidates and the relevant one marked."""
from __future__ import annotations

import argparse
from pathlib import Path

from mmbench.cli.commands_core import nonnegative_int
from mmbench.common.errors import CLIError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="print items of a run: the query, the top-ranked candidates with excerpts, "
                                       "the relevant one marked (*), and what the model saw of each")
    p.add_argument("results", type=Path, help="results folder written by `mmbench run`")
    p.add_argument("--data", type=Path, default=None,
                   help="the pool set the run used (default: the one the run's record names, else the task's "
                        "sample in MMBENCH_HOME, when its content hash is the run's)")
    p.add_argument("--item", action="append", default=[], help="an item id to print (repeatable)")
    p.add_argument("--worst", type=nonnegative_int, default=None,
                   help="print the N items the run did worst on by --metric (3 when neither --item nor --sample)")
    p.add_argument("--sample", type=nonnegative_int, default=None, help="print N items drawn at random (see --seed)")
    p.add_argument("--seed", type=int, default=0, help="seed of --sample (default: 0)")
    p.add_argument("--metric", default=None, help="per-query metric that orders --worst and heads each item, "
                                                  "computed from the run's ranking and the pool set's relevance "
                                                  "(default: the task's main score)")
    p.add_argument("--top", type=nonnegative_int, default=5, help="candidates shown per item (default: 5)")
    p.add_argument("--chars", type=nonnegative_int, default=100, help="characters of each excerpt (default: 100)")
    p.set_defaults(func=cmd_inspect)


def cmd_inspect(args: argparse.Namespace) -> int:
    from mmbench.evaluators.metrics import MAIN_METRIC, metric_names
    from mmbench.results.inspection import (ItemChoice, choose_items, escape_controls, format_item,
                                            judged_by_poolset, metric_or_error, seen_by_doc)
    from mmbench.results.store import ResultsError, load_results

    try:
        res = load_results(args.results)
    except ResultsError as exc:
        raise CLIError(escape_controls(str(exc))) from None
    stated_main = res.info.get("main_metric")
    try:
        metric = metric_or_error(args.metric or (stated_main if stated_main in metric_names() else MAIN_METRIC))
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    ps = _poolset_or_error(res, args.data)
    choice = ItemChoice(tuple(args.item), args.worst or 0, args.sample or 0, args.seed, metric)
    try:
        per_query = judged_by_poolset(res.per_query, ps.pools)  # relevance and metrics from the pool set
        ids = choose_items(per_query, choice)
    except ValueError as exc:
        raise CLIError(f"{args.results}: {exc}") from None
    queries, candidates, seen = ps.query_by_id(), ps.candidate_by_id(), seen_by_doc(res.seen)
    rows = per_query.set_index(per_query["item_id"].astype(str))
    for n, item_id in enumerate(ids):
        item = rows.loc[item_id].to_dict() | {"item_id": item_id}
        query = queries.get(str(item["query_id"]))
        if query is None:
            raise CLIError(escape_controls(f"{ps.root}: no query {item['query_id']!r} for item {item_id!r}; "
                                           "is this the run's pool set?"))
        print(("\n" if n else "") + "\n".join(format_item(item, query, candidates, seen, metric, args.top, args.chars)))
    return 0


def _poolset_or_error(res, data: Path | None):
    """The pool set the results were computed on: --data, else the one the run's record names (still there,
    same content hash), else the task's default sample in the home; its content hash must be the results'
    (another pool set would print the wrong documents)."""
    from mmbench.data.poolset import PoolSetError, load_poolset
    from mmbench.results.inspection import escape_controls
    from mmbench.running.poolsets import default_poolset_dir

    if data is None:
        seed = int(res.info.get("seed") or 0) if isinstance(res.info.get("seed"), int) else 0
        recorded = _recorded_poolsets(res.info)
        sample = default_poolset_dir(res.task, "sample", seed)
        there = [p for p in [*recorded, sample] if (p / "manifest.json").is_file()]
        if not there:
            where = (f"neither at {recorded[0]} (named by the run's record) nor in {sample.parent}" if recorded
                     else f"not in {sample.parent}")
            raise CLIError(escape_controls(f"pass --data: the pool set of {res.task} with content hash "
                                           f"{res.content_hash[:12]} is {where}"))
        data = next((p for p in there if _content_hash(p) == res.content_hash), there[0])
    try:
        ps = load_poolset(data)
    except (PoolSetError, OSError, ValueError) as exc:
        raise CLIError(f"{data}: {exc}") from None
    if ps.content_hash != res.content_hash:
        raise CLIError(f"{data}: content hash {ps.content_hash[:12]} is not the run's ({res.content_hash[:12]}); "
                       "pass the pool set the run used with --data")
    return ps


def _recorded_poolsets(info: dict) -> list[Path]:
    """The pool set folder the run's record names: its provenance's `poolset`, else the `--data` of the command
    line it records (runs made before the record named it)."""
    import shlex

    stated = info.get("provenance")
    prov: dict = stated if isinstance(stated, dict) else {}
    found = [Path(prov["poolset"])] if isinstance(prov.get("poolset"), str) and prov["poolset"] else []
    try:
        words = shlex.split(str(prov.get("command") or ""))
    except ValueError:
        words = []
    for i, word in enumerate(words):
        if word == "--data" and i + 1 < len(words):
            found.append(Path(words[i + 1]))
        elif word.startswith("--data="):
            found.append(Path(word.split("=", 1)[1]))
    return list(dict.fromkeys(found))


def _content_hash(folder: Path) -> str | None:
    """The content hash a pool set's manifest states (checked again when the pool set loads)."""
    import json

    try:
        value = json.loads((folder / "manifest.json").read_text()).get("content_hash")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None
