"""Draws and overfit reports checked before anything uses them: numbers in range, made for these runs.

A draws report (`mmbench draws`) or an overfit report (`mmbench overfit`) is a JSON file anyone can edit, and one
made on reduced builds of another model reads just like one made for the runs beside it. Before `show --draws`,
`compare --draws` or a board's "within the spread" uses a report, `draws_problem` / `overfit_problem` say in one
line why it cannot be used:

* range: every spread, error and ratio is a finite number >= 0 and within what its definition allows (a between-draw
  sd of a metric in [0, 1] over k >= 2 draws is at most 1/sqrt(2), that of a difference of two such metrics at most
  sqrt(2)); every mean and score is finite and within the metric's range;
* made for these runs: the report records what its runs were (`runs_record`: task version, the pool sets' design
  -- builder, source and parameters less the seed -- each model's identity less its display name, and its protocol
  setup id and truncation rule); each run it is read beside must match on all of them for its model, and the model
  must be in the report. A report written before mmbench recorded this cannot be checked and is refused.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Iterable, Mapping, Sequence

from mmbench.results.store import RunResults

SCORE_RANGE = (0.0, 1.0)    # every per-query metric mmbench ranks by (P@k, R@k, MRR@k, nDCG@k) lies in [0, 1]
SD_MAX = 1 / math.sqrt(2)   # the largest sample sd (ddof 1) of k >= 2 values in an interval of width 1
DIFF_SD_MAX = math.sqrt(2)  # ... of width 2 (a difference of two such scores)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def design_of(builder: dict[str, Any]) -> dict[str, Any]:
    """A pool set's design from its manifest's builder record: builder, source and parameters (no seed)."""
    return {"builder": builder.get("name"), "source": builder.get("source"), "params": builder.get("params")}


def model_record(info: dict[str, Any]) -> dict[str, Any]:
    """What a run says of its model and protocol, as a report records it and a reader compares it."""
    identity = {k: v for k, v in (info.get("model") or {}).items() if k != "name"}
    protocol = info.get("protocol") or {}
    return {"identity": _digest(identity), "setup": str(info.get("protocol_id") or ".").split(".", 1)[-1],
            "truncation_rule": (protocol.get("evaluation") or {}).get("truncation_rule")}


def runs_record(task_version: str, by_model: Mapping[str, Sequence[RunResults]]) -> dict[str, Any]:
    """The `made_from` block of a report: what the runs it was computed from were."""
    designs = {_digest(r.info.get("design")): r.info.get("design") for runs in by_model.values() for r in runs}
    return {"task_version": task_version, "design": next(iter(designs.values())) if len(designs) == 1 else None,
            "models": {name: model_record(runs[0].info) for name, runs in by_model.items() if runs}}


def _number(value: Any, low: float, high: float) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and low <= value <= high)


def _range_problem(data: dict[str, Any]) -> str | None:
    for name, values in (data.get("scores") or {}).items():
        if not isinstance(values, list) or not all(_number(v, *SCORE_RANGE) for v in values):
            return f"scores.{name}: {values!r} holds a score outside [0, 1]"
    for name, rows in (data.get("models") or {}).items():
        for r in rows if isinstance(rows, list) else [None]:
            if not isinstance(r, dict):
                return f"models.{name}: not a list of groups"
            group = r.get("group")
            checks = (("between_sd", 0.0, SD_MAX), ("between_low", 0.0, SD_MAX), ("between_high", 0.0, math.inf),
                      ("within_se", 0.0, SD_MAX), ("ratio", 0.0, math.inf), ("mean", *SCORE_RANGE))
            for field_name, low, high in checks:
                value = r.get(field_name)
                if value is not None and not _number(value, low, high):
                    return f"models.{name}[{group}].{field_name}: {value!r} is outside [{low:g}, {high:g}]"
    for p in data.get("pairs") or []:
        if not isinstance(p, dict):
            return "pairs: not a list of objects"
        sd, diff = p.get("between_sd_of_difference"), p.get("mean_diff")
        if sd is not None and not _number(sd, 0.0, DIFF_SD_MAX):
            return f"pairs[{p.get('a')} - {p.get('b')}].between_sd_of_difference: {sd!r} is outside [0, {DIFF_SD_MAX:.4f}]"
        if not _number(diff, -1.0, 1.0):
            return f"pairs[{p.get('a')} - {p.get('b')}].mean_diff: {diff!r} is outside [-1, 1]"
    return None


def _made_for(made: Any, task: str, task_version: Any, runs: Iterable[tuple[str, dict[str, Any]]],
              data_task: Any) -> str | None:
    """Why a report (its `made_from` block) was not made for `runs`: another task or version, none of their models,
    or, for a model it holds, another identity, protocol setup, truncation rule or pool-set design."""
    if data_task != task:
        return f"task: the report is of {data_task!r}, the runs of {task!r}"
    if not isinstance(made, dict) or not isinstance(made.get("models"), dict):
        return ("made_from: missing (a report written before mmbench recorded what it was made from cannot be "
                "checked against these runs); make it again")
    if made.get("task_version") != task_version:
        return f"made_from.task_version: {made.get('task_version')!r}, the runs are of version {task_version!r}"
    names, matched = [], 0
    for label, info in runs:
        name = str((info.get("model") or {}).get("name"))
        names.append(name)
        mine = made["models"].get(name)
        if not isinstance(mine, dict):
            continue
        matched += 1
        theirs = model_record(info)
        for key, what in (("identity", "model identity (weights, revision, settings)"),
                          ("setup", "protocol setup (instructions, visual budget, window, pooling, dtype, backend)"),
                          ("truncation_rule", "truncation rule")):
            if mine.get(key) != theirs[key]:
                return f"made_from.models.{name}.{key}: the report's {what} is not that of {label}"
        design = info.get("design")
        if design is not None and made.get("design") != design:
            return (f"made_from.design: the draws were built as {json.dumps(made.get('design'), sort_keys=True)}, "
                    f"{label}'s pool set as {json.dumps(design, sort_keys=True)}")
    if not matched:
        held = ", ".join(sorted(map(str, made["models"]))) or "no model"
        return f"models: the report holds {held}, none of {', '.join(sorted(set(names))) or 'the runs'}"
    return None


def draws_problem(data: Any, task: str, runs: Sequence[tuple[str, dict[str, Any]]]) -> str | None:
    """Why the draws report `data` cannot be read beside `runs` ((label, results.json's mmbench block) of task
    `task`), in one line; None when it can."""
    if not isinstance(data, dict) or data.get("kind") != "mmbench.draws":
        return "not a draws.json of `mmbench draws` (kind is not mmbench.draws)"
    problem = _range_problem(data)
    if problem is not None:
        return problem
    version = runs[0][1].get("task_version") if runs else None
    return _made_for(data.get("made_from"), task, version, runs, data.get("task"))


def reference_problem(data: Any, task: str, task_version: Any, design: dict[str, Any] | None) -> str | None:
    """Why the draws report `data` cannot lend its draw variance to a fresh-draw test of `task` (the overfit
    command's references: other models' draws): not a draws report, a value out of range, another task, task
    version or pool-set design; None when it can."""
    if not isinstance(data, dict) or data.get("kind") != "mmbench.draws":
        return "not a draws.json of `mmbench draws` (kind is not mmbench.draws)"
    problem = _range_problem(data)
    if problem is not None:
        return problem
    made = data.get("made_from")
    if data.get("task") != task:
        return f"task: the report is of {data.get('task')!r}, the test of {task!r}"
    if not isinstance(made, dict):
        return "made_from: missing (a report written before mmbench recorded what it was made from); make it again"
    if made.get("task_version") != task_version:
        return f"made_from.task_version: {made.get('task_version')!r}, the test is of version {task_version!r}"
    if design is not None and made.get("design") != design:
        return (f"made_from.design: the draws were built as {json.dumps(made.get('design'), sort_keys=True)}, "
                f"the public draw as {json.dumps(design, sort_keys=True)}")
    return None


def overfit_problem(data: Any, runs: Sequence[tuple[str, dict[str, Any]]]) -> str | None:
    """Why an overfit report cannot be shown beside the board's runs `runs` of its task and model (one line)."""
    if not isinstance(data, dict):
        return "not an overfit report of `mmbench overfit`"
    g = data.get("gap")
    if not isinstance(g, dict):
        return "gap: missing"
    for field_name, low, high in (("public", *SCORE_RANGE), ("fresh_mean", *SCORE_RANGE), ("gap", -1.0, 1.0),
                                  ("ci_low", -1.0, 1.0), ("ci_high", -1.0, 1.0), ("half_width", 0.0, 1.0)):
        if not _number(g.get(field_name), low, high):
            return f"gap.{field_name}: {g.get(field_name)!r} is outside [{low:g}, {high:g}]"
    if not g["ci_low"] <= g["gap"] <= g["ci_high"]:
        return f"gap: {g['gap']!r} lies outside its own CI [{g['ci_low']!r}, {g['ci_high']!r}]"
    if not (isinstance(g.get("n_fresh"), int) and g["n_fresh"] >= 2):
        return f"gap.n_fresh: {g.get('n_fresh')!r} is not a count of at least 2 fresh draws"
    if not runs:
        return f"model: {data.get('model')!r} has no run of {data.get('task')!r} on this board"
    public = (data.get("public") or {}).get("content_hash") if isinstance(data.get("public"), dict) else None
    for label, info in runs:
        if public != info.get("content_hash"):
            return f"public.content_hash: the report's public draw {str(public)[:16]!r} is not the pool set of {label}"
    version = runs[0][1].get("task_version")
    return _made_for(data.get("made_from"), str(data.get("task")), version, runs, data.get("task"))
