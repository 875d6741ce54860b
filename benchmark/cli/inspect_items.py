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
                   help="the pool set the run used (default: the task's sample in MMBENCH_HOME, when its content "
                        "hash is the run's)")
    p.add_argument("--item", action="append", default=[], help="an item id to print (repeatable)")
    p.add_argument("--worst", type=nonnegative_int, default=None,
                   help="print the N items the run did worst on by --metric (3 when neither --item nor --sample)")
    p.add_argument("--sample", type=nonnegative_int, default=None, help="print N items drawn at random (see --seed)")
    p.add_argument("--seed", type=int, default=0, help="seed of --sample (default: 0)")
    p.add_argument("--metric", default=None, help="metric that orders --worst and heads each item (default: the "
                                                  "task's main score)")
    p.add_argument("--top", type=nonnegative_int, default=5, help="candidates shown per item (default: 5)")
    p.add_argument("--chars", type=nonnegative_int, default=100, help="characters of each excerpt (default: 100)")
    p.set_defaults(func=cmd_inspect)


def cmd_inspect(args: argparse.Namespace) -> int:
    from mmbench.results.inspection import ItemChoice, choose_items, format_item, seen_by_doc
    from mmbench.results.store import ResultsError, load_results

    try:
        res = load_results(args.results)
    except ResultsError as exc:
        raise CLIError(str(exc)) from None
    metric = args.metric or str(res.info.get("main_metric") or "precision_at_1")
    ps = _poolset_or_error(res, args.data)
    choice = ItemChoice(tuple(args.item), args.worst or 0, args.sample or 0, args.seed, metric)
    try:
        ids = choose_items(res.per_query, choice)
    except ValueError as exc:
        raise CLIError(f"{args.results}: {exc}") from None
    queries, candidates, seen = ps.query_by_id(), ps.candidate_by_id(), seen_by_doc(res.seen)
    rows = res.per_query.set_index(res.per_query["item_id"].astype(str))
    for n, item_id in enumerate(ids):
        item = rows.loc[item_id].to_dict() | {"item_id": item_id}
        query = queries.get(str(item["query_id"]))
        if query is None:
            raise CLIError(f"{ps.root}: no query {item['query_id']!r} for item {item_id!r}; is this the run's pool set?")
        print(("\n" if n else "") + "\n".join(format_item(item, query, candidates, seen, metric, args.top, args.chars)))
    return 0


def _poolset_or_error(res, data: Path | None):
    """The pool set the results were computed on: --data, else the task's default sample in the home; its
    content hash must be the results' (another pool set would print the wrong documents)."""
    from mmbench.data.poolset import PoolSetError, load_poolset
    from mmbench.running.poolsets import default_poolset_dir

    if data is None:
        seed = int(res.info.get("seed") or 0) if isinstance(res.info.get("seed"), int) else 0
        data = default_poolset_dir(res.task, "sample", seed)
        if not (data / "manifest.json").is_file():
            raise CLIError(f"pass --data: the pool set of {res.task} with content hash {res.content_hash[:12]} is not "
                           f"in {data.parent}")
    try:
        ps = load_poolset(data)
    except (PoolSetError, OSError, ValueError) as exc:
        raise CLIError(f"{data}: {exc}") from None
    if ps.content_hash != res.content_hash:
        raise CLIError(f"{data}: content hash {ps.content_hash[:12]} is not the run's ({res.content_hash[:12]}); "
                       "pass the pool set the run used with --data")
    return ps
