"""report.md: the text of `mmbench report`, one function per section, each reading typed records
(`mmbench.reports.records`) of the numbers `report_numbers` computed."""
from __future__ import annotations

from typing import Any

import numpy as np

from mmbench.reports.common import fmt, fmt_ci, fmt_p, md_table, subset_order
from mmbench.reports.efficiency import efficiency_markdown
from mmbench.reports.lengths import lengths_markdown
from mmbench.reports.records import PositionalFit, RunSummary, Settings, TaskReport

FLOOR_NOTE = ("A step marked ≈ is smaller than its resolution floor: the smallest change between the two points that "
              "their items detect with 80 % power at α = 0.05 (two-sample t-test at the metric's own per-item sd: the "
              "observed one, at most half the metric's range, e.g. 0.1 for P@5 with one relevant candidate; the bound "
              "where the scores do not vary). Such a step is not resolved at 80 % power: neither a change nor its absence is "
              "shown (at a true step equal to its floor a third of such steps still test significant); the floor "
              "follows each mark.")
CHANCE_NOTE = ("The random-ranking row is the exact expected value of each metric when every item's pool is ranked "
               "uniformly at random: a model near it has learned nothing the metric can see.")
FIT_NOTE = ("Fit: `ok`; `boundary` = the random-intercept variance is ≈ 0 (a singular but valid fit); "
            "**UNRELIABLE** = no optimizer gave a converged fit with finite standard errors: do not read its "
            "tests. The optimizer is named when statsmodels' default had to be replaced.")
TYPING_NOTE = ("Mean and sample standard deviation (N − 1) across the text, mixed and image background columns. "
               "Typing: stable if sd ≤ {STABLE_MAX_SD}; else disrupted by mixed noise if mixed is more than "
               "{MIXED_DROP_MIN} below both pure columns; else modality-biased if |text − image| ≥ {MODALITY_GAP_MIN}; "
               "else variable. Text and image anchors are typed apart; a model that cannot see the anchor is "
               "`blind`, and one that cannot see a background modality is `not typed` (its anchor is then the "
               "only thing it sees in that column).")


def report_markdown(data: dict[str, Any]) -> str:
    """report.md from the report's numbers (and the figures `draw_figures` recorded in them)."""
    s = Settings.of(data["settings"])
    lines = ["# mmbench report", "",
             f"Main metric `{s.metric}`; heatmaps `{s.heatmap_metric}`. 95 % CIs: {s.ci_method}, {s.ci_resamples} "
             f"resamples, seed {s.seed}. All tests are two-sided.", ""]
    for task in data["tasks"]:
        lines += task_markdown(TaskReport.of(task), s)
    return "\n".join(lines)


def task_markdown(t: TaskReport, s: Settings) -> list[str]:
    lines = [f"## Task `{t.task}`", "", "Pool set(s): " + ", ".join(f"`{h}`" for h in t.content_hashes), ""]
    lines += averages_lines(t, s.metric)
    if t.positional_bias:
        lines += positional_lines(t, s)
    lines += heatmap_lines(t, s) + length_curve_lines(t, s.metric) + easy_hard_lines(t, s.metric)
    lines += robustness_lines(t, s)
    if t.effective_length or any(t.truncated_share):
        figure = t.figures.get("effective_length")
        lines += [lengths_markdown(t.effective_length, t.truncated_share, figure.path if figure else None)]
    if t.efficiency:
        lines += [efficiency_markdown(t.efficiency, level=3)]
    return lines


def averages_lines(t: TaskReport, metric: str) -> list[str]:
    """The averages table with its random-ranking rows, the CI figure and the per-subset table."""
    ci_names = list(t.runs[0].bootstrap_ci)
    failed = [f"{r.label}: {r.n_failed_excluded}" for r in t.runs if r.n_failed_excluded]
    no_ci = any(c.low is None for r in t.runs for c in r.bootstrap_ci.values())
    rows = [[r.label, r.micro["n"], fmt(r.micro.get(metric)), f"{fmt(r.macro.get(metric))} ({r.macro['n_subsets']})"]
            + [fmt_ci(r.bootstrap_ci[m].estimate, r.bootstrap_ci[m].low, r.bootstrap_ci[m].high) for m in ci_names]
            for r in t.runs]
    rows += [[f"random ranking (expected){'' if len(t.runs) == 1 else ', ' + r.label + ' items'}",
              "–", fmt(r.chance.get(metric)), "–"] + [fmt(r.chance.get(m)) for m in ci_names]
             for r in distinct_chance(t.runs)]
    lines = ["### Averages", "", "Micro = mean over items; macro = mean of the per-subset means."
             + (f" Items the runner failed to score are left out ({', '.join(failed)})." if failed else "")
             + (" [–]: no CI, a bootstrap CI needs at least 2 items." if no_ci else ""), "",
             md_table(["model", "items", f"{metric} micro", f"{metric} macro (subsets)"]
                      + [f"{m} [95 % CI]" for m in ci_names], rows), "", CHANCE_NOTE, ""]
    if "retrieval_metrics" in t.figures:
        lines += ["Bars: R@1, R@3 and MRR per model with their 95 % bootstrap CIs; dotted ticks: random ranking.", "",
                  f"![R@1, R@3, MRR]({t.figures['retrieval_metrics'].path})", ""]
    subsets = subset_order(k for r in t.runs for k in r.subsets)
    if len(subsets) > 1:
        lines += [f"#### {metric} per subset", "",
                  md_table(["subset"] + [r.label for r in t.runs],
                           [[sub] + [fmt(r.subsets.get(sub, {}).get(metric)) for r in t.runs] for sub in subsets]), ""]
    return lines


def distinct_chance(runs: list[RunSummary]) -> list[RunSummary]:
    """One chance row when all runs were scored on the same items, else one per run."""
    seen, out = set(), []
    for r in runs:
        key = tuple(sorted(r.chance.items()))
        if r.chance and key not in seen:
            seen.add(key)
            out.append(r)
    return out if len(out) > 1 else out[:1]


def positional_lines(t: TaskReport, s: Settings) -> list[str]:
    """The mixed-model table, each run's estimates (all rows) and the depth-coefficient figure."""
    lines = ["### Positional bias (linear mixed-effects model)", "",
             f"Model: {s.positional_model}. Depth test: Wald χ² of all depth terms (k − 1 df for k depths). "
             "U-shape: Wald χ² (1 df) of the depth² term; U-shape when positive, significant, and its vertex lies "
             "in (0, 1).", "",
             md_table(["model", "rows", "obs / needles", "depth Wald χ² (df)", "p", "depth² coef", "p (1 df)", "shape",
                       "fit"], [positional_row(e) for e in t.positional_bias]), "", FIT_NOTE, ""]
    for e in t.positional_bias:
        if e.result is not None and e.rows == "all":
            lines += estimates_lines(e.label, e.result)
    if "depth_coefficients" in t.figures:
        figure = t.figures["depth_coefficients"]
        lines += ["Depth coefficients of the categorical model (each depth against the first, which is 0 by "
                  "definition), with 95 % Wald CIs; panels: " + ", ".join(figure.panels) + ".",
                  "", f"![depth coefficients]({figure.path})", ""]
    return lines


def positional_row(e: PositionalFit) -> list[Any]:
    if e.result is None:
        return [e.label, e.rows, "–", "–", "–", "–", "–", e.error]
    r = e.result
    shape = (f"{r['shape']}" + (f" (vertex {fmt(r['vertex'], 2)})" if r["vertex"] is not None else "")
             + ("" if r["model"].startswith("mixedlm") else f"; {r['model']}"))
    return [e.label, e.rows, f"{r['n_obs']} / {r['n_groups'] or '–'}",
            f"{fmt(r['depth_wald']['chi2'], 2)} ({r['depth_wald']['df']})", fmt_p(r["depth_wald"]["p_value"]),
            f"{fmt(r['quadratic_coef'])}, χ²={fmt(r['quadratic_wald']['chi2'], 2)}",
            fmt_p(r["quadratic_wald"]["p_value"]), shape, fit_cell(r)]


def estimates_lines(label: str, r: dict[str, Any]) -> list[str]:
    """A run's categorical-depth estimates, folded."""
    notes = (f"Random-intercept variance: {fmt(r['group_variance'], 4)}."
             + (f" Fit notes: {'; '.join(r['fit_notes'])}." if r.get("fit_notes") else "")
             + (f" Warnings: {'; '.join(r['warnings'])}" if r["warnings"] else ""))
    rows = [[x["term"], fmt(x["estimate"], 4), fmt(x["std_err"], 4), fmt(x["z"], 2), fmt_p(x["p_value"]),
             f"[{fmt(x['ci_low'], 4)}, {fmt(x['ci_high'], 4)}]"] for x in r["estimates"]]
    return [f"<details><summary>{label}: estimates (categorical depth model)</summary>", "",
            md_table(["term", "estimate", "SE", "z", "p", "95 % CI"], rows), "", notes, "", "</details>", ""]


def fit_cell(r: dict[str, Any]) -> str:
    """The positional table's fit column: status, and the optimizer when it is not the default."""
    status = r.get("fit_status", "ok" if r["converged"] else "unreliable")
    label = "**UNRELIABLE**" if status == "unreliable" else status
    opt = r.get("optimizer", "")
    return label + (f" ({opt})" if opt and opt not in ("default", "ols") else "")


def heatmap_lines(t: TaskReport, s: Settings) -> list[str]:
    if "heatmap" not in t.figures:
        return []
    figure = t.figures["heatmap"]
    ceiling = fmt(max(h["ceiling"] for h in t.heatmaps), 2)
    return [f"### Length × depth heatmaps ({s.heatmap_metric})", "",
            "Rows: models; columns: anchor kinds; x: length bin, y: needle depth; brighter is higher. "
            f"Panels: {', '.join(figure.panels)}. Colours run from 0 to the metric's ceiling (the mean a "
            f"perfect ranking reaches: {ceiling} here; P@5 with one relevant item is at most 0.2), so a perfect "
            "cell is fully bright.", "", f"![heatmaps]({figure.path})", "", *heatmap_floor_lines(t.heatmaps)]


def heatmap_floor_lines(heatmaps: list[dict[str, Any]]) -> list[str]:
    """Per panel: how many length steps of the heatmap are below their floor, and the typical floor."""
    out = []
    for h in heatmaps:
        steps = [st for row in h.get("length_steps", []) for st in row if st.get("below_floor") is not None]
        if not steps:
            continue
        below = sum(bool(st["below_floor"]) for st in steps)
        floors = [st["floor"] for st in steps if st.get("floor") is not None]
        typical = f"; median floor {fmt(float(np.median(floors)), 2)}" if floors else ""
        sd = f" (per-item sd {fmt(h['step_sd'], 3)}, {h['step_sd_basis']})" if h.get("step_sd") is not None else ""
        out.append(f"- {h['label']}, {h['anchor_kind']} anchors: {below} of {len(steps)} steps between neighbouring "
                   f"length bins are below their resolution floor{typical}{sd}: not resolved at 80 % power (neither a change "
                   "nor its absence is shown there).")
    return out + [""] if out else []


def length_curve_lines(t: TaskReport, metric: str) -> list[str]:
    if "length_curves" not in t.figures:
        return []
    lines = [f"### {metric} by length", "", "Bands: 95 % bootstrap CI of each point; dotted grey: random ranking "
             "(expected). Easy: solid line, circles; Hard: dashed line, squares, a lighter shade.", "",
             f"![length curves]({t.figures['length_curves'].path})", "", FLOOR_NOTE, ""]
    for c in t.length_curves:
        points = zip(c.lengths, c.values, c.ci_low, c.ci_high, [None, *c.steps])
        lines.append(f"- {c.label}, {c.group} ({c.difficulty}): "
                     + ", ".join(f"{l}: {fmt_ci(v, lo, hi)}" + step_mark(st) for l, v, lo, hi, st in points))
    return lines + [""]


def step_mark(step: dict[str, Any] | None) -> str:
    if not step or not step.get("below_floor"):
        return ""
    return f" (≈, floor {fmt(step['floor'], 2)})" if step.get("floor") is not None else " (≈, too few items)"


def easy_hard_lines(t: TaskReport, metric: str) -> list[str]:
    if not t.easy_hard:
        return []
    rows = [[r.label, r.group, _with_ci(r.easy, r.easy_ci), _with_ci(r.hard, r.hard_ci), fmt(r.drop),
             fmt(r.relative_drop), f"{r.n_easy} / {r.n_hard}", f"{fmt(r.chance_easy)} / {fmt(r.chance_hard)}"]
            for r in t.easy_hard]
    lines = [f"### Easy vs Hard ({metric})", "",
             md_table(["model", "group", "Easy [95 % CI]", "Hard [95 % CI]", "drop", "relative drop", "n easy / hard",
                       "chance easy / hard"], rows), ""]
    if "easy_vs_hard" in t.figures:
        lines += [f"![easy vs hard]({t.figures['easy_vs_hard'].path})", ""]
    return lines


def robustness_lines(t: TaskReport, s: Settings) -> list[str]:
    if not t.modality_robustness:
        return []
    rows = [[r.label, *[_with_ci(r.scores[m], r.ci.get(m)) for m in ("text", "mixed", "image")],
             fmt(r.mean), fmt(r.sd), r.kind] for r in t.modality_robustness]
    lines = [f"### Modality robustness ({s.metric} by background modality)", "",
             TYPING_NOTE.format(**s.robustness_thresholds), "",
             md_table(["model", "text [95 % CI]", "mixed [95 % CI]", "image [95 % CI]", "mean", "sd", "type"], rows),
             ""]
    if "modality_robustness" in t.figures:
        lines += [f"![modality robustness]({t.figures['modality_robustness'].path})", ""]
    return lines


def _with_ci(estimate: float | None, ci: list[float | None] | None) -> str:
    """`fmt_ci` of an estimate and its [low, high] (none: no interval)."""
    low, high = ci or (None, None)
    return fmt_ci(estimate, low, high)
