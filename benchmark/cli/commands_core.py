"""Core commands: list, build, and the option types and helpers the other command modules share."""
from __future__ import annotations

import argparse
import math
import ast
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from mmbench.common.address_limit import memory_step
from mmbench.common.errors import CLIError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list tasks or models")
    p.add_argument("what", choices=("tasks", "models"), help="what to list")
    p.add_argument("--options", action="store_true", help="models: also list each adapter's --model-option keys")
    p.add_argument("--details", action="store_true",
                   help="models: also each seed model's protocol against its authors' code and mteb's wrapper "
                        "(instruction, image tokens, max length, video, positions, pooling), with sources")
    add_include_argument(p)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("build", help="build a task's pool set")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--task", help="the task to build (see `mmbench list tasks`)")
    which.add_argument("--task-file", type=Path, metavar="FILE",
                       help="a declarative task file (YAML or TOML, see docs/howto/your-own-data.md): build the task "
                            "it declares from the local files it names")
    add_include_argument(p)
    p.add_argument("--source", default=None,
                   help="'sample' (offline, built in) or a real source of the task (see `mmbench list tasks`); "
                        "default: sample, or files with --task-file")
    p.add_argument("--out", type=Path, help="output folder (default: under MMBENCH_HOME)")
    p.add_argument("--seed", type=nonnegative_int, default=None,
                   help="seed of the build (same seed, same pool set); default: 0, or the task file's design.seed")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="builder parameter, e.g. --param lengths=[256,512] --param haystack=obelics.parquet")
    p.set_defaults(func=cmd_build)


def add_include_argument(p: argparse.ArgumentParser) -> None:
    """--include FILE (repeatable): the commands that resolve task or model names take it."""
    p.add_argument("--include", action="append", default=[], type=Path, metavar="FILE",
                   help="Python file to import first; it may register tasks and models (mmbench.register_task, "
                        "mmbench.register_model); a task file (.yaml, .yml, .toml) registers the task it declares")


def int_at_least(minimum: int, what: str):
    """An argparse type for integers >= `minimum` (`what`: the accepted values in words, for the error): checked
    before any model loads or build starts."""
    def parse(text: str) -> int:
        value = int(text) if re.fullmatch(r"\s*[+-]?\d+\s*", text) else None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value
    return parse


positive_int = int_at_least(1, "a positive integer")
nonnegative_int = int_at_least(0, "a non-negative integer")  # seeds: the builders' generators take no negative seed


def float_in(low: float, high: float = math.inf, low_open: bool = False, what: str = "number",
             high_open: bool = False):
    """An argparse type for finite floats in [low, high] (`low_open`, `high_open`: without that end): checked
    before any build or request."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if (not math.isfinite(value) or value < low or (low_open and value == low) or value > high
                or (high_open and value == high)):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value
    return parse


nonnegative_float = float_in(0.0, what="a non-negative finite number")


def load_includes(args: argparse.Namespace) -> None:
    """Import the --include files, so the names they register resolve."""
    from mmbench.common.plugins import IncludeError, include_file
    from mmbench.tasks.declarative import is_task_file

    for path in getattr(args, "include", None) or []:
        try:
            if is_task_file(path):
                task_file_or_error(path)
            else:
                include_file(path)
        except IncludeError as exc:
            raise CLIError(str(exc)) from None


def task_file_or_error(path: Path):
    """The task a declarative task file declares, registered; its problem, in one line, as a CLIError."""
    from mmbench.tasks.declarative import register_task_file

    try:
        return register_task_file(path)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def sample_sizes() -> dict[str, str]:
    """Each task's default sample size as the shipped official registry records it (no build needed):
    '7,200 items in 96 subsets'."""
    from mmbench.leaderboards.official import OfficialRegistry, UnknownOfficialError
    from mmbench.tasks import UnknownTaskError, get_task

    registry = OfficialRegistry.load()
    out = {}
    for task in registry.tasks():
        try:
            entry = registry.get(task, get_task(task).version)
        except (UnknownTaskError, UnknownOfficialError):  # a task or version with no official entry
            continue
        n = len(entry.subsets)
        out[task] = f"{entry.n_items:,} items" + (f" in {n} subsets" if n > 1 else "")
    return out


RUNTIMES_FILE = "sample_runtimes.json"  # measured by perf/sample_runtimes.py; mmbench.leaderboards' package data


def sample_runtimes() -> dict[str, Any]:
    """The shipped figures of each default sample: candidates, build time and each measured model's rough runtime on
    CPU (`perf/sample_runtimes.py` wrote them, with the machine and the date); {} when the file is absent."""
    from importlib import resources

    path = resources.files("mmbench.leaderboards").joinpath("data", RUNTIMES_FILE)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def rough_duration(seconds: float) -> str:
    """A rough duration: '<1 s', '~40 s', '~9 min'."""
    if seconds < 1:
        return "<1 s"
    return f"~{seconds:.0f} s" if seconds < 90 else f"~{seconds / 60:.0f} min"


def runtime_line(figures: dict[str, Any], version: str, seen: dict[str, str] | None = None) -> str:
    """'7,200 candidates; rough CPU time, sample built: bm25 ~18 s, minilm ~4 min (its build ~88 s)'; `seen` adds
    what a model sees of the sample where it cannot see all of it (`seen_notes`)."""
    notes = seen or {}
    models = ", ".join(f"{name} {rough_duration(m['estimate_seconds'])}" + (f" ({notes[name]})" if notes.get(name) else "")
                       for name, m in figures["models"].items())
    stale = "" if figures["version"] == version else f" (measured on v{figures['version']})"
    return (f"{figures['candidates']:,} candidates; rough CPU time, sample built: {models} "
            f"(its build {rough_duration(figures['build_seconds'])}){stale}")


def seen_notes(task: str, figures: dict[str, Any]) -> dict[str, str]:
    """Model -> what it sees of the task's official sample (a text-only model on image or video candidates), from
    the reproduction matrix's runs (mmbench/leaderboards/data/reproduction_matrix.json)."""
    from mmbench.leaderboards.reproduction import MatrixError, load_matrix, seen_note

    try:
        rows = load_matrix()
    except MatrixError:
        return {}
    out = {}
    for model in figures.get("models", {}):
        row = rows.get(f"{task}/{model}/all") or next((r for r in rows.values() if r.task == task and r.model == model), None)
        out[model] = seen_note(row, figures.get("candidates"))
    return out


def cmd_list(args: argparse.Namespace) -> int:
    load_includes(args)
    if args.what == "tasks":
        from mmbench.tasks import BENCHMARKS, task_specs

        sizes, runtimes = sample_sizes(), sample_runtimes()
        for t in task_specs():
            bins = ",".join(t.length_bins) or "-"
            long = (f"  optional long bins: {','.join(t.long_bins)} (--param lengths=[{','.join(map(str, t.long_lengths))}])"
                    if t.long_bins else "")
            print(f"{t.name}  v{t.version}  sources: {', '.join(t.sources)}  length bins: {bins}{long}")
            print(f"    {t.description}")
            if t.name in sizes:
                print(f"    default sample (seed 0): {sizes[t.name]}")
            if t.name in runtimes.get("tasks", {}):
                figures = runtimes["tasks"][t.name]
                print(f"    {runtime_line(figures, t.version, seen_notes(t.name, figures))}")
        for name, members in sorted(BENCHMARKS.items()):
            print(f"benchmark {name}: {', '.join(members)}")
        if runtimes:
            print(f"CPU times: measured by {runtimes['by']} on {runtimes['machine']}, {runtimes['measured']}; rough "
                  "(the machine's load moves them); a first run adds the build")
    else:
        from mmbench.models.registry import model_specs

        print(f"{'name':26s} {'modalities':18s} {'context':>7s} {'params':>7s} {'dim':>5s}  {'hub id / reference':46s}"
              "  description")
        for m in model_specs():
            ctx = str(m.context) if m.context else "-"
            flag = "" if m.verified else "UNVERIFIED: "
            print(f"{m.name:26s} {','.join(m.modalities):18s} {ctx:>7s} {format_parameters(m.parameters):>7s} "
                  f"{str(m.dim or '-'):>5s}  {m.hub_id or '-':46s}  {flag}{m.description}")
            if args.options:
                print(f"{'':26s} options: {', '.join(sorted(m.option_names())) or '-'}")
            if getattr(args, "details", False):
                from mmbench.models.protocol_table import details

                for line in details(m.name):
                    print(f"{'':26s} {line}")
        print(CONTEXT_NOTE)
    return 0


CONTEXT_NOTE = ("context: the tokens of a document's text a run reads (its protocol line's window; MiniLM 254 = 256 "
                "positions less [CLS] and [SEP]); for template models (Qwen-VL, E5-V, APIs) the model's window, "
                "less the template and a margin in a run")


def format_parameters(n: int | None) -> str:
    """A parameter count as the field writes it (22.7M, 2.2B); '-' when undisclosed or not applicable."""
    if not n:
        return "-"
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def parse_params(items: list[str], flag: str = "--param") -> dict[str, Any]:
    """KEY=VALUE pairs; values are Python literals where they parse as one, else strings."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise CLIError(f"{flag} {item!r}: expected KEY=VALUE")
        key, raw = item.split("=", 1)
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", key):
            raise CLIError(f"{flag} {item!r}: invalid key {key!r}")
        out[key] = parse_value(raw)
    return out


BOOLEAN_WORDS = {"true": True, "false": False, "yes": True, "no": False}


def parse_value(raw: str) -> Any:
    """A Python literal where `raw` parses as one; true/false/yes/no (any case) as booleans (the string "false"
    would otherwise count as true); a bracketed list of bare words ([text, mixed]) as a list (so a list-valued
    builder parameter is never split into characters); else the string itself."""
    if raw.strip().lower() in BOOLEAN_WORDS:
        return BOOLEAN_WORDS[raw.strip().lower()]
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        pass
    text = raw.strip()
    if text.startswith("[") and text.endswith("]"):
        return [parse_value(x.strip()) for x in text[1:-1].split(",") if x.strip()]
    return raw


def task_or_error(name: str):
    """The registered task, or a CLIError naming the known ones."""
    from mmbench.tasks import UnknownTaskError, get_task

    try:
        return get_task(name)
    except UnknownTaskError as exc:
        raise CLIError(str(exc)) from None


def build_params_or_error(task, items: list[str]) -> dict[str, Any]:
    """The --param values of a build of `task`, each checked against the builder's annotation before any work
    (`--param lengths=abc` is an error naming `lengths`, not a bare int() error mid-build)."""
    params = parse_params(items)
    try:
        task.check_param_types(params)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    return params


def cmd_build(args: argparse.Namespace) -> int:
    load_includes(args)
    if args.task_file is not None:   # built from its spec, not registered: `--include FILE` registers it
        from mmbench.tasks.declarative import spec_of
        from mmbench.builders.parts.task_file import read_task_file

        try:
            tf = read_task_file(args.task_file)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        task = spec_of(tf)
        args.seed = int(tf.design["seed"]) if args.seed is None else args.seed
    else:
        task = task_or_error(args.task)
    args.seed = 0 if args.seed is None else args.seed
    args.source = args.source or task.sources[0] if args.task_file is not None else args.source or "sample"
    if args.source not in task.sources:
        raise CLIError(f"task {task.name} has no source {args.source!r}; sources: {', '.join(task.sources)}")
    from mmbench.running.poolsets import default_poolset_dir

    out = args.out or default_poolset_dir(task, args.source, args.seed)
    params = build_params_or_error(task, args.param)
    from mmbench.common.scratch import OutputRefused, check_replaceable

    start = time.perf_counter()
    try:
        check_replaceable(out)  # before any work: a folder mmbench did not write is never replaced
        ps = task.build(args.source, out, seed=args.seed, **params)
    except OutputRefused as exc:
        raise CLIError(str(exc)) from None
    except TypeError as exc:
        raise CLIError(f"bad builder parameter for {task.name}: {exc}") from None
    except (ValueError, FileNotFoundError) as exc:  # builders' checks of parameters and sources
        raise CLIError(f"cannot build {task.name}: {exc}") from None
    counts = ps.manifest.get("counts", {})
    print(f"built {task.name} ({args.source}) in {time.perf_counter() - start:.1f}s -> {out}")
    print(f"  {counts.get('queries')} queries, {counts.get('candidates')} candidates, {counts.get('pools')} items, "
          f"{counts.get('media_files')} media files; content hash {ps.manifest['content_hash'][:16]}")
    from mmbench.data.drops import summary_lines

    for line in summary_lines(ps.manifest.get("dropped", {})):
        print(line)
    validity = ps.manifest.get("validity")
    if validity:
        print(f"  validity: {len(validity['invariants'])} invariants checked, {validity['violations']} violations")
        costs = check_cost_line(ps.manifest.get("check_costs"))
        if costs:
            print(f"  {costs}")
        from mmbench.cli.commands_validate import print_pool_aware

        print_pool_aware(validity.get("leak_audit"), indent="  ")
    return 0


def check_cost_line(costs: dict | None) -> str:
    """The manifest's `check_costs` in one line: the checks' wall seconds, each check's, slowest first, and CPU."""
    if not costs or not costs.get("checks"):
        return ""
    each = sorted(costs["checks"].items(), key=lambda kv: -kv[1]["wall"])
    parts = ", ".join(f"{name} {c['wall']:.1f} s" for name, c in each)
    total = costs["total"]
    return (f"checks: {total['wall']:.1f} s ({parts}); {total['cpu']:.1f} s CPU, model fits on "
            f"{costs.get('threads', 1)} thread{'s' if costs.get('threads', 1) != 1 else ''}")


def resolve_poolset(task, data: Path | None, seed: int, quiet: bool = False, verify: bool = False):
    """`mmbench.running.poolsets.resolve_poolset`, announcing a sample build and exiting 2 on an unusable pool set."""
    from mmbench.running.poolsets import PoolSetUnusable
    from mmbench.running.poolsets import resolve_poolset as resolve_poolset_for

    try:
        with memory_step(f"reading the pool set of {task.name}" if data is not None else f"building {task.name}"):
            return resolve_poolset_for(task, data, seed, progress=not quiet, verify=verify, announce=print)
    except PoolSetUnusable as exc:
        raise CLIError(str(exc)) from None


def tasks_or_error(names: list[str]):
    """The tasks named by --task (task and benchmark names, repeated or comma-separated)."""
    from mmbench.tasks import UnknownTaskError, resolve_tasks

    try:
        return resolve_tasks(names)
    except UnknownTaskError as exc:
        raise CLIError(str(exc)) from None

def model_options(args: argparse.Namespace, model: str) -> dict[str, Any]:
    """The model-loading options a user gave (device, dtype, weights folder, --model-option ...), omitting
    defaults; a --model-option the registered model does not take is an error naming the ones it does."""
    from mmbench.models.registry import option_names

    flags = {k: v for k, v in {"device": args.device, "dtype": args.dtype, "model_path": args.model_path,
                               "attn_implementation": args.attn_implementation,
                               "trust_remote_code": args.trust_remote_code or None,
                               "protocol": getattr(args, "protocol", None)}.items() if v is not None}
    extra = parse_params(args.model_option, "--model-option")
    twice = sorted(set(flags) & set(extra))
    if twice:
        raise CLIError(f"--model-option {twice[0]} repeats an option given by its own flag")
    known = option_names(model)
    if "protocol" in flags and known is not None and "protocol" not in known:
        raise CLIError(f"model {model!r} has one protocol only (mmlongembed): --protocol is for models that offer "
                       "several (see `mmbench list models --details`)")
    unknown = sorted(set(extra) - known) if known is not None else []
    if unknown:
        raise CLIError(f"model {model!r} has no option {unknown[0]!r}; its options: {', '.join(sorted(known or ()))}")
    return {**flags, **extra}



def writable_folder_or_error(path: Path) -> None:
    """Create the results folder now, so an unusable --output fails before the run, not after it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CLIError(f"--output {path} exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"--output {path}: cannot create the results folder ({exc.strerror or exc})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise CLIError(f"--output {path}: the results folder is not writable")


def safe_name(name: str) -> str:
    """A model name as a folder name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"
