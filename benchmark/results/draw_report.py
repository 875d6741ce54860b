"""The draws report: between-draw spread of each model's scores next to the within-draw error, per group,
and for each pair of models whether their difference is smaller than the between-draw spread."""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from mmbench.evaluators.stats.draw_spread import DEFAULT_AXES, DEFAULT_CELL, difference_spread, draw_spread, within_spread
from mmbench.results.store import RunResults


def draws_numbers(task: str, metric: str, seeds: Sequence[int], by_model: dict[str, list[RunResults]],
                  axes: Sequence[str] = DEFAULT_AXES, cell: Sequence[str] = DEFAULT_CELL) -> dict[str, Any]:
    """All numbers of the report as JSON-ready data; `by_model[m][k]` is model m's run on draw seeds[k]."""
    models = {}
    for name, runs in by_model.items():
        models[name] = [row.to_dict() for row in draw_spread([r.per_query for r in runs], metric, axes, cell)]
    scores = {name: [float(np.nanmean(r.per_query[metric].to_numpy(dtype=float))) for r in runs]
              for name, runs in by_model.items()}
    pairs = []
    for a, b in itertools.combinations(by_model, 2):
        diff = float(np.mean(scores[a]) - np.mean(scores[b]))
        spread = difference_spread(scores[a], scores[b])
        pairs.append({"a": a, "b": b, "mean_diff": diff, "between_sd_of_difference": spread,
                      "within_draw_spread": within_spread(diff, spread)})
    return {"kind": "mmbench.draws", "task": task, "metric": metric, "seeds": list(seeds),
            "content_hashes": {name: [r.content_hash for r in runs] for name, runs in by_model.items()},
            "scores": scores, "models": models, "pairs": pairs,
            "effective": {name: [effective_reading(r, metric, task) for r in runs] for name, runs in by_model.items()}}


def effective_reading(run: RunResults, metric: str, task: str) -> dict[str, Any] | None:
    """One draw's effective context (tokens, censored: only a lower bound), None where it cannot be read."""
    from mmbench.evaluators.stats.effective_length import run_effective_length
    from mmbench.tasks import design_strata

    if run.seen is None or metric not in run.per_query.columns or "relevant_ids" not in run.per_query.columns:
        return None
    e = run_effective_length(run.per_query, run.seen, metric, strata=design_strata(task)).to_dict()
    if e.get("effective_tokens") is None:
        return {"tokens": None, "censored": False, "status": e.get("status")}
    return {"tokens": int(e["effective_tokens"]), "censored": bool(e.get("censored")), "status": e.get("status"),
            "bin": e.get("effective_bin")}


def _reading_words(r: dict[str, Any]) -> str:
    if r.get("tokens") is None:
        return f"none ({r.get('status')})"
    return f"at least {r['tokens']:,}" if r["censored"] else f"{r['tokens']:,}"


def _reading_kind(r: dict[str, Any]) -> str:
    """What two draws must share to agree: no drop up to the longest length seen (censored), or the bin read whole."""
    if r.get("tokens") is None:
        return f"no effective context ({r.get('status')})"
    if r["censored"]:
        return "no drop up to the longest length seen"
    return f"a drop after the {r['bin']} bin" if r.get("bin") else f"{r['tokens']:,} tokens"


def effective_over_draws(readings: Sequence[dict[str, Any] | None]) -> str | None:
    """The effective context over the draws as a range, with the share of draws that agree on the most common
    reading (censored, or the same bin read whole; None: no draw has one)."""
    got = [r for r in readings if r is not None]
    if not got:
        return None
    words = [_reading_kind(r) for r in got]
    common = max(dict.fromkeys(words), key=words.count)
    known = [r for r in got if r.get("tokens") is not None]
    if not known:
        return f"effective context over {len(got)} draws: {common}, {words.count(common)} of {len(got)} draws"
    lo = min(known, key=lambda r: (r["tokens"], r["censored"]))
    hi = max(known, key=lambda r: (r["tokens"], r["censored"]))
    span = _reading_words(lo) if lo == hi else f"{_reading_words(lo)} to {_reading_words(hi)}"
    return (f"effective context over {len(got)} draws: {span} tokens; {words.count(common)} of {len(got)} draws agree "
            f"on {common} (one draw's reading is not the task's)")


def _f(v: Any, digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def draws_markdown(data: dict[str, Any]) -> str:
    lines = [f"# mmbench draws: {data['task']}", "",
             f"{len(data['seeds'])} draws (seeds {', '.join(map(str, data['seeds']))}), metric {data['metric']}. "
             "Between-draw sd: the sd of the group's score over the draws, with its 95 % chi-square CI; within-draw "
             "error: the root mean square of the draws' standard errors; ratio: between / within, beside the range "
             "item-sampling noise alone gives it (95 %, chi-square with draws − 1 df) and the p of that chi-square test: "
             "a ratio inside the range is no evidence of draw variance, whatever its distance from 1.", ""]
    for name, rows in data["models"].items():
        lines += [f"## {name}", "", "| group | mean | between-draw sd [95 % CI] | within-draw error | ratio "
                  "[pure-noise range] | p | items/draw |", "|---|---|---|---|---|---|---|"]
        for r in rows:
            ci = f" [{_f(r['between_low'])}, {_f(r['between_high'])}]" if r["between_sd"] is not None else ""
            band = (f" [{_f(r.get('noise_low'), 2)}, {_f(r.get('noise_high'), 2)}]"
                    if r.get("noise_low") is not None and r["ratio"] is not None else "")
            p = "–" if r.get("p_value") is None else f"{r['p_value']:.3g}"
            lines.append(f"| {r['group']} | {_f(r['mean'])} | {_f(r['between_sd'])}{ci} | {_f(r['within_se'])} | "
                         f"{_f(r['ratio'], 2)}{band} | {p} | {r['items']:.0f} |")
        eff = effective_over_draws(data.get("effective", {}).get(name, []))
        lines += ["", eff] if eff else []
        lines.append("")
    if data["pairs"]:
        lines += ["## Differences between models", "", "| A | B | mean diff | between-draw sd of the difference | note |",
                  "|---|---|---|---|---|"]
        for p in data["pairs"]:
            note = "smaller than the between-draw spread: another draw could reverse it" if p["within_draw_spread"] else ""
            lines.append(f"| {p['a']} | {p['b']} | {_f(p['mean_diff'], 4)} | {_f(p['between_sd_of_difference'], 4)} | {note} |")
        lines.append("")
    return "\n".join(lines)


def draw_variances(data: dict[str, Any], exclude: str | None = None) -> list[Any]:
    """The task's draw-variance estimates in a draws report, one per model with at least two draws ("all" group),
    leaving out `exclude` (the model under test): references of the overfitting test."""
    from mmbench.evaluators.stats.overfit_gap import DrawVariance

    out = []
    for name, rows in data.get("models", {}).items():
        row = next((r for r in rows if r["group"] == "all"), None)
        if name == exclude or row is None or row.get("between_sd") is None or row.get("within_se") is None:
            continue
        out.append(DrawVariance(float(row["between_sd"]), float(row["within_se"]), int(row["draws"]),
                                f"{data.get('task')}: {name}"))
    return out


def spread_for(data: dict[str, Any], a: str, b: str) -> float | None:
    """The between-draw sd against which a difference between models a and b is read: the sd of their
    difference over the draws when both were run on them, else the larger of their scores' between-draw sd
    ("all" group), else that of any model in the report."""
    for p in data.get("pairs", []):
        if {p["a"], p["b"]} == {a, b}:
            return p["between_sd_of_difference"]
    sds: dict[str, float] = {}
    for name, rows in data.get("models", {}).items():
        sd = next((r["between_sd"] for r in rows if r["group"] == "all"), None)
        if sd is not None:
            sds[name] = float(sd)
    known = [sds[m] for m in (a, b) if m in sds] or list(sds.values())
    return max(known) if known else None


def spread_lines(data: dict[str, Any], task: str, model: str) -> list[str]:
    """What `show --draws` prints: the between-draw sd of the task's score, and the difference between two models
    that a new draw could reverse."""
    if data.get("task") != task:
        return [f"draws: the report is of task {data.get('task')}, not {task}; no between-draw spread shown"]
    rows = {r["group"]: r for r in data.get("models", {}).get(model, [])}
    own = rows.get("all")
    lines = [f"draws: {len(data.get('seeds', []))} draws of {task} ({data.get('metric')})"]
    if own and own["between_sd"] is not None:
        noise = (f"; item noise alone gives {own['noise_low']:.2f}–{own['noise_high']:.2f}, p = {own['p_value']:.3g}"
                 if own.get("noise_low") is not None and own.get("p_value") is not None else "")
        lines.append(f"  {model}: mean {own['mean']:.4f} over the draws, between-draw sd {own['between_sd']:.4f} "
                     f"(within-draw error {own['within_se']:.4f}, ratio {own['ratio']:.2f}{noise})")
    eff = effective_over_draws(data.get("effective", {}).get(model, []))
    if eff:
        lines.append(f"  {eff}")
    spreads = [p["between_sd_of_difference"] for p in data.get("pairs", [])
               if model in (p["a"], p["b"]) and p["between_sd_of_difference"] is not None]
    sd = max(spreads) if spreads else (own or {}).get("between_sd")
    if sd is not None:
        lines.append(f"  a difference from another model smaller than {sd:.4f} is within the between-draw spread: "
                     "a new draw could reverse it")
    else:
        lines.append(f"  {model} is not in the draws report; run `mmbench draws --model {model}` to measure its spread")
    return lines
