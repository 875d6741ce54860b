"""`mmbench compare`: paired statistics between runs of one pool set.

For every pair of runs (on the items they share):

* paired t-test on the chosen per-query metric (default P@1), with a percentile bootstrap CI of
  the mean difference (10,000 resamples by default) and Cohen's d_z;
* McNemar's test on the binary R@1 outcome, with its 2x2 contingency table;
* Wilcoxon signed-rank test on the per-query reciprocal rank (`mrr`);
* Bonferroni- and Holm-adjusted p-values within each test family, over the m pairwise comparisons.

For every run: micro and macro averages, and percentile bootstrap CIs (1,000 resamples by
default) of R@1, R@3, MRR and the chosen metric.
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from mmbench.evaluators.metrics import chance_metrics, metric_range
from mmbench.evaluators.stats import correct_pvalues, mcnemar, paired_ttest, wilcoxon_signed_rank
from mmbench.evaluators.stats.bootstrap import DEFAULT_DIFF_RESAMPLES, DEFAULT_RESAMPLES
from mmbench.evaluators.stats.floors import design_floor, observed_floor
from mmbench.evaluators.stats.rank_sets import rank_sets
from mmbench.evaluators.stats.ranking import describe, rank_models
from mmbench.evaluators.stats.settle import items_to_settle
from mmbench.evaluators.stats.verdict import pair_verdict
from mmbench.evaluators.stats.paired import EFFECT_SIZE_KIND
from mmbench.results.store import RunResults
from mmbench.tasks import design_strata

from mmbench.reports.common import (CI_METRICS, aligned_frames, averages, check_same_pool_set, fmt, fmt_ci, fmt_p, hit_at_1, md_table,
                     metric_ci, run_labels, subset_order)
from mmbench.reports.efficiency import efficiency_markdown, efficiency_rows
from mmbench.reports.lengths import effective_length_entry, lengths_markdown
from mmbench.evaluators.truncated_share import truncated_share_by_bin
from mmbench.reports.timing import timing_markdown, timing_rows

TEST_FAMILIES = ("ttest", "mcnemar", "wilcoxon")
CORRECTIONS = ("bonferroni", "holm")


def compare_runs(runs: Sequence[RunResults], *, metric: str = "precision_at_1", resamples: int = DEFAULT_DIFF_RESAMPLES,
                 ci_resamples: int = DEFAULT_RESAMPLES, seed: int = 0, alpha: float = 0.05,
                 effective: dict[str, Any] | None = None, draws: dict[str, Any] | None = None,
                 settle_at: float | None = None) -> dict[str, Any]:
    """All numbers of a comparison, as plain JSON-ready data (`effective`: {tolerance, window} of the effective
    context, as `effective_length_entry` takes them; `draws`: a draws.json of `mmbench draws` for this task)."""
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs")
    content_hash = check_same_pool_set(runs)
    frames, shared, identical, n_failed = aligned_frames(runs)
    for frame, run in zip(frames, runs):
        if metric not in frame.columns:
            raise ValueError(f"{run.root or run.model_name}: per-query metric {metric!r} is missing")
    labels = run_labels(runs)
    ci_metrics = list(dict.fromkeys([*CI_METRICS, metric]))
    out_runs = [run_summary(label, run, frame, ci_metrics, ci_resamples, seed)
                for label, run, frame in zip(labels, runs, frames)]
    chance_rows = [chance_metrics(len(ranked), len(relevant))
                   for ranked, relevant in zip(frames[0]["ranked_ids"], frames[0]["relevant_ids"])]
    chance = {m: float(np.mean([row[m] for row in chance_rows])) for m in ci_metrics if m in chance_rows[0]}
    pairs = pair_tests(frames, labels, metric, resamples=resamples, seed=seed, alpha=alpha,
                       available=task_items(runs), settle_at=settle_at, chance=chance.get(metric))
    corrections = {family: correct_family(pairs, family, alpha) for family in TEST_FAMILIES}
    for pair in pairs:  # the verdict reads the paired t-test on the chosen metric, Holm-adjusted
        pair["verdict"] = pair_verdict(pair["a"], pair["b"], pair["ttest"]["mean_diff"], pair["ttest"]["p_holm"],
                                       alpha).to_dict()
        if draws is not None:
            pair["draw_spread"] = draw_spread_note(draws, pair["a"], pair["b"], pair["ttest"]["mean_diff"], runs[0].task)
    ranking = None
    if len(runs) >= 3 and len(shared):
        mat = np.array([f[metric].to_numpy(dtype=float) for f in frames])
        ranking = rank_models(labels, [mat], resamples=ci_resamples, seed=seed, alpha=alpha).to_dict()
        sets = rank_sets(labels, [mat], [runs[0].task], alpha=alpha, resamples=ci_resamples, seed=seed)
        ranking["simultaneous_low"], ranking["simultaneous_high"] = sets.per_task_low[0], sets.per_task_high[0]
        ranking["simultaneous_method"] = sets.method
    return {
        "kind": "mmbench.compare", "identical_runs": identical_runs(runs, labels),
        "ranking": ranking,
        "design_floor": design_floor(len(shared), alpha=alpha,
                                     ceiling=metric_range(metric, frames[0]["relevant_ids"])).to_dict(),
        "task": runs[0].task, "content_hash": content_hash,
        "n_items": len(shared), "items_identical": identical, "n_failed_excluded": n_failed,
        "settings": {"settle_at": settle_at, "metric": metric, "resamples": resamples, "ci_resamples": ci_resamples, "seed": seed, "alpha": alpha,
                     "ci_method": "percentile bootstrap, seeded numpy Generator", "effect_size": EFFECT_SIZE_KIND,
                     "mcnemar": "R@1 hit per item; exact binomial when b + c < 25, else chi2 with continuity correction",
                     "wilcoxon": "per-item reciprocal rank (mrr); zero differences dropped",
                     "correction": f"Bonferroni and Holm over the {len(pairs)} pairwise comparisons, per test",
                     "sidedness": "two-sided"},
        "runs": out_runs, "pairs": pairs, "corrections": corrections, "timing": timing_rows(runs),
        "efficiency": efficiency_rows(runs),
        "lengths": length_rows(runs, labels, metric, effective),
        "chance": chance,
    }


def run_summary(label: str, run: RunResults, frame: pd.DataFrame, ci_metrics: Sequence[str], ci_resamples: int,
                seed: int) -> dict[str, Any]:
    """One run's averages and per-metric bootstrap CIs over the shared items."""
    avg = averages(frame)
    cis = {m: metric_ci(frame[m].to_numpy(dtype=float), resamples=ci_resamples, seed=seed)
           for m in ci_metrics if m in frame.columns}
    return {"label": label, "model": run.info.get("model", {}), "root": str(run.root) if run.root else None,
            "protocol_id": run.info.get("protocol_id"),
            "n_items_total": int(len(run.per_query)), "micro": avg["micro"], "macro": avg["macro"],
            "subsets": avg["subsets"], "bootstrap_ci": cis}


def pair_tests(frames: Sequence[pd.DataFrame], labels: Sequence[str], metric: str, *, resamples: int, seed: int,
               alpha: float, available: int | None, settle_at: float | None = None,
               chance: float | None = None) -> list[dict[str, Any]]:
    """Every pair's paired t-test, McNemar, Wilcoxon, floor and items-to-settle (before multiplicity correction)."""
    pairs = []
    n_pairs = len(frames) * (len(frames) - 1) // 2
    for (i, a), (j, b) in itertools.combinations(enumerate(frames), 2):
        x, y = a[metric].to_numpy(dtype=float), b[metric].to_numpy(dtype=float)
        t = paired_ttest(x, y, resamples=resamples, seed=seed).to_dict()
        mc = mcnemar(hit_at_1(a), hit_at_1(b), labels=[labels[i], labels[j]]).to_dict()
        wx = wilcoxon_signed_rank(a["mrr"].to_numpy(dtype=float), b["mrr"].to_numpy(dtype=float)).to_dict()
        pairs.append({"a": labels[i], "b": labels[j], "ttest": t, "mcnemar": mc, "wilcoxon": wx,
                      "tied_by_construction": tied_by_construction(a, b),
                      "floor": observed_floor(x, y, alpha=alpha).to_dict(),
                      "settle": items_to_settle(x, y, level=alpha / n_pairs, available=available, settle_at=settle_at,
                                                floor_alpha=alpha, chance=chance).to_dict()})
    return pairs


def length_rows(runs: Sequence[RunResults], labels: Sequence[str], metric: str,
                options: dict[str, Any] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Each run's effective context (by consumed tokens) and truncated share per length bin, side by side;
    over each run's own items, as in `show` (the window and tolerance say how each was read)."""
    effective, truncated = [], []
    for label, run in zip(labels, runs):
        if run.seen is None or metric not in run.per_query.columns:
            continue
        entry = effective_length_entry(run.per_query, run.seen, label, metric, **(options or {}),
                                       strata=design_strata(run.task))
        if entry["effective_tokens"] is not None:
            effective.append(entry)
        share = truncated_share_by_bin(run.per_query, run.seen, label)
        if share is not None:
            truncated.append(share)
    return {"effective_length": effective, "truncated_share": truncated}


def draw_comparison_figures(data: dict[str, Any], out: Path) -> None:
    """The forest plot of paired differences (mean A − B and its bootstrap CI per pair) into out/figures;
    recorded in `data["figures"]` with a path relative to `out`."""
    from mmbench.reports import figures

    metric = data["settings"]["metric"]
    rows = [{"a": p["a"], "b": p["b"], "mean_diff": p["ttest"]["mean_diff"], "ci_low": p["ttest"]["ci_low"],
             "ci_high": p["ttest"]["ci_high"]} for p in data["pairs"]]
    info = figures.forest_figure(rows, out / "figures" / "paired_differences.png", metric).to_dict()
    info["path"] = str(Path(info["path"]).relative_to(out))
    data["figures"] = {"paired_differences": info}


def draw_spread_note(draws: dict[str, Any], a: str, b: str, diff: float, task: str) -> dict[str, Any]:
    """Whether the pair's difference is smaller than the between-draw spread of the draws report."""
    from mmbench.evaluators.stats.draw_spread import within_spread
    from mmbench.results.draw_report import spread_for

    if draws.get("task") != task:
        raise ValueError(f"the draws report is of task {draws.get('task')!r}, the runs of {task!r}")
    sd = spread_for(draws, a, b)
    return {"between_draw_sd": sd, "within_spread": within_spread(diff, sd), "metric": draws.get("metric")}


def task_items(runs: Sequence[RunResults]) -> int | None:
    """Items the task's pool set holds (before any --limit), as the runs' protocols record it."""
    totals = [((run.info.get("protocol") or {}).get("evaluation") or {}).get("selection", {}).get("n_items_total")
              for run in runs]
    known = [int(t) for t in totals if t is not None]
    return max(known) if known else None


def _planning_words(settings: dict[str, Any]) -> str:
    d = settings.get("settle_at")
    return f"{d} (--settle-at)" if d is not None else "the pair's resolution floor (--settle-at D to choose)"


def verdict_markdown(data: dict[str, Any]) -> list[str]:
    """Better / worse / inconclusive per pair, and for an inconclusive pair the items that would settle it."""
    s = data["settings"]
    rows = []
    for p in data["pairs"]:
        v, st = p["verdict"], p["settle"]
        need = "–"
        if v["verdict"] == "inconclusive":
            if st.get("reason"):
                need = f"– ({st['reason']})"
            elif st["n_needed"] is None:
                need = "more than 10 million"
            else:
                has = {True: "the task has them", False: f"the task has only {st['available']}",
                       None: "task size unknown"}[st["task_has_enough"]]
                need = (f"{st['n_needed']} in all ({st['n_more']} more; {has}) for a true difference of "
                        f"{st['planning_diff']:.4f}")
        spread = p.get("draw_spread") or {}
        if spread.get("within_spread"):
            note = f"smaller than the between-draw sd {fmt(spread['between_draw_sd'], 4)}: another draw could reverse it"
            need = note if need == "–" else f"{need}; {note}"
        rows.append([p["a"], v["verdict"], p["b"], fmt(v["mean_diff"], 4), fmt_p(v["p_adjusted"]), need])
    return ["## Verdicts", "",
            f"A is better, worse or inconclusive against B by the paired t-test on {s['metric']} at α = {s['alpha']}, "
            f"Holm-adjusted over the {len(data['pairs'])} pairs. For an inconclusive pair: the items the test would need "
            f"for 80 % power at α/m = {s['alpha'] / max(len(data['pairs']), 1):.4g} (where Holm rejects whatever the "
            f"other pairs show) if the true difference were {_planning_words(s)} and the per-item spread the observed "
            "one (assumed; the observed difference is never taken as the truth). None is stated for two models both at "
            "chance or with fewer than 10 items on which they differ.", "",
            md_table(["A", "verdict", "B", "mean diff", "p Holm", "items to settle"], rows), ""]


def identical_runs(runs: Sequence[RunResults], labels: Sequence[str]) -> list[list[str]]:
    """Pairs of runs (distinct folders) whose per_query.parquet has the same recorded SHA-256: copies of one run."""
    digests = [run.info.get("files", {}).get("per_query.parquet") for run in runs]
    return [[labels[i], labels[j]] for i, j in itertools.combinations(range(len(runs)), 2)
            if digests[i] is not None and digests[i] == digests[j]]


def correct_family(pairs: list[dict[str, Any]], family: str, alpha: float) -> dict[str, Any]:
    """Bonferroni and Holm over the pairs whose test of `family` has a p-value; a test that is n/a gets None."""
    tested = [p for p in pairs if p[family]["p_value"] is not None]
    out: dict[str, Any] = {}
    for method in CORRECTIONS:
        for pair in pairs:
            pair[family][f"p_{method}"], pair[family][f"reject_{method}"] = None, None
        res = correct_pvalues([p[family]["p_value"] for p in tested], method, alpha)
        out[method] = res.to_dict()
        if len(tested) < len(pairs):
            out[method]["note"] = f"{len(pairs) - len(tested)} comparison(s) without a p-value (test n/a) are not in the family"
        for pair, adj, rej in zip(tested, res.adjusted, res.reject):
            pair[family][f"p_{method}"], pair[family][f"reject_{method}"] = adj, rej
    return out


def tied_by_construction(a: pd.DataFrame, b: pd.DataFrame) -> int:
    """Items both runs scored with one constant score for every candidate (e.g. two models that saw identical,
    empty views): their rankings come from the same seeded tie-break, so the difference there is zero by
    construction, not evidence that the models agree."""
    if "scores" not in a.columns or "scores" not in b.columns:
        return 0
    n = 0
    for sa, sb, ra, rb in zip(a["scores"], b["scores"], a["ranked_ids"], b["ranked_ids"]):
        flat = lambda v: len(set(np.round(np.asarray(v, dtype=float), 6))) <= 1
        if flat(sa) and flat(sb) and list(ra) == list(rb):
            n += 1
    return n


def comparison_markdown(data: dict[str, Any]) -> str:
    """compare.md from the comparison's numbers (and the figure `draw_comparison_figures` recorded in them)."""
    lines = _header_lines(data) + verdict_markdown(data) + ranking_markdown(data) + _note_lines(data) + _averages_lines(data)
    lines += _ttest_lines(data) + _mcnemar_lines(data) + _wilcoxon_lines(data)
    sig = [f"{p['a']} vs {p['b']} ({fam})" for p in data["pairs"] for fam in TEST_FAMILIES
           if p[fam].get("reject_bonferroni")]
    lines += ["## Summary", "",
              ("Significant after Bonferroni correction: " + "; ".join(sig) + ".") if sig
              else "No difference is significant after Bonferroni correction.", ""]
    if data.get("timing"):
        lines += [timing_markdown(data["timing"])]
    if data.get("efficiency"):
        lines += [efficiency_markdown(data["efficiency"])]
    lengths = data.get("lengths") or {}
    if lengths.get("effective_length") or lengths.get("truncated_share"):
        lines += ["## Lengths", "", lengths_markdown(lengths.get("effective_length") or [],
                                                     lengths.get("truncated_share") or [])]
    return "\n".join(lines)


def _header_lines(data: dict[str, Any]) -> list[str]:
    s = data["settings"]
    return [f"# mmbench compare: {data['task']}", "",
            f"Pool set `{data['content_hash']}`; {data['n_items']} paired items"
            + ("" if data["items_identical"] else " (the items all runs share; the runs' item sets differ)")
            + (f"; {data['n_failed_excluded']} items some run failed to score are left out"
               if data["n_failed_excluded"] else "") + ".",
            f"Significance level α = {s['alpha']}; {s['correction']}. All tests are two-sided.",
            "Protocol ids: " + ", ".join(f"{r['label']} `{r.get('protocol_id') or 'not recorded'}`"
                                         for r in data["runs"]) + ".",
            ""]


def _note_lines(data: dict[str, Any]) -> list[str]:
    """Pairs tied by construction on some items, and runs that are copies of each other."""
    lines = []
    for pair in data["pairs"]:
        if pair.get("tied_by_construction"):
            lines += [f"Note: on {pair['tied_by_construction']} of {data['n_items']} items {pair['a']} and "
                      f"{pair['b']} gave every candidate the same score and were ranked by the same seeded tie-break, "
                      "so their difference there is zero by construction (e.g. neither model could see what those "
                      "documents hold).", ""]
    for a, b in data.get("identical_runs", []):
        lines += [f"Note: {a} and {b} have byte-identical per-query results (copies of one run?); "
                  "their comparison counts in the correction family.", ""]
    return lines


def _averages_lines(data: dict[str, Any]) -> list[str]:
    """The averages table (with the random-ranking row) and the per-subset table."""
    s, metric = data["settings"], data["settings"]["metric"]
    ci_names = [m for m in data["runs"][0]["bootstrap_ci"] if m != metric]
    header = (["model", f"{metric} micro", f"{metric} macro"] + [f"{m} micro [95 % CI]" for m in ci_names]
              + [f"{metric} [95 % CI]"])
    rows = []
    for r in data["runs"]:
        ci = r["bootstrap_ci"]
        rows.append([r["label"], fmt(r["micro"].get(metric)), fmt(r["macro"].get(metric)),
                     *[fmt_ci(ci[m]["estimate"], ci[m]["low"], ci[m]["high"]) for m in ci_names],
                     fmt_ci(ci[metric]["estimate"], ci[metric]["low"], ci[metric]["high"])])
    chance = data.get("chance", {})
    if chance:  # the expected value of a uniformly random ranking of each item's pool
        rows.append(["random ranking (expected)", fmt(chance.get(metric)), "–",
                     *[fmt(chance.get(m)) for m in ci_names], fmt(chance.get(metric))])
    lines = ["## Averages", "",
             "Micro = mean over items; macro = mean of the per-subset means. "
             f"95 % CIs: {s['ci_method']}, {s['ci_resamples']} resamples, seed {s['seed']}."
             + (" [–]: no CI, a bootstrap CI needs at least 2 items." if data["n_items"] < 2 else ""), "",
             md_table(header, rows), ""]
    subsets = subset_order(k for r in data["runs"] for k in r["subsets"])
    if len(subsets) > 1:
        first = data["runs"][0]["subsets"]
        lines += [f"### {metric} per subset (micro within each subset)", "",
                  md_table(["subset", "n"] + [r["label"] for r in data["runs"]],
                           [[sub, first.get(sub, {}).get("n", "–")]
                            + [fmt(r["subsets"].get(sub, {}).get(metric)) for r in data["runs"]] for sub in subsets]),
                  ""]
    return lines


def _ttest_lines(data: dict[str, Any]) -> list[str]:
    """The paired t-tests with their floors, and the forest plot."""
    s, metric = data["settings"], data["settings"]["metric"]
    df = data.get("design_floor") or {}
    rows = [[p["a"], p["b"], fmt(t["mean_a"]), fmt(t["mean_b"]), fmt_ci(t["mean_diff"], t["ci_low"], t["ci_high"], 4),
             f"{fmt(t['t'])} ({t['df']})", fmt_p(t["p_value"]), fmt_p(t["p_bonferroni"]), fmt_p(t["p_holm"]),
             fmt(t["cohens_dz"]), fmt((p.get("floor") or {}).get("mde"), 4), t.get("note") or ""]
            for p in data["pairs"] for t in [p["ttest"]]]
    lines = [f"## Paired t-test on per-item {metric}", "",
             f"Difference = A − B. CI of the mean difference: {s['ci_method']}, {s['resamples']} resamples. "
             f"Effect size: {s['effect_size']}.", "",
             f"Floor (MDE): the smallest true difference in {metric} this pair's items detect with 80 % power at "
             f"α = {s['alpha']}, from the pair's observed discordance (0/1 metrics) or the sd of its differences; "
             f"a difference below it is not evidence either way. Design-time floor for {df.get('n')} items: "
             f"{fmt(df.get('mde'))}.", "",
             md_table(["A", "B", "mean A", "mean B", "mean diff [95 % CI]", "t (df)", "p", "p Bonferroni", "p Holm",
                       "d_z", "floor (MDE)", "note"], rows), ""]
    if "paired_differences" in data.get("figures", {}):
        lines += [f"Forest plot: mean difference A − B in {metric} with its 95 % bootstrap CI; the dotted line is no "
                  "difference.", "", f"![paired differences]({data['figures']['paired_differences']['path']})", ""]
    return lines


def _mcnemar_lines(data: dict[str, Any]) -> list[str]:
    """McNemar's tests and each pair's 2×2 table."""
    rows = [[p["a"], p["b"], m["table"][0][0], m["table"][0][1], m["table"][1][0], m["table"][1][1], m["method"],
             fmt(m["statistic"]), fmt_p(m["p_value"]), fmt_p(m["p_bonferroni"]), fmt_p(m["p_holm"])]
            for p in data["pairs"] for m in [p["mcnemar"]]]
    lines = ["## McNemar's test on R@1", "", f"{data['settings']['mcnemar']}.", "",
             md_table(["A", "B", "both right", "A only", "B only", "both wrong", "method", "statistic", "p",
                       "p Bonferroni", "p Holm"], rows), "",
             "### 2×2 contingency tables (R@1)", ""]
    for p in data["pairs"]:
        t = p["mcnemar"]["table"]
        lines += [f"**{p['a']} vs {p['b']}**", "",
                  md_table(["", f"{p['b']} right", f"{p['b']} wrong"],
                           [[f"{p['a']} right", t[0][0], t[0][1]], [f"{p['a']} wrong", t[1][0], t[1][1]]]), ""]
    return lines


def _wilcoxon_lines(data: dict[str, Any]) -> list[str]:
    rows = [[p["a"], p["b"], w["n_nonzero"], fmt(w["statistic"], 1), w["method"], fmt_p(w["p_value"]),
             fmt_p(w["p_bonferroni"]), fmt_p(w["p_holm"]), fmt(w["rank_biserial"]), fmt(w["mean_diff"], 4)]
            for p in data["pairs"] for w in [p["wilcoxon"]]]
    return ["## Wilcoxon signed-rank test on reciprocal rank", "", f"{data['settings']['wilcoxon']}.", "",
            md_table(["A", "B", "non-zero pairs", "W", "method", "p", "p Bonferroni", "p Holm", "rank-biserial r",
                      "mean diff"], rows), ""]


def ranking_markdown(data: dict[str, Any]) -> list[str]:
    """Ranks, rank intervals and tiers (three or more runs)."""
    r = data.get("ranking")
    if not r:
        return []
    from mmbench.evaluators.stats.ranking import Ranking

    extra = {k: r[k] for k in ("simultaneous_low", "simultaneous_high", "simultaneous_method") if k in r}
    ranking = Ranking(**{k: v for k, v in r.items() if k not in extra})
    order = sorted(range(len(ranking.models)), key=lambda i: (ranking.ranks[i], ranking.models[i]))
    sim = "simultaneous_low" in extra

    def rank_set(i: int) -> str:
        lo, hi = extra["simultaneous_low"][i], extra["simultaneous_high"][i]
        return str(lo) if lo == hi else f"{lo}–{hi}"

    rows = [[ranking.models[i], fmt(ranking.scores[i]), ranking.ranks[i], *([rank_set(i)] if sim else []),
             f"{ranking.rank_low[i]}–{ranking.rank_high[i]}", ranking.tiers[i],
             fmt_p(ranking.tier_p_holm[i]) if ranking.tier_p_holm[i] is not None else "–"] for i in order]
    head = ["model", data["settings"]["metric"], "rank", *([f"rank set ({1 - ranking.alpha:.0%}, simultaneous)"]
                                                           if sim else []),
            "marginal rank interval", "tier", "p Holm vs tier's best"]
    return ["## Ranks and tiers", "",
            *([f"Rank set: every model's rank at once with {1 - ranking.alpha:.0%} confidence "
               f"({extra['simultaneous_method']}); read these. "] if sim else []),
            f"Marginal rank interval: the {ranking.level:.0%} range of each model's rank over {ranking.resamples} paired "
            f"bootstrap resamples of the items (seed {ranking.seed}), one model at a time: together they do not cover "
            "all ranks at once (tied ranks are covered jointly far less often than their level). Tier: tier 1 is the "
            f"best model and every model a paired t-test cannot tell from it at α = {ranking.alpha:g} after Holm's "
            "correction; the rest are tiered the same way. Models in one tier are statistically tied.", "",
            md_table(head, rows), "",
            *[f"- {describe(ranking, i)}" for i in order], ""]
