"""The leaderboard tables, computed from stored submissions (pure functions of the entries).

* The main board (all tasks, one row per model) lives in `matrix.py`.
* MMLongEmbed table: P@1 macro over subsets, micro, Easy/Hard, per length bin (subsets: model pages).
* Visual Grounding: P@1 by length bin and by needle depth.
* Flickr hard negatives: R@1, R@3, MRR with percentile bootstrap CIs over queries.
* RAVEL encoder board: each predictor's Spearman ρ (Fisher-z CI) and Pearson r per language model,
  the number of encoders behind each ρ, and a random predictor's 95 % range.

Every retrieval board has a random-ranking baseline row (`Table.baselines`) when the per-query
results are at hand. A `Table` keeps typed cells; the site renders it and writes it as CSV and JSON.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import pandas as pd

from mmbench.evaluators.ordering import label_key
from mmbench.evaluators.stats import bootstrap_ci, sort_length_bins
from mmbench.results.store import RunResults, load_results

from mmbench.leaderboards.modelmeta import display_name
from mmbench.leaderboards.store import Entry

MAIN = "precision_at_1"
FLICKR_METRICS = (("recall_at_1", "R@1"), ("recall_at_3", "R@3"), ("mrr", "MRR"))
CI_RESAMPLES = 1000
AGG_METRICS = (("precision_at_1", "P@1"), ("precision_at_5", "P@5"), ("recall_at_1", "R@1"), ("recall_at_3", "R@3"),
               ("recall_at_5", "R@5"), ("mrr", "MRR"), ("mrr_at_10", "MRR@10"), ("ndcg_at_10", "nDCG@10"))


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    kind: str = "number"  # number | text | model | ci | seen | count | link | place
    unit: str = ""        # a measurement's unit: shown as the terminal shows it ("4,276,255 tokens/s", "434 MB")
    digits: int = 3       # its decimals below 1,000 (none above)


@dataclass
class Table:
    id: str
    title: str
    description: str
    columns: list[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)  # model cells carry "_page" (link) and "_id"
    baselines: list[dict[str, Any]] = field(default_factory=list)  # chance rows: never ranked, never filtered out
    note: str = ""  # one line under the description (the main board: who is left out of the mean's rank, and why)

    def records(self) -> list[dict[str, Any]]:
        """Flat rows for download (models, then baselines marked `baseline`): CI cells become `<key>`,
        `<key>_ci_low`, `<key>_ci_high`; seen cells `<key>_truncated_share`, `<key>_unseen_share`."""
        out = []
        for row in [*self.rows, *self.baselines]:
            rec: dict[str, Any] = {}
            if "_id" in row:
                rec["submission_id"] = row["_id"]
            if row.get("_baseline"):
                rec["baseline"] = True
            for c in self.columns:
                v = row.get(c.key)
                if c.kind == "ci":
                    v = v or {}
                    rec[c.key], rec[f"{c.key}_ci_low"], rec[f"{c.key}_ci_high"] = v.get("estimate"), v.get("low"), v.get("high")
                elif c.kind == "place":
                    v = v or {}
                    rec[f"{c.key}_rank_low"], rec[f"{c.key}_rank_high"], rec[f"{c.key}_tier"] = (
                        v.get("low"), v.get("high"), v.get("tier"))
                elif c.kind == "seen":
                    v = v or {}
                    rec[f"{c.key}_truncated_share"], rec[f"{c.key}_unseen_share"] = v.get("truncated_share"), v.get("unseen_share")
                else:
                    rec[c.key] = _plain(v)
            out.append(rec)
        return out

    def to_csv(self) -> str:
        records = self.records()
        header = list(dict.fromkeys(k for r in records for k in r)) or [c.key for c in self.columns]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        for r in records:
            writer.writerow({k: _csv_cell(r.get(k)) for k in header})
        return buf.getvalue()

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "description": self.description, "note": self.note,
                "columns": [{"key": c.key, "label": c.label, "kind": c.kind} for c in self.columns],
                "rows": self.records()}


def _plain(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _csv_cell(v: Any) -> Any:
    # A cell starting with = + - @ would run as a formula in a spreadsheet; quote it as text.
    if isinstance(v, str) and v[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + v
    return "" if v is None else v


def is_mmlongembed(task: str) -> bool:
    """A member of the MMLongEmbed benchmark as the task registry declares it (`tasks.BENCHMARKS`), whatever the
    task's name or reference text says."""
    from mmbench.tasks import BENCHMARKS

    return task in BENCHMARKS["mmlongembed"]


def is_flickr(task: str) -> bool:
    """The Flickr30k hard-negative task the registry ships (seed 003), not a plugin task named like it."""
    from mmbench.tasks.flickr_hard_negatives import TASK

    return task == TASK.name


def model_cell(e: Entry) -> dict[str, Any]:
    """The model column: the display name (a local path shows as its last component) and its page."""
    return {"model": display_name(e.model_name), "_page": f"models/{e.slug}.html", "_id": e.id}


Loader = Callable[[Entry], RunResults]


def chance_of(pq: pd.DataFrame, metric: str) -> float | None:
    """Expected `metric` of a uniformly random ranking of each item's pool, averaged over the rows of `pq`."""
    from mmbench.reports.report import chance_numbers

    return chance_numbers(pq, [metric]).get(metric)


def _chance_rows(rows_src: Sequence[Entry], loader: Loader | None, columns: Sequence[Column], metric: str,
                 whole: Sequence[str], label_key: str | None = None) -> list[dict[str, Any]]:
    """One random-ranking row per task: `whole` columns get the chance over all items, `axis=value`
    columns over the items of that group (the submissions of one task share the official items)."""
    return _per_task_rows(rows_src, loader, columns, "random ranking (expected)", label_key, whole,
                          lambda part, key: chance_of(part, metric))


FLOOR_LABEL = "resolution floor (smallest detectable difference)"
FLOOR_WORDS = ("Resolution floor: the smallest paired difference in a 0/1 score (P@1, R@1) two models need in that "
               "column to be told apart with 80 % power at α = 0.05 (design-time, from the number of items the column "
               "averages; a macro average over k subsets of nᵢ items uses the effective number k² / Σ 1/nᵢ)")


def _floor_rows(rows_src: Sequence[Entry], loader: Loader | None, columns: Sequence[Column], whole: Sequence[str],
                macro: Sequence[str] = (), label_key: str | None = None) -> list[dict[str, Any]]:
    """One resolution-floor row per task: each column's design-time floor from the scored items it averages
    (all of them for `whole` columns, the group's for `axis=value` columns, the subsets' effective number for
    `macro` columns)."""
    def floor(part: pd.DataFrame, key: str) -> float | None:
        scored = part[part["error"].isna()] if "error" in part.columns else part
        return macro_floor(scored) if key in macro else group_floor(scored)

    return _per_task_rows(rows_src, loader, columns, FLOOR_LABEL, label_key, (*whole, *macro), floor)


def group_floor(part: pd.DataFrame) -> float | None:
    """Design-time floor of a mean over the rows of `part` (None: too few rows to detect anything)."""
    return macro_floor_of_counts([len(part)])


def macro_floor(pq: pd.DataFrame) -> float | None:
    """Design-time floor of the macro average over `pq`'s subsets (see `macro_floor_of_counts`)."""
    counts = pq["subset"].value_counts().tolist() if "subset" in pq.columns else [len(pq)]
    return macro_floor_of_counts(counts)


def macro_floor_of_counts(counts: Sequence[int]) -> float | None:
    """Design-time floor of a macro average over subsets of `counts` items. With per-item variance v in every
    subset the macro difference has variance v / k² · Σ 1/nᵢ, that of a mean over k² / Σ 1/nᵢ items (rounded
    down), which is the total count when the subsets are equal; one subset is its plain mean."""
    from mmbench.evaluators.stats.floors import design_floor

    counts = [int(n) for n in counts if n and n > 0]
    if not counts:
        return None
    return design_floor(int(math.floor(len(counts) ** 2 / sum(1.0 / n for n in counts) + 1e-9))).mde


def _group_part(pq: pd.DataFrame, key: str) -> pd.DataFrame | None:
    """The rows of an `axis=value` column's group (None for a column that is no group of `pq`)."""
    if "=" not in key:
        return None
    axis, value = key.split("=", 1)
    if axis not in pq.columns:
        return None
    return pq[pq[axis].astype(str).str.lower() == value.lower()]


def _per_task_rows(rows_src: Sequence[Entry], loader: Loader | None, columns: Sequence[Column], label: str,
                   label_key: str | None, whole: Sequence[str],
                   cell: Callable[[pd.DataFrame, str], Any]) -> list[dict[str, Any]]:
    """One baseline row per task: `cell(rows, column key)` over all items for `whole` columns and over the group's
    items for `axis=value` columns, from the per-query table of the task's first submission (the submissions of
    one task share the official items)."""
    if loader is None:
        return []
    out = []
    for task in dict.fromkeys(e.task for e in rows_src):
        pq = loader(next(e for e in rows_src if e.task == task)).per_query
        row: dict[str, Any] = {"model": label, "_baseline": True}
        if label_key:
            row[label_key] = task
        for c in columns:
            part = pq if c.key in whole else _group_part(pq, c.key)
            if part is not None:
                row[c.key] = cell(part, c.key)
        out.append(row)
    return out


def _group_values(e: Entry, prefix: str, metric: str = MAIN) -> dict[str, float]:
    return {g[len(prefix):]: m[metric] for g, m in e.scores.items() if g.startswith(prefix) and metric in m}


def _order(values: Sequence[str]) -> list[str]:
    try:
        return sort_length_bins(values)
    except Exception:  # labels that are not length bins keep their text order
        return sorted(values)


def mmlongembed_table(entries: Sequence[Entry], loader: Loader | None = None) -> Table:
    rows_src = [e for e in entries if e.kind == "retrieval" and is_mmlongembed(e.task)]
    lengths = _order({k for e in rows_src for k in _group_values(e, "length_bin=")})
    diffs = [d for d in ("easy", "hard") if any(d in _group_values(e, "difficulty=") for e in rows_src)]
    cols = [Column("model", "Model", "model"), Column("task", "Task", "text"), Column("macro", "P@1 macro"),
            Column("micro", "P@1 micro")]
    cols += [Column(f"difficulty={d}", d.capitalize()) for d in diffs]
    cols += [Column(f"length_bin={l}", f"P@1 {l}") for l in lengths]
    rows = []
    for e in rows_src:
        all_ = e.scores.get("all", {}).get(MAIN)
        row = {**model_cell(e), "task": e.task, "micro": all_,
               "macro": e.scores.get("macro_over_subsets", {}).get(MAIN, all_)}
        for c in cols[4:]:
            row[c.key] = e.scores.get(c.key, {}).get(MAIN)
        rows.append(row)
    rows.sort(key=lambda r: -(r["macro"] if r["macro"] is not None else -1))
    return Table("mmlongembed", "MMLongEmbed",
                 "P@1 of each model on each MMLongEmbed task: macro average over subsets, micro average over items, "
                 "Easy/Hard and per length bin (unified tokens); per-subset scores are on each model's page. "
                 "Random ranking: the expected P@1 of a uniformly random ranking of the same items. " + FLOOR_WORDS
                 + ".", cols, rows,
                 baselines=[*_chance_rows(rows_src, loader, cols, MAIN, ("macro", "micro"), label_key="task"),
                            *_floor_rows(rows_src, loader, cols, ("micro",), ("macro",), label_key="task")])


def visual_grounding_table(entries: Sequence[Entry], loader: Loader | None = None) -> Table:
    rows_src = [e for e in entries if e.kind == "retrieval" and e.task == "visual_grounding"]
    lengths = _order({k for e in rows_src for k in _group_values(e, "length_bin=")})
    depths = sorted({k for e in rows_src for k in _group_values(e, "depth=")}, key=float)
    cols = [Column("model", "Model", "model"), Column("all", "P@1")]
    cols += [Column(f"length_bin={l}", f"len {l}") for l in lengths]
    cols += [Column(f"depth={d}", f"depth {100 * float(d):.0f}%") for d in depths]
    rows = []
    for e in rows_src:
        row = {**model_cell(e), "all": e.scores.get("all", {}).get(MAIN)}
        for c in cols[2:]:
            row[c.key] = e.scores.get(c.key, {}).get(MAIN)
        rows.append(row)
    rows.sort(key=lambda r: -(r["all"] if r["all"] is not None else -1))
    return Table("visual_grounding", "Visual Grounding by length and depth",
                 "P@1 per length bin and per needle depth (0% = start of the haystack); random ranking: its "
                 "expected P@1. " + FLOOR_WORDS + ".", cols, rows,
                 baselines=[*_chance_rows(rows_src, loader, cols, MAIN, ("all",)), *_floor_rows(rows_src, loader, cols, ("all",))])


def flickr_table(entries: Sequence[Entry], loader: Callable[[Entry], RunResults] | None = None,
                 resamples: int = CI_RESAMPLES, seed: int = 0) -> Table:
    """R@1, R@3, MRR with 95% percentile bootstrap CIs over queries (the seed's 1,000 resamples)."""
    loader = loader or (lambda e: load_results(e.folder))
    rows_src = [e for e in entries if e.kind == "retrieval" and is_flickr(e.task)]
    baselines = []
    cols = [Column("model", "Model", "model"), Column("task", "Task", "text")]
    cols += [Column(k, label, "ci") for k, label in FLICKR_METRICS] + [Column("n", "Queries")]
    rows = []
    for e in rows_src:
        pq = loader(e).per_query
        row = {**model_cell(e), "task": e.task, "n": len(pq)}
        for key, _ in FLICKR_METRICS:
            ci = bootstrap_ci(pd.to_numeric(pq[key]).to_numpy(float), resamples=resamples, seed=seed)
            row[key] = {"estimate": ci.estimate, "low": ci.low, "high": ci.high}
        rows.append(row)
    for task in dict.fromkeys(e.task for e in rows_src):
        pq = loader(next(e for e in rows_src if e.task == task)).per_query
        baselines.append({"model": "random ranking (expected)", "_baseline": True, "task": task, "n": len(pq),
                          **{key: {"estimate": chance_of(pq, key), "low": None, "high": None} for key, _ in FLICKR_METRICS}})
    rows.sort(key=lambda r: -r["recall_at_1"]["estimate"])
    return Table("flickr_hard_negatives", "Flickr30k hard negatives",
                 f"Text-to-image retrieval among caption-space hard negatives; 95% percentile bootstrap CIs "
                 f"({resamples} resamples over queries, seed {seed}); random ranking: the expected value of each "
                 "metric when every query's pool is ranked uniformly at random.", cols, rows, baselines=baselines)


def ravel_table(entries: Sequence[Entry]) -> Table:
    """Per language model: n (encoders behind ρ), Spearman ρ with its Fisher-z 95 % CI, Pearson r; a random
    predictor row gives the central 95 % range of ρ over the same number of encoders."""
    from mmbench.evaluators.stats.correlation import fisher_interval, spearman_null_interval

    rows_src = [e for e in entries if e.kind == "ravel"]
    llms = sorted({g[len("llm="):] for e in rows_src for g in e.scores if g.startswith("llm=")})
    cols = [Column("model", "Predictor", "model")]
    for llm in llms:
        cols += [Column(f"llm={llm}:n", f"{llm} n"), Column(f"llm={llm}:spearman", f"{llm} ρ", "ci"),
                 Column(f"llm={llm}:pearson", f"{llm} r")]
    cols.append(Column("mean_spearman", "mean ρ"))
    rows = []
    counts: dict[str, list[int]] = {llm: [] for llm in llms}
    for e in rows_src:
        row = model_cell(e)
        rhos = []
        for llm in llms:
            s = e.scores.get(f"llm={llm}", {})
            rho, n = s.get("spearman"), s.get("n")
            n = int(n) if n is not None and math.isfinite(n) else None
            low, high = fisher_interval(rho, n) if rho is not None and n is not None else (None, None)
            row[f"llm={llm}:n"] = n
            row[f"llm={llm}:spearman"] = {"estimate": rho, "low": low, "high": high} if rho is not None else None
            row[f"llm={llm}:pearson"] = s.get("pearson")
            if n:
                counts[llm].append(n)
            if rho is not None and math.isfinite(rho):
                rhos.append(rho)
        row["mean_spearman"] = sum(rhos) / len(rhos) if rhos else None
        rows.append(row)
    rows.sort(key=lambda r: -(r["mean_spearman"] if r["mean_spearman"] is not None else -2))
    chance: dict[str, Any] = {"model": "random predictor (95 % range)", "_baseline": True, "mean_spearman": 0.0}
    for llm, ns in counts.items():
        if ns:
            n = max(set(ns), key=ns.count)  # the usual number of encoders for this language model
            rng = spearman_null_interval(n)
            chance[f"llm={llm}:n"] = n
            chance[f"llm={llm}:spearman"] = {"estimate": 0.0, "low": rng[0] if rng else None, "high": rng[1] if rng else None}
    return Table("ravel", "RAVEL encoder board",
                 "Training-free predictors of how well a vision encoder serves a language model: Spearman ρ and "
                 "Pearson r of the predicted scores against the measured MLLM average (reference Table 7), n = the "
                 "number of encoders ranked. ρ brackets: 95 % Fisher-z CI (Bonett–Wright standard error). The random "
                 "predictor row gives the central 95 % range of ρ for a random ranking of n encoders: a ρ inside it "
                 "is no evidence of skill.", cols, rows, baselines=[chance] if rows else [])


def all_tables(entries: Sequence[Entry], loader: Loader | None = None) -> list[Table]:
    """The per-task boards that have at least one row (the main board is `matrix.overview_table`)."""
    tables = [mmlongembed_table(entries, loader), visual_grounding_table(entries, loader), flickr_table(entries, loader),
              ravel_table(entries)]
    return [t for t in tables if t.rows]


def _group_key(group: str) -> tuple:
    """Overall rows first, then each axis with its values in natural order (256 < 1k < 32k)."""
    axis, _, value = group.partition("=")
    return (bool(value), axis, label_key(value))


def aggregates_table(e: Entry) -> Table:
    """A model page's table: every recomputed aggregate group of one submission."""
    if e.kind == "ravel":
        cols = [Column("group", "Language model", "text"), Column("n", "Pairs"), Column("spearman", "Spearman ρ"),
                Column("pearson", "Pearson r")]
        rows = [{"group": g[len("llm="):], **m} for g, m in sorted(e.scores.items())]
    else:
        present = [(k, l) for k, l in AGG_METRICS if any(k in m for m in e.scores.values())]
        cols = ([Column("group", "Group", "text"), Column("n", "Items")] + [Column(k, l) for k, l in present]
                + [Column("floor", "Floor")])
        subsets = [m.get("n") for g, m in e.scores.items() if g.startswith("subset=")]
        rows = [{"group": g, **m, "floor": macro_floor_of_counts(subsets) if g == "macro_over_subsets"
                 else macro_floor_of_counts([m.get("n")])}
                for g, m in sorted(e.scores.items(), key=lambda kv: _group_key(kv[0]))]
        return Table(f"model-{e.id}", "Scores by group", "Aggregates recomputed from the per-query records at "
                     "submission. " + FLOOR_WORDS + ".", cols, rows)
    return Table(f"model-{e.id}", "Scores by group", "Aggregates recomputed from the per-query records at submission.",
                 cols, rows)


def ravel_predictions_table(e: Entry) -> Table:
    """The predictor's scores beside the measured average they are meant to rank."""
    import json

    from mmbench.evaluators.ravel.correlate import canonical_encoder, canonical_llm, merge
    from mmbench.running.ravel_inputs import load_ground_truth

    doc = json.loads((e.folder / "ravel_scores.json").read_text())
    scores = pd.DataFrame([{"encoder": canonical_encoder(r["encoder"]), "llm": canonical_llm(r["llm"]),
                            "score": float(r["score"])} for r in doc["scores"]])
    merged = merge(scores, load_ground_truth())
    cols = [Column("llm", "Language model", "text"), Column("encoder", "Encoder", "text"),
            Column("score", "Predicted score"), Column("Avg", "Measured average")]
    rows = merged[["llm", "encoder", "score", "Avg"]].to_dict("records")
    return Table(f"predictions-{e.id}", "Predicted scores", "One row per (encoder, language model) pair.", cols, rows)
