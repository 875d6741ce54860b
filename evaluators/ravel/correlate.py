"""Correlation of any encoder score with measured MLLM performance (paper §4.1, Appendix G.1).

Pure functions over tables already read (the readers are `mmbench.builders.sources.feature_arrays`; the
shipped Table 7, ``mmbench/evaluators/data/ravel_downstream_table7.csv``, holds 210 MLLMs = 70 encoders × 3
LLMs, 11 benchmarks + Avg; `mmbench.running.ravel_inputs` reads and prepares both tables). Encoder names in score files are mapped
to Table 7 names through the explicit :data:`ENCODER_ALIASES`; language-model names through
:data:`LLM_ALIASES` (case-insensitive, an ``org/`` prefix is ignored). Per language model we
report Spearman ρ and Pearson r against the average, and the mean of the per-benchmark ρ / r.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd
from scipy import stats

BENCHMARKS = ("MMMU", "MMBench", "VQAv2", "SQA", "ChartQA", "DocVQA", "TextVQA", "POPE", "GQA", "COCO", "Flickr")
TARGET = "Avg"

#: score-file encoder name → Table 7 name (the authors' released files differ in exactly these two)
ENCODER_ALIASES = {
    "RAEv2 DINOv3-L (k=7)": "RAEv2 DINOv3-L",
    "UniTok-Attn (256)": "UniTok (256)",
}

#: canonical Table 7 LLM name → accepted spellings
LLM_ALIASES = {
    "Qwen3-1.7B": ("qwen3-1.7b", "qwen3", "q3"),
    "Qwen2.5-1.5B-Instruct": ("qwen2.5-1.5b-instruct", "qwen2.5-1.5b", "qwen2.5", "q2.5"),
    "SmolLM2-1.7B-Instruct": ("smollm2-1.7b-instruct", "smollm2-1.7b", "smollm2", "smol"),
}
LLM_SHORT = {"Qwen3-1.7B": "Qwen3-1.7B", "Qwen2.5-1.5B-Instruct": "Qwen2.5-1.5B", "SmolLM2-1.7B-Instruct": "SmolLM2-1.7B"}

ENCODER_COLUMNS = ("encoder", "display_name", "vision_encoder", "name")
LLM_COLUMNS = ("llm", "language_model", "lm")
SCORE_COLUMNS = ("score", "ravel", "final_score")
# Largest score magnitude accepted: far above any alignment score (CKA, kNN overlap, RSA, distances are O(1)),
# far below where Pearson's sums of squares overflow (about 1e154).
MAX_ABS_SCORE = 1e12


def canonical_llm(name: str) -> str:
    key = str(name).strip().split("/")[-1].lower()
    for canon, spellings in LLM_ALIASES.items():
        if key == canon.lower() or key in spellings:
            return canon
    return str(name).strip()


def canonical_encoder(name: str, aliases: dict[str, str] | None = None) -> str:
    name = str(name).strip()
    return (aliases or ENCODER_ALIASES).get(name, name)


def _pick(df: pd.DataFrame, wanted: str | None, candidates: Iterable[str], what: str) -> str:
    if wanted:
        if wanted not in df.columns:
            raise ValueError(f"{what} column {wanted!r} not in {list(df.columns)}")
        return wanted
    for c in candidates:
        if c in df.columns:
            return c
    raise ValueError(f"cannot find the {what} column (tried {list(candidates)}); columns: {list(df.columns)}")


def ground_truth_table(df: pd.DataFrame, *, encoder_column: str | None = None,
                       llm_column: str | None = None) -> pd.DataFrame:
    """Table with columns llm, encoder, benchmark columns present, Avg (canonical names), from the table read."""
    enc = _pick(df, encoder_column, ENCODER_COLUMNS, "encoder")
    llm = _pick(df, llm_column, LLM_COLUMNS, "llm")
    out = df.rename(columns={enc: "encoder", llm: "llm"}).copy()
    if TARGET not in out.columns:
        benches = [b for b in BENCHMARKS if b in out.columns]
        if not benches:
            raise ValueError(f"ground truth needs an {TARGET!r} column or benchmark columns")
        out[TARGET] = out[benches].mean(axis=1)
    out["encoder"] = out["encoder"].map(canonical_encoder)
    out["llm"] = out["llm"].map(canonical_llm)
    if out.duplicated(["llm", "encoder"]).any():
        raise ValueError("ground truth has duplicate (llm, encoder) rows")
    return out


def scores_table(df: pd.DataFrame, path: Any, *, score_column: str | None = None, encoder_column: str | None = None,
                 llm_column: str | None = None, aliases: dict[str, str] | None = None) -> pd.DataFrame:
    """Columns encoder, llm, score (canonical names) of a score table read from `path` (named in errors)."""
    enc = _pick(df, encoder_column, ENCODER_COLUMNS, "encoder")
    llm = _pick(df, llm_column, LLM_COLUMNS, "llm")
    col = _pick(df, score_column, SCORE_COLUMNS, "score")
    out = pd.DataFrame({"encoder": df[enc].map(lambda e: canonical_encoder(e, aliases)),
                        "llm": df[llm].map(canonical_llm), "score": pd.to_numeric(df[col], errors="raise")})
    if out.duplicated(["llm", "encoder"]).any():
        raise ValueError("score file has duplicate (llm, encoder) rows")
    values = out["score"].to_numpy(float)
    bad = out[~np.isfinite(values)]
    if len(bad):  # one empty cell would turn that LLM's correlations into NaN
        raise ValueError(f"{path}: column {col!r} has {len(bad)} missing or non-finite scores, e.g. "
                         f"{describe_pairs(list(zip(bad['encoder'], bad['llm'])))}")
    huge = out[np.abs(values) > MAX_ABS_SCORE]
    if len(huge):  # squares of such values overflow inside Pearson's r; no alignment score is that large
        first = huge.index[0]
        raise ValueError(f"{path}: column {col!r} has {len(huge)} scores beyond ±{MAX_ABS_SCORE:g}, e.g. "
                         f"{huge.loc[first, 'score']!r} for {describe_pairs(list(zip(huge['encoder'], huge['llm'])))}"
                         "; alignment scores are small numbers: check the file")
    return out


def unmatched(scores: pd.DataFrame, gt: pd.DataFrame) -> list[tuple[str, str]]:
    """(encoder, llm) pairs of ``scores`` (canonical names) that have no ground-truth row."""
    known = set(zip(gt["encoder"], gt["llm"]))
    return [(e, llm) for e, llm in zip(scores["encoder"], scores["llm"]) if (e, llm) not in known]


def describe_pairs(pairs: list[tuple[str, str]], shown: int = 8) -> str:
    """'A / llm, B / llm and 3 more' for messages."""
    text = ", ".join(f"{e} / {llm}" for e, llm in pairs[:shown])
    return text + (f" and {len(pairs) - shown} more" if len(pairs) > shown else "")


def merge(scores: pd.DataFrame, gt: pd.DataFrame, *, allow_missing: bool = False) -> pd.DataFrame:
    m = scores.merge(gt, on=["llm", "encoder"], how="left", indicator=True)
    missing = m[m["_merge"] != "both"]
    if len(missing) and not allow_missing:
        raise ValueError(f"{len(missing)} scored (encoder, llm) pairs have no ground truth, e.g. "
                         f"{describe_pairs(list(zip(missing['encoder'], missing['llm'])))}; "
                         "fix the names or pass --allow-missing")
    return m[m["_merge"] == "both"].drop(columns="_merge")


def correlate(merged: pd.DataFrame, *, negate: bool = False) -> pd.DataFrame:
    """One row per LLM: n, spearman, pearson (vs Avg), mean per-benchmark spearman/pearson."""
    rows = []
    benches = [b for b in BENCHMARKS if b in merged.columns]
    for llm, g in merged.groupby("llm", sort=False):
        s = -g["score"].to_numpy(float) if negate else g["score"].to_numpy(float)
        row = {"llm": LLM_SHORT.get(llm, llm), "n": len(g)}
        if len(g) < 3:
            row.update(spearman=np.nan, pearson=np.nan)
        else:
            row["spearman"] = float(stats.spearmanr(s, g[TARGET]).statistic)
            row["pearson"] = float(stats.pearsonr(s, g[TARGET]).statistic)
            per_s, per_p = [], []
            for b in benches:
                y = g[b].to_numpy(float)
                ok = np.isfinite(y)
                if ok.sum() >= 3 and np.ptp(y[ok]) > 0:
                    per_s.append(stats.spearmanr(s[ok], y[ok]).statistic)
                    per_p.append(stats.pearsonr(s[ok], y[ok]).statistic)
                    row[f"spearman_{b}"] = float(per_s[-1])
            row["mean_bench_spearman"] = float(np.mean(per_s)) if per_s else np.nan
            row["mean_bench_pearson"] = float(np.mean(per_p)) if per_p else np.nan
        rows.append(row)
    order = {v: i for i, v in enumerate(LLM_SHORT.values())}
    out = pd.DataFrame(rows)
    return out.sort_values("llm", key=lambda c: c.map(lambda v: order.get(v, 99))).reset_index(drop=True)


def format_table(res: pd.DataFrame) -> str:
    lines = [f"{'LLM':<16}{'n':>5}{'Spearman':>10}{'Pearson':>10}{'bench ρ':>10}{'bench r':>10}"]
    for r in res.itertuples():
        lines.append(f"{r.llm:<16}{r.n:>5}{r.spearman:>10.3f}{r.pearson:>10.3f}"
                     f"{getattr(r, 'mean_bench_spearman', np.nan):>10.3f}{getattr(r, 'mean_bench_pearson', np.nan):>10.3f}")
    return "\n".join(lines)
