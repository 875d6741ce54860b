"""The main board in the field's layout (MTEB / Open LLM leaderboard): one row per model, one column per
retrieval task (its main score with a bootstrap CI, plus Easy and Hard where the task has them), the
share of documents truncated and of content unseen per task, an overall mean and a rank, and the
model's metadata. A random-ranking row gives each column's chance level.

Pure function of the entries and a results loader; the site renders it.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from mmbench.evaluators.stats import bootstrap_ci
from mmbench.results.store import RunResults

from mmbench.leaderboards.boards import CI_RESAMPLES, FLOOR_LABEL, Column, Table, chance_of
from mmbench.leaderboards.modelmeta import ModelMeta, display_name
from mmbench.leaderboards.places import PLACE_WORDS, group_floors, mean_places, task_places
from mmbench.leaderboards.store import Entry

METRIC_LABELS = {"precision_at_1": "P@1", "precision_at_5": "P@5", "recall_at_1": "R@1", "recall_at_3": "R@3",
                 "mrr": "MRR", "ndcg_at_10": "nDCG@10"}


def main_score(task: str) -> str:
    from mmbench.tasks import UnknownTaskError, get_task

    try:
        return get_task(task).main_score
    except UnknownTaskError:
        return "precision_at_1"


def seen_shares(run: RunResults) -> dict[str, Any]:
    """Share of encoded documents the model saw middle-truncated, and with content it could not see."""
    info = run.info
    total = len(run.seen) if len(run.seen) else (info.get("encode") or {}).get("documents")
    trunc, unseen = info.get("documents_truncated"), info.get("documents_with_unseen_modalities")
    ok = isinstance(total, int) and total > 0
    return {"documents": total if ok else None,
            "truncated": trunc, "unseen": unseen,
            "truncated_share": trunc / total if ok and isinstance(trunc, int) else None,
            "unseen_share": unseen / total if ok and isinstance(unseen, int) else None}


def _score_ci(pq: pd.DataFrame, metric: str, resamples: int, seed: int) -> dict[str, Any] | None:
    if metric not in pq.columns:
        return None
    values = pd.to_numeric(pq[metric], errors="coerce").dropna().to_numpy(float)
    if len(values) == 0:
        return None
    if len(values) < 2:
        return {"estimate": float(values.mean()), "low": None, "high": None}
    ci = bootstrap_ci(values, resamples=resamples, seed=seed)
    return {"estimate": ci.estimate, "low": ci.low, "high": ci.high}


def _difficulty_mean(pq: pd.DataFrame, metric: str, level: str) -> float | None:
    if "difficulty" not in pq.columns or metric not in pq.columns:
        return None
    part = pq[pq["difficulty"].astype("string").str.lower() == level]
    return float(part[metric].mean()) if len(part) else None


def size_class(parameters: int | None) -> str:
    """The size filter's bucket of a parameter count."""
    if parameters is None:
        return "unknown"
    for limit, name in ((1e9, "<1B"), (3e9, "1-3B"), (10e9, "3-10B")):
        if parameters < limit:
            return name
    return ">10B"


def comparable(rows: dict[str, dict[str, Any]], tasks: Sequence[str], complete: Sequence[str]) -> tuple[list[str], str]:
    """The rows the headline mean may rank, and one line saying who is left out and why.

    A mean over tasks ranks only models with a result on every task it averages; when fewer than two models
    have one (and the board holds more than one model), no one is ranked on the mean (one model ranked alone
    would sit above models it was never compared with): the per-task rank intervals are the comparison."""
    missing = {k: [t for t in tasks if t not in r["_tasks"]] for k, r in rows.items()}
    out = [k for k in rows if k not in complete]
    if len(complete) >= 2 or len(rows) == 1:
        if not out:
            return list(complete), ""
        return list(complete), ("Left out of the mean and its rank: " + "; ".join(
            f"{k} (no result on {', '.join(missing[k])})" for k in sorted(out, key=str.lower)) + ".")
    why = "; ".join(f"{k} lacks {', '.join(missing[k])}" for k in sorted(out, key=str.lower))
    only = f"only {complete[0]} has" if complete else "no model has"
    return [], (f"No rank on the mean: {only} a result on every task ({', '.join(tasks)}); {why}. "
                "Compare models task by task (each task's rank interval and tier).")


def overview_table(entries: Sequence[Entry], loader: Callable[[Entry], RunResults],
                   meta: Callable[[Entry], ModelMeta], resamples: int = CI_RESAMPLES, seed: int = 0) -> Table:
    src = [e for e in entries if e.kind == "retrieval"]
    tasks = sorted({e.task for e in src})
    metric = {t: main_score(t) for t in tasks}
    runs = {e.id: loader(e) for e in src}
    has_diff = {t: any(_difficulty_mean(runs[e.id].per_query, metric[t], "easy") is not None
                       and _difficulty_mean(runs[e.id].per_query, metric[t], "hard") is not None
                       for e in src if e.task == t) for t in tasks}
    cols = [Column("rank", "Rank", "count"), Column("model", "Model", "model")]
    for t in tasks:
        label = f"{t} {METRIC_LABELS.get(metric[t], metric[t])}"
        cols.append(Column(f"{t}", label, "ci"))
        if has_diff[t]:
            cols += [Column(f"{t}:easy", f"{t} Easy"), Column(f"{t}:hard", f"{t} Hard")]
        cols.append(Column(f"{t}:seen", f"{t} truncated / unseen", "seen"))
        cols.append(Column(f"{t}:place", f"{t} rank interval · tier", "place"))
    cols += [Column("mean", "Mean (tasks)"), Column("place", "Rank interval · tier (mean)", "place"),
             Column("protocol", "Protocol", "text"),
             Column("parameters", "Parameters", "count"), Column("dim", "Dim", "count"),
             Column("context", "Context", "count"), Column("modalities", "Modalities", "text"),
             Column("license", "Licence", "text"), Column("weights", "Weights", "link")]

    rows: dict[str, dict[str, Any]] = {}
    frames: dict[str, dict[str, pd.DataFrame]] = {t: {} for t in tasks}  # task -> row key -> per-query table
    for e in sorted(src, key=lambda e: (e.submitted_at, e.id)):
        name = display_name(e.model_name)
        key, k = name, 1
        while key in rows and e.task in rows[key]["_tasks"]:  # a second submission of one model to one task
            k += 1
            key = f"{name} #{k}"
        if key not in rows:
            m = meta(e)
            rows[key] = {"model": key, "_page": f"models/{e.slug}.html", "_id": e.id, "_tasks": set(),
                         "parameters": m.parameters, "dim": m.dim, "context": m.context,
                         "modalities": " ".join(m.modalities) or None, "license": m.license, "weights": m.weights,
                         "_size": size_class(m.parameters)}
        row = rows[key]
        row["_tasks"].add(e.task)
        run = runs[e.id]
        pq = run.per_query
        row[e.task] = _score_ci(pq, metric[e.task], resamples, seed)
        if has_diff[e.task]:
            row[f"{e.task}:easy"] = _difficulty_mean(pq, metric[e.task], "easy")
            row[f"{e.task}:hard"] = _difficulty_mean(pq, metric[e.task], "hard")
        row[f"{e.task}:seen"] = seen_shares(run)
        frames[e.task][key] = pq
        ids = dict(row.get("_protocols") or {})
        ids[e.task] = run.info.get("protocol_id")
        row["_protocols"] = ids
    floors: dict[str, Any] = {}
    for t in tasks:
        placed, floors[t], _ = task_places(frames[t], metric[t], resamples, seed)
        for key, place in placed.items():
            rows[key][f"{t}:place"] = place
    complete = [k for k, r in rows.items() if r["_tasks"] >= set(tasks)]
    ranked_keys, left_out = comparable(rows, tasks, complete)
    for key, place in mean_places(frames, metric, ranked_keys, resamples, seed).items():
        rows[key]["place"] = place
    for row in rows.values():
        ids = sorted({i for i in (row.pop("_protocols", None) or {}).values() if i})
        row["protocol"] = ", ".join(ids) or None
    out = list(rows.values())
    for row in out:
        scores = [(row.get(t) or {}).get("estimate") for t in tasks]
        row["mean"] = float(np.mean(scores)) if scores and all(s is not None and math.isfinite(s) for s in scores) else None
        row.pop("_tasks")
    ranked = sorted((r for r in out if r["mean"] is not None and r["model"] in ranked_keys), key=lambda r: -r["mean"])
    for i, r in enumerate(ranked):
        r["rank"] = i + 1 if i == 0 or r["mean"] < ranked[i - 1]["mean"] else ranked[i - 1]["rank"]
    out.sort(key=lambda r: (r.get("rank") is None, r.get("rank") or 0, r["model"].lower()))

    chance: dict[str, Any] = {"model": "random ranking (expected)", "_baseline": True}
    for t in tasks:
        first = next(e for e in src if e.task == t)
        pq = runs[first.id].per_query
        chance[t] = {"estimate": chance_of(pq, metric[t]), "low": None, "high": None}
        if has_diff[t]:
            for level in ("easy", "hard"):
                part = pq[pq["difficulty"].astype("string").str.lower() == level] if "difficulty" in pq.columns else pq[:0]
                chance[f"{t}:{level}"] = chance_of(part, metric[t])
    vals = [chance[t]["estimate"] for t in tasks]
    chance["mean"] = float(np.mean(vals)) if vals and all(v is not None for v in vals) else None
    table = Table("overview", "All tasks",
                  "One row per model: each retrieval task's main score with its 95 % percentile bootstrap CI "
                  f"({resamples} resamples over items, seed {seed}), Easy and Hard where the task has them, and the "
                  "share of documents the model saw truncated to its window / with content it cannot see. Mean and "
                  "rank over models that ran every task (ties share a rank). The random-ranking row is each "
                  "column's expected value under a uniformly random ranking. Per-subset scores are on each model's page. "
                  + PLACE_WORDS + ". Protocol: the results' protocol id (item selection and harness rules . model "
                  "setup); the board only joins results whose protocols agree.",
                  cols, out)
    table.note = left_out
    floor_row: dict[str, Any] = {"model": FLOOR_LABEL, "_baseline": True}
    for t in tasks:
        floor_row[t] = {"estimate": floors.get(t), "low": None, "high": None}
        if has_diff[t]:   # Easy and Hard: each over its own shared items
            floor_row.update({f"{t}:{level}": mde for level, mde in
                              group_floors(frames[t], metric[t], "difficulty", ("easy", "hard")).items()})
    table.baselines = [chance, floor_row]
    return table
