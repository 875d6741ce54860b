"""`mmbench rank`: evaluate an LLM listwise ranker on a task; results compare with embedding runs."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from mmbench.cli.commands_core import float_in, nonnegative_int, positive_int, resolve_poolset, safe_name, task_or_error
from mmbench.common.errors import CLIError
from mmbench.common.home import mmbench_home


seconds = float_in(0.0, low_open=True, what="a positive finite number of seconds")
rate = float_in(0.0, low_open=True, what="a positive finite rate")
price = float_in(0.0, what="a non-negative finite price")
temperature = float_in(0.0, 2.0, what="a temperature between 0 and 2")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rank", help="evaluate an LLM listwise ranker (OpenAI-compatible or Anthropic) on a task",
                       description="One request per query: the query and all its candidate images, numbered in the "
                                   "pool set's seeded order; the reply is a JSON array of image numbers. Keys come "
                                   "from environment variables only.")
    p.add_argument("--task", required=True, help="the task to rank (see `mmbench list tasks`)")
    p.add_argument("--ranker", required=True, choices=("openai-chat", "anthropic"),
                   help="API protocol: openai-chat (OpenAI or any compatible server) or anthropic (Messages API)")
    p.add_argument("--model", required=True, help="model name the API expects, e.g. gpt-4.1 or claude-sonnet-4-6")
    p.add_argument("--base-url", default=None, help="API base URL (default: the vendor's; e.g. http://host:8000/v1 for vLLM)")
    p.add_argument("--api-key-env", default=None, help="environment variable holding the key "
                                                        "(default OPENAI_API_KEY / ANTHROPIC_API_KEY)")
    p.add_argument("--data", type=Path, help="pool set folder (default: build the sample source)")
    p.add_argument("--limit", type=positive_int, help="rank N items, the ones `mmbench run --limit N "
                   "--seed S` evaluates (a stratified random sample)")
    p.add_argument("--prompt-file", type=Path, help="JSON with system, intro ({query}, {n}), outro, optional label ({id})")
    p.add_argument("--output", type=Path, help="results folder (default: runs/<task>/<ranker>_<model>)")
    p.add_argument("--temperature", type=temperature, default=0.0, help="sampling temperature, 0 to 2")
    p.add_argument("--max-output-tokens", type=positive_int, default=1024, help="reply length cap, in tokens")
    p.add_argument("--max-concurrency", type=positive_int, default=4, help="requests in flight at once")
    p.add_argument("--max-attempts", type=positive_int, default=5, help="attempts per request (retries with backoff)")
    p.add_argument("--requests-per-second", type=rate, default=None,
                   help="cap on requests started per second (default: no cap)")
    p.add_argument("--timeout", type=seconds, default=120.0,
                   help="seconds one attempt may take as a whole (connect, wait and the whole reply)")
    p.add_argument("--price-input", type=price, default=None, help="USD per million input tokens (for the cost)")
    p.add_argument("--price-output", type=price, default=None, help="USD per million output tokens")
    p.add_argument("--image-detail", default=None, help="openai-chat: image_url detail (low, high, auto)")
    p.add_argument("--cache-dir", type=Path, help="response cache (default: MMBENCH_HOME/llm_responses)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the response cache")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the default sample build and of the --limit sample")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_rank)


def cmd_rank(args: argparse.Namespace) -> int:
    from mmbench.rankers import Prices, load_prompt, load_ranker
    from mmbench.rankers.run import APIUnreachable, RankOptions, rank_poolset
    from mmbench.results.mteb_layout import summary_json
    from mmbench.results.store import load_results, write_results
    from mmbench.results.summary import format_summary

    task = task_or_error(args.task)
    try:
        prompt = load_prompt(args.prompt_file)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    options = {"base_url": args.base_url, "api_key_env": args.api_key_env, "prompt": prompt,
               "temperature": args.temperature, "max_output_tokens": args.max_output_tokens,
               "timeout": args.timeout, "max_attempts": args.max_attempts, "max_concurrency": args.max_concurrency,
               "requests_per_second": args.requests_per_second,
               "cache_dir": None if args.no_cache else (args.cache_dir or mmbench_home() / "llm_responses"),
               "prices": Prices(args.price_input, args.price_output)}
    if args.image_detail:
        if args.ranker != "openai-chat":
            raise CLIError("--image-detail applies to --ranker openai-chat only")
        if args.image_detail not in ("low", "high", "auto"):
            raise CLIError(f"--image-detail must be low, high or auto, not {args.image_detail!r}")
        options["image_detail"] = args.image_detail
    try:
        ranker = load_ranker(args.ranker, args.model, **options)
    except ValueError as exc:
        raise CLIError(str(exc)) from None

    ps = resolve_poolset(task, args.data, args.seed, quiet=args.quiet)

    start = time.perf_counter()
    try:
        per_query, seen, info = rank_poolset(ps, ranker, RankOptions(limit=args.limit, progress=not args.quiet, seed=args.seed))
    except APIUnreachable as exc:
        raise CLIError(f"{exc}; no results written") from None
    from mmbench.running.provenance import provenance

    info = {**info, "provenance": provenance(ranker)}
    summary = summary_json(task.name, ps.task_version, ps.content_hash, ranker.card.identity(), per_query, info,
                           time.perf_counter() - start, main_metric=task.main_score)
    out = args.output or Path("runs") / task.name / safe_name(ranker.card.name)
    write_results(out, per_query, seen, summary)
    print(format_summary(load_results(out), task.summary_axes, task.main_score))
    rep, tok = info["repairs"], info["tokens"]
    kinds = ", ".join(f"{k} {v}" for k, v in rep.items() if k != "items_repaired" and v) or "none"
    cost = "unknown" if info["cost_usd"] is None else f"${info['cost_usd']:.4f}"
    print(f"repairs: {rep['items_repaired']} items repaired ({kinds}); failed {info['n_failed_items']}; "
          f"tokens in {tok['input']} out {tok['output']}; cost {cost}; "
          f"{info['timing']['api_seconds_sum']:.1f}s of requests, {info['timing']['wall_seconds']:.1f}s wall; "
          f"{info['cache']['hits']} cached")
    print(f"\nresults written to {out}")
    return 1 if info["n_failed_items"] else 0
