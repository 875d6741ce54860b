"""Submission validation: a results folder is accepted only if every check passes.

Two kinds of submission, both folders of data files:

* retrieval results written by ``mmbench run`` (``results.json``, ``per_query.parquet``, optional
  ``seen.parquet``): known task and version, the official pool set's hash, complete per-query
  records, finite in-range metrics, per-item metrics and aggregates recomputed and compared;
* RAVEL predictor scores (``ravel_scores.json``): one score per (encoder, language model) pair of
  the reference measurements, finite, and any stated correlation recomputed and compared.

Every refusal is a `SubmissionRejected` listing `Problem(field, reason)`s. Checks run in stages
and stop at the first failing stage, so one broken file does not flood the report.
"""
from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mmbench.evaluators.metrics import MAIN_METRIC, item_metrics, metric_names
from mmbench.results.mteb_layout import MTEB_SUBSET, SIDECAR
from mmbench.results.aggregate import aggregate
from mmbench.results.store import FIXED_COLUMNS, PER_QUERY, SEEN, SUMMARY, file_digest_problems
from mmbench.results.samples import SAMPLES
from mmbench.running.runner import SCORE_DECIMALS

from mmbench.leaderboards.files import Limits, parse_json, read_folder, read_parquet
from mmbench.leaderboards.official import OfficialRegistry, UnknownOfficialError, fingerprint, item_line
from mmbench.leaderboards.problems import Problem, SubmissionRejected
from mmbench.leaderboards.plausibility import plausibility_problems
from mmbench.leaderboards.stated import stated_number_problems

RESULTS_FILES = {SUMMARY: "json", SIDECAR: "json", PER_QUERY: "parquet", SEEN: "parquet", SAMPLES: "derived"}
RAVEL_FILE = "ravel_scores.json"
RAVEL_TASK = "ravel"
RAVEL_FIELDS = frozenset({"task", "model", "lower_is_better", "scores", "correlation"})
ENTRY_FIELDS = frozenset({"hf_subset", "languages", "main_score", "n_items"})  # besides the recomputed metrics
TOLERANCE = 1e-6  # submitted vs recomputed metrics (JSON round trip of float64 is exact; this is slack)
_JOINERS = {"\u200c", "\u200d"}  # zero-width (non-)joiners are part of several scripts and emoji
_SHOWN_ITEMS = 3


@dataclass
class Submission:
    """A validated submission: its identity, recomputed scores and the exact bytes to store."""

    kind: str                                   # "retrieval" | "ravel"
    task: str
    task_version: str
    content_hash: str
    model: dict[str, Any]                       # identity: name, family, revision, settings, ...
    files: dict[str, bytes]
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # group -> metric -> value (+ "n")

    @property
    def model_name(self) -> str:
        return str(self.model["name"])

    @property
    def submission_id(self) -> str:
        """Same task version, data and model identity -> same id (that is what a duplicate is)."""
        key = {"kind": self.kind, "task": self.task, "task_version": self.task_version,
               "content_hash": self.content_hash, "model": self.model}
        return hashlib.sha256(json.dumps(key, sort_keys=True, ensure_ascii=True).encode()).hexdigest()[:16]


def validate_submission(folder: Path | str, registry: OfficialRegistry | None = None,
                        limits: Limits = Limits()) -> Submission:  # noqa: B008 - Limits is frozen
    """Validate a submission folder; raises `SubmissionRejected` naming every problem found."""
    folder = Path(folder)
    if (folder / RAVEL_FILE).exists() and not (folder / SUMMARY).exists():
        files = read_folder(folder, {RAVEL_FILE: "json"}, limits)
        return validate_ravel(files, limits)
    files = read_folder(folder, RESULTS_FILES, limits)
    files.pop(SIDECAR, None)  # a copy of results.json's mmbench block (for mteb rewrites): neither read nor stored
    return validate_results(files, registry or OfficialRegistry.load(), limits)


# ---------------------------------------------------------------- retrieval results


def validate_results(files: dict[str, bytes], registry: OfficialRegistry, limits: Limits) -> Submission:
    _stage([Problem(f"file {n}", "is missing") for n in (SUMMARY, PER_QUERY) if n not in files])
    summary = parse_json(files[SUMMARY], SUMMARY, limits)
    info, model = _check_summary(summary, limits)
    task, version, content_hash = info["task"], info["task_version"], info["content_hash"]
    try:
        official = registry.get(task, version)
    except UnknownOfficialError as exc:
        field_name = "mmbench.task" if "no official" in str(exc) else "mmbench.task_version"
        raise SubmissionRejected([Problem(f"{SUMMARY}: {field_name}", str(exc))]) from None
    _stage([] if content_hash == official.content_hash else [Problem(
        f"{SUMMARY}: mmbench.content_hash",
        f"pool set {content_hash[:16]} is not the official pool set of {task} v{version} ({official.content_hash[:16]})")])

    _stage([Problem(SUMMARY + ": mmbench.files", p) for p in file_digest_problems(summary, files)])
    per_query = read_parquet(files[PER_QUERY], PER_QUERY, limits)
    seen = read_parquet(files[SEEN], SEEN, limits) if SEEN in files else pd.DataFrame()
    names = metric_names()
    _stage([Problem(f"{PER_QUERY}: {c}", "column is missing") for c in (*FIXED_COLUMNS, *names) if c not in per_query.columns])
    _stage(_check_items(per_query, official))
    _stage(_check_metric_values(per_query, names))
    _stage(_check_rankings(per_query, names))
    recomputed = aggregate(per_query)
    _stage(_check_aggregates(summary, recomputed))
    from mmbench.rankers.parse import REPAIRS

    _stage(stated_number_problems(summary, per_query, seen, official.n_items, REPAIRS))
    _stage(plausibility_problems(summary, seen))
    scores = {r.group: {"n": float(r.n), **r.metrics} for r in recomputed}
    return Submission("retrieval", task, version, content_hash, model, dict(files), scores)


def _stage(problems: list[Problem]) -> None:
    if problems:
        raise SubmissionRejected(problems)


def _check_summary(summary: Any, limits: Limits) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(summary, dict):
        _stage([Problem(SUMMARY, "must be a JSON object")])
    info = summary.get("mmbench")
    if not isinstance(info, dict):
        _stage([Problem(f"{SUMMARY}: mmbench", "block is missing or not an object")])
    problems = []
    for key in ("task", "task_version", "content_hash"):
        if not isinstance(info.get(key), str) or not info.get(key):
            problems.append(Problem(f"{SUMMARY}: mmbench.{key}", "must be a non-empty string"))
    if not problems and summary.get("task_name") != info["task"]:
        problems.append(Problem(f"{SUMMARY}: task_name", f"{summary.get('task_name')!r} differs from mmbench.task {info['task']!r}"))
    model = info.get("model")
    if not isinstance(model, dict):
        problems.append(Problem(f"{SUMMARY}: mmbench.model", "model identity is missing"))
    else:
        problems += _check_model(model, f"{SUMMARY}: mmbench.model", limits)
    expected_main = _task_main_score(info.get("task"))
    if info.get("main_metric") != expected_main:
        problems.append(Problem(f"{SUMMARY}: mmbench.main_metric", f"{info.get('main_metric')!r}; the main score of "
                                f"task {info.get('task')!r} is {expected_main!r}"))
    if info.get("limit") is not None:
        problems.append(Problem(f"{SUMMARY}: mmbench.limit", f"the run evaluated a --limit {info['limit']!r} subset; "
                                "submit a run over the whole pool set"))
    if not isinstance(summary.get("scores"), dict) or not isinstance(summary["scores"].get("test"), list):
        problems.append(Problem(f"{SUMMARY}: scores.test", "must be a list of aggregate entries"))
    _stage(problems)
    return info, model


def _task_main_score(task: Any) -> str:
    """The registered task's main score (Flickr: recall_at_1); MAIN_METRIC for a task mmbench does not know."""
    from mmbench.tasks import UnknownTaskError, get_task

    try:
        return get_task(str(task)).main_score
    except UnknownTaskError:
        return MAIN_METRIC


def _check_model(model: dict[str, Any], where: str, limits: Limits) -> list[Problem]:
    problems = []
    name = model.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append(Problem(f"{where}.name", "must be a non-empty string"))
    elif len(name) > limits.max_name_chars:
        problems.append(Problem(f"{where}.name", f"is {len(name)} characters, over the limit of {limits.max_name_chars}"))
    elif fault := _name_fault(name):
        problems.append(Problem(f"{where}.name", fault))
    for key in ("family", "revision"):
        if key in model and not isinstance(model[key], str):
            problems.append(Problem(f"{where}.{key}", "must be a string"))
    if not isinstance(model.get("settings"), dict):
        problems.append(Problem(f"{where}.settings", "settings are missing (an object of everything that changes vectors)"))
    problems += _surrogates({k: v for k, v in model.items() if k != "name"}, where)  # name: checked above
    return problems


def _name_fault(name: str) -> str | None:
    """Why a display name cannot be shown as is: control, invisible formatting (bidi) or surrogate characters."""
    for ch in name:
        cat = unicodedata.category(ch)
        if cat == "Cc":
            return f"contains control characters (U+{ord(ch):04X})"
        if cat == "Cs":
            return f"contains an unpaired surrogate (U+{ord(ch):04X}), which is not valid UTF-8"
        if cat == "Cf" and ch not in _JOINERS:
            return f"contains an invisible formatting character (U+{ord(ch):04X}, e.g. a bidi override)"
    return None


def _surrogates(value: Any, where: str) -> list[Problem]:
    """Unpaired surrogates anywhere in the identity: JSON allows them, UTF-8 files and SQLite do not."""
    if isinstance(value, str):
        bad = next((ch for ch in value if unicodedata.category(ch) == "Cs"), None)
        return [] if bad is None else [Problem(where, f"contains an unpaired surrogate (U+{ord(bad):04X}), "
                                               "which is not valid UTF-8")]
    if isinstance(value, dict):
        out: list[Problem] = []
        for k, v in value.items():
            out += _surrogates(k, f"{where} (key)") or _surrogates(v, f"{where}.{k.encode('ascii', 'backslashreplace').decode()}")
        return out
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _surrogates(v, f"{where}[{i}]")]
    return []


def _item_ids(ids: Any) -> str:
    ids = list(ids)
    shown = ", ".join(repr(str(i)) for i in ids[:_SHOWN_ITEMS])
    return shown + (f" and {len(ids) - _SHOWN_ITEMS} more" if len(ids) > _SHOWN_ITEMS else "")


def _check_items(per_query: pd.DataFrame, official) -> list[Problem]:
    """The rows are exactly the official items: ids, subsets, relevance, candidates, metadata axes."""
    ids = per_query["item_id"].astype(str)
    dup = ids[ids.duplicated()]
    if len(dup):
        return [Problem(f"{PER_QUERY}: item_id", f"duplicate items {_item_ids(dup.unique())}")]
    lines: dict[str, list[str]] = {}
    for row in per_query.to_dict("records"):
        try:
            line = item_line(row["item_id"], _as_list(row["relevant_ids"]), _as_list(row["ranked_ids"]), row)
        except (TypeError, ValueError) as exc:
            return [Problem(f"{PER_QUERY}: ranked_ids", f"item {str(row['item_id'])!r}: relevant_ids and ranked_ids "
                            f"must be lists of ids ({exc})")]
        lines.setdefault(str(row["subset"]), []).append(line)
    submitted = fingerprint(lines)
    problems = []
    if len(per_query) != official.n_items:
        problems.append(Problem(f"{PER_QUERY}: item_id", f"{len(per_query)} per-query records, the official pool set has "
                                f"{official.n_items} items: records are missing" if len(per_query) < official.n_items
                                else f"{len(per_query)} per-query records, more than the {official.n_items} official items"))
    for subset in sorted(set(official.subsets) | set(submitted)):
        want, got = official.subsets.get(subset), submitted.get(subset)
        if want is None:
            problems.append(Problem(f"{PER_QUERY}: subset", f"{subset!r} is not a subset of the official pool set"))
        elif got is None:
            problems.append(Problem(f"{PER_QUERY}: subset", f"{subset!r}: all {want.n_items} items are missing"))
        elif got.n_items != want.n_items:
            problems.append(Problem(f"{PER_QUERY}: subset", f"{subset!r}: {got.n_items} of {want.n_items} items present"))
        elif got.items_sha256 != want.items_sha256:
            problems.append(Problem(f"{PER_QUERY}: subset", f"{subset!r}: item ids, relevant ids, ranked candidates or "
                                    "metadata differ from the official pool set"))
    return problems


def _as_list(v: Any) -> list[str]:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return []
    return [str(x) for x in v]


def _check_metric_values(per_query: pd.DataFrame, names: list[str]) -> list[Problem]:
    problems = []
    if "error" in per_query.columns:
        failed = per_query[per_query["error"].notna()]
        if len(failed):
            problems.append(Problem(f"{PER_QUERY}: error", f"{len(failed)} items failed in the run "
                                    f"({_item_ids(failed['item_id'])}); a board needs every item scored"))
    typed = [Problem(f"{PER_QUERY}: {name}", f"column holds {per_query[name].dtype} values; it must hold numbers")
             for name in (*names, "first_relevant_rank") if not _numeric(per_query[name])]
    if typed:  # strings that merely look numeric would pass the checks below and break the aggregation
        return problems + typed
    for name in names:
        values = pd.to_numeric(per_query[name], errors="coerce").to_numpy(float)
        bad = ~np.isfinite(values)
        if bad.any():
            problems.append(Problem(f"{PER_QUERY}: {name}", f"not a finite number (NaN/inf) for items "
                                    f"{_item_ids(per_query['item_id'][bad])}"))
        out = np.isfinite(values) & ((values < 0) | (values > 1))
        if out.any():
            problems.append(Problem(f"{PER_QUERY}: {name}", f"outside [0, 1] for items {_item_ids(per_query['item_id'][out])}"))
    return problems


def _numeric(column: pd.Series) -> bool:
    """A column of numbers (missing values allowed), not of strings, booleans or lists."""
    if pd.api.types.is_bool_dtype(column):
        return False
    if pd.api.types.is_numeric_dtype(column):
        return True
    return all(v is None or (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)))
               for v in column)


def _check_rankings(per_query: pd.DataFrame, names: list[str]) -> list[Problem]:
    """Scores descend along the ranking, and each item's metrics follow from its ranking."""
    unordered, tampered = [], {}
    for row in per_query.to_dict("records"):
        ranked, relevant = _as_list(row["ranked_ids"]), _as_list(row["relevant_ids"])
        try:
            scores = np.asarray(list(row["scores"]), dtype=float)
        except (TypeError, ValueError):
            unordered.append(row["item_id"])
            continue
        rounded = np.round(scores, SCORE_DECIMALS)
        if len(scores) != len(ranked) or not np.all(np.isfinite(scores)) or np.any(np.diff(rounded) > 0):
            unordered.append(row["item_id"])
            continue
        want = item_metrics(ranked, relevant)
        for n in names:
            if abs(float(row[n]) - want[n]) > TOLERANCE:
                tampered.setdefault(n, []).append(row["item_id"])
        frr = row["first_relevant_rank"]
        first = next((i for i, c in enumerate(ranked, 1) if c in set(relevant)), None)
        if (first is None) != (frr is None or (isinstance(frr, float) and math.isnan(frr))) or (first and int(frr) != first):
            tampered.setdefault("first_relevant_rank", []).append(row["item_id"])
    problems = []
    if unordered:
        problems.append(Problem(f"{PER_QUERY}: scores", f"must be finite, one per ranked candidate and non-increasing "
                                f"along ranked_ids; not so for items {_item_ids(unordered)}"))
    for n, ids in tampered.items():
        problems.append(Problem(f"{PER_QUERY}: {n}", f"differs from the value recomputed from ranked_ids and "
                                f"relevant_ids for items {_item_ids(ids)}"))
    return problems


def _check_aggregates(summary: dict[str, Any], recomputed) -> list[Problem]:
    """The facet groups (`mmbench.groups`; `scores.test` in older results) and the one mteb entry
    (`scores.test`, hf_subset "default": all items) must match what the per-query records give."""
    want = {r.group: r for r in recomputed}
    info = summary.get("mmbench") or {}
    main_metric = info.get("main_metric") if isinstance(info.get("main_metric"), str) else None
    if not isinstance(info.get("groups"), list):  # results written before the facets left scores.test
        return _check_entries(summary["scores"]["test"], want, "scores.test", main_metric)
    problems = _check_entries(info["groups"], want, "mmbench.groups", main_metric)
    if "all" in want:
        problems += _check_entries(summary["scores"]["test"], {MTEB_SUBSET: want["all"]}, "scores.test")
        main_metric = info.get("main_metric")
        entry = next((e for e in summary["scores"]["test"] if isinstance(e, dict)
                      and e.get("hf_subset") == MTEB_SUBSET), {})
        main = want["all"].metrics.get(main_metric) if isinstance(main_metric, str) else None
        got = entry.get("main_score")
        if main is None:
            problems.append(Problem(f"{SUMMARY}: mmbench.main_metric", f"{main_metric!r} is not a metric"))
        elif isinstance(got, bool) or not isinstance(got, (int, float)) or abs(got - main) > TOLERANCE:
            problems.append(Problem(f"{SUMMARY}: scores.test[{MTEB_SUBSET}].main_score",
                                    f"{got!r} differs from {main_metric} {main!r} recomputed from the per-query records"))
    return problems


def _check_entries(entries: Any, want: dict[str, Any], where: str, main_metric: str | None = None) -> list[Problem]:
    problems: list[Problem] = []
    submitted: dict[str, dict[str, Any]] = {}
    for i, e in enumerate(entries if isinstance(entries, list) else []):
        group = e.get("hf_subset") if isinstance(e, dict) else None
        if not isinstance(group, str):
            problems.append(Problem(f"{SUMMARY}: {where}[{i}].hf_subset", "must be a string"))
        elif group in submitted:
            problems.append(Problem(f"{SUMMARY}: {where}[{i}].hf_subset", f"group {group!r} appears twice"))
        else:
            submitted[group] = e
    for group in sorted(set(submitted) - set(want)):
        problems.append(Problem(f"{SUMMARY}: {where}[{group}]", "group does not follow from the per-query records"))
    for group, row in want.items():
        e = submitted.get(group)
        if e is None:
            problems.append(Problem(f"{SUMMARY}: {where}[{group}]", "aggregate is missing"))
            continue
        if e.get("n_items") != row.n:
            problems.append(Problem(f"{SUMMARY}: {where}[{group}].n_items", f"{e.get('n_items')!r}, recomputed {row.n}"))
        for key in sorted(set(e) - set(row.metrics) - ENTRY_FIELDS):
            problems.append(Problem(f"{SUMMARY}: {where}[{group}].{ascii(key)[1:-1]}",
                                    "is not a metric recomputed from the per-query records; remove it"))
        if not isinstance(e.get("languages", []), list) or not all(isinstance(x, str) for x in e.get("languages", [])):
            problems.append(Problem(f"{SUMMARY}: {where}[{group}].languages", "must be a list of strings"))
        # main_score is what mteb's get_score() reads: where a group states one, it is the recomputed main metric
        stated_main = [("main_score", row.metrics.get(main_metric))] if "main_score" in e and main_metric else []
        for metric, value in [*stated_main, *row.metrics.items()]:
            got = e.get(metric)
            at = f"{SUMMARY}: {where}[{group}].{metric}"
            if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isfinite(got):
                problems.append(Problem(at, f"{got!r} is not a finite number"))
            elif not 0.0 <= got <= 1.0:
                problems.append(Problem(at, f"{got!r} is outside [0, 1]"))
            elif abs(got - value) > TOLERANCE:
                problems.append(Problem(at, f"{got!r} differs from {value!r} recomputed from the per-query records"))
    return problems


# ---------------------------------------------------------------- RAVEL predictor scores


def validate_ravel(files: dict[str, bytes], limits: Limits) -> Submission:
    """A predictor's scores per (encoder, language model) of the reference table, and its correlation."""
    from mmbench.builders.sources.feature_arrays import table7_path
    from mmbench.evaluators.ravel.correlate import (canonical_encoder, canonical_llm, correlate, describe_pairs, merge,
                                                    unmatched)
    from mmbench.running.ravel_inputs import load_ground_truth

    where = RAVEL_FILE
    doc = parse_json(files[RAVEL_FILE], where, limits)
    if not isinstance(doc, dict):
        _stage([Problem(where, "must be a JSON object")])
    problems = []
    if doc.get("task", RAVEL_TASK) != RAVEL_TASK:
        problems.append(Problem(f"{where}: task", f"must be {RAVEL_TASK!r}"))
    model = doc.get("model")
    if not isinstance(model, dict):
        problems.append(Problem(f"{where}: model", "predictor identity (name, settings) is missing"))
    else:
        problems += _check_model(model, f"{where}: model", limits)
    if not isinstance(doc.get("lower_is_better", False), bool):
        problems.append(Problem(f"{where}: lower_is_better", f"{doc['lower_is_better']!r} is not true or false"))
    for key in sorted(set(doc) - RAVEL_FIELDS):   # a number no check covers must not ride along
        problems.append(Problem(f"{where}: {ascii(key)[1:-1]}", f"is not a field of a RAVEL submission "
                                f"({', '.join(sorted(RAVEL_FIELDS))})"))
    records = doc.get("scores")
    if not isinstance(records, list) or not records:
        problems.append(Problem(f"{where}: scores", "must be a non-empty list of {encoder, llm, score} records"))
    _stage(problems)
    rows, seen = [], set()
    for i, r in enumerate(records):
        if not isinstance(r, dict) or not all(isinstance(r.get(k), str) for k in ("encoder", "llm")):
            problems.append(Problem(f"{where}: scores[{i}]", "needs string fields encoder and llm"))
            continue
        extra = sorted(set(r) - {"encoder", "llm", "score"})
        if extra:
            problems.append(Problem(f"{where}: scores[{i}]", f"unknown field(s) {', '.join(map(ascii, extra))}; a "
                                    "record is {encoder, llm, score}"))
            continue
        s = r.get("score")
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s):
            problems.append(Problem(f"{where}: scores[{i}].score", f"{s!r} is not a finite number"))
            continue
        if abs(s) > limits.max_abs_score:  # 1e308 is finite, but its square (in the correlation) is not
            problems.append(Problem(f"{where}: scores[{i}].score", f"{s!r} is larger in magnitude than the limit "
                                    f"of {limits.max_abs_score:g}; rescale the predictor's scores"))
            continue
        key = (canonical_encoder(r["encoder"]), canonical_llm(r["llm"]))
        if key in seen:
            problems.append(Problem(f"{where}: scores[{i}]", f"pair {key} appears twice"))
            continue
        seen.add(key)
        rows.append({"encoder": key[0], "llm": key[1], "score": float(s)})
    _stage(problems)
    gt = load_ground_truth()
    missing = unmatched(pd.DataFrame(rows), gt)
    _stage([Problem(f"{where}: scores", f"{len(missing)} scored (encoder, llm) pairs have no ground truth in the "
                    f"reference table: {describe_pairs(missing)}; use its encoder and language-model names")]
           if missing else [])
    merged = merge(pd.DataFrame(rows), gt)
    counts = merged.groupby("llm").size()
    _stage([Problem(f"{where}: scores", f"language model {llm!r} has {n} scored encoders; at least 3 are needed")
            for llm, n in counts.items() if n < 3])
    spread = merged.groupby("llm")["score"].agg(lambda v: v.max() - v.min())
    _stage([Problem(f"{where}: scores", f"every score for language model {llm!r} is the same; "
                    "a correlation with the measured performance is undefined") for llm, d in spread.items() if d == 0])
    result = correlate(merged, negate=doc.get("lower_is_better", False))
    scores = {f"llm={r['llm']}": {"n": float(r["n"]), "spearman": float(r["spearman"]), "pearson": float(r["pearson"])}
              for r in result.to_dict("records")}
    stated = doc.get("correlation")
    if stated is not None:
        _stage(_check_stated_correlation(stated, scores, where))
    reference = hashlib.sha256(table7_path().read_bytes()).hexdigest()
    return Submission("ravel", RAVEL_TASK, "table7", reference, model, dict(files), scores)


def _check_stated_correlation(stated: Any, scores: dict[str, dict[str, float]], where: str) -> list[Problem]:
    if not isinstance(stated, dict):
        return [Problem(f"{where}: correlation", "must be an object {llm: {spearman, pearson}}")]
    from mmbench.evaluators.ravel.correlate import LLM_SHORT, canonical_llm

    problems = []
    for llm, values in stated.items():
        key = f"llm={LLM_SHORT.get(canonical_llm(llm), llm)}"
        want = scores.get(key)
        if want is None or not isinstance(values, dict):
            problems.append(Problem(f"{where}: correlation.{llm}", "no scored pairs for this language model"))
            continue
        for metric in ("spearman", "pearson"):
            got = values.get(metric)
            if got is None:
                continue
            if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isfinite(got) or abs(got) > 1:
                problems.append(Problem(f"{where}: correlation.{llm}.{metric}", f"{got!r} is not a correlation in [-1, 1]"))
            elif abs(got - want[metric]) > TOLERANCE:
                problems.append(Problem(f"{where}: correlation.{llm}.{metric}",
                                        f"{got!r} differs from {want[metric]!r} recomputed from the scores"))
    return problems
