"""RAVEL's tables, read and prepared: score files and the ground truth (the shipped Table 7 by default).

The readers are `mmbench.builders.sources.feature_arrays`; the column choice, name canonicalisation and checks
are the pure functions of `mmbench.evaluators.ravel.correlate`. A missing or unreadable file is a one-line user
error naming the option and the file; a malformed table a ValueError naming the file (the command line turns it
into one line, exit 2).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from mmbench.builders.sources.feature_arrays import read_table, table7_path
from mmbench.evaluators.ravel import correlate as C


def load_ground_truth(path: str | Path | None = None, *, encoder_column: str | None = None,
                      llm_column: str | None = None) -> pd.DataFrame:
    """The measured table (canonical names, an Avg column); the shipped Table 7 when `path` is None."""
    source = Path(path) if path else table7_path()
    df = read_table(source, "--ground-truth")
    return C.ground_truth_table(df, encoder_column=encoder_column, llm_column=llm_column)


def load_scores(path: str | Path, *, score_column: str | None = None, encoder_column: str | None = None,
                llm_column: str | None = None, aliases: dict[str, str] | None = None) -> pd.DataFrame:
    """A score file's (encoder, llm, score) rows, canonical names, finite scores checked."""
    df = read_table(path, "--scores")
    return C.scores_table(df, path, score_column=score_column, encoder_column=encoder_column,
                          llm_column=llm_column, aliases=aliases)


def correlate_files(scores_path: str | Path, *, ground_truth: str | Path | None = None,
                    score_column: str | None = None, encoder_column: str | None = None,
                    llm_column: str | None = None, negate: bool = False, allow_missing: bool = False) -> pd.DataFrame:
    """Spearman/Pearson per language model of a score file against the ground truth."""
    scores = load_scores(scores_path, score_column=score_column, encoder_column=encoder_column, llm_column=llm_column)
    gt = load_ground_truth(ground_truth)
    return C.correlate(C.merge(scores, gt, allow_missing=allow_missing), negate=negate)
