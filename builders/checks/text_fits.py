"""The text probe's model fits on its distinct rows: chi-square screening and the regression, without the big matrix.

The text probe (`text_probe`) has one row per candidate of each pool, and a candidate ranked in many pools of one
kind has the same row in each (a Visual Grounding candidate is in its cell's 25 pools: 18,000 rows of 112 million
non-zeros for 7,200 distinct ones). Its model is scikit-learn's pipeline of `SelectKBest(chi2, k=K_BEST)` and a
`LogisticRegression`; fitting that pipeline on a fold copied the fold's rows of the whole matrix, summed them per
class for the chi-square statistics and copied them again to keep the K_BEST columns.

`TextRows` keeps each distinct row once (`distinct`) and which one each row is (`row_of`). A fold's fit
(`fit_predict`) computes the same numbers from it:

- the chi-square statistics: scikit-learn's `chi2` compares the per-class sums of each column over the training
  rows with their expectation from the column's total and the class shares. Those sums are counts of 0/1 values
  (exact in float64, in any order), so they are taken over the distinct rows weighted by how many training rows of
  each class each one is; the class shares and the statistic are then computed with scikit-learn's own expressions
  (`_chisquare`), which gives its statistics bit for bit;
- the K_BEST columns: a `SelectKBest` holding those statistics picks them (its own tie and NaN rules);
- the regression: fitted on exactly the matrix the pipeline gives it (the kept columns of the training rows, in
  row order: the kept columns of the distinct rows, then their rows), so liblinear sees the same numbers, and the
  held-out rows are scored the same way.

`tests/test_check_speed.py` compares every fold's probabilities and the top terms with the pipeline's. Without
`_chisquare` (a scikit-learn that dropped it) the pipeline itself is fitted on the rows, as before.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from mmbench.builders.checks.fits import HeldOut, group_folds, run

K_BEST = 256
C_REG = 0.1


@dataclass
class TextRows:
    """Rows of a sparse matrix, each distinct row stored once: row r is ``distinct[row_of[r]]``."""

    distinct: Any            # scipy CSR matrix
    row_of: np.ndarray
    candidates: list[str] | None = None    # the candidate of each distinct row (the text probe's rows)

    @classmethod
    def of(cls, X) -> "TextRows":
        """`X` itself (TextRows) or a sparse matrix as TextRows (every row its own)."""
        from scipy import sparse

        return X if isinstance(X, TextRows) else cls(sparse.csr_matrix(X), np.arange(X.shape[0]))

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.row_of), self.distinct.shape[1]

    def matrix(self):
        """Every row (the matrix the probe describes)."""
        return self.distinct[self.row_of]


def pipeline(seed: int, width: int):
    """chi-square screening of the n-grams to the K_BEST most class-dependent (fitted on the training pools only,
    like the regression), then the logistic regression on those: a regression over every hashed n-gram of 32K-token
    reports took minutes to converge (liblinear on ~10^4 non-zeros a row), the screened one well under a second, and a
    marker that separates relevant from distractor candidates is the most class-dependent n-gram there is."""
    from sklearn.feature_selection import SelectKBest, chi2
    from sklearn.pipeline import make_pipeline

    return make_pipeline(SelectKBest(chi2, k=min(K_BEST, width)), _regression(seed))


def _regression(seed: int):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C_REG, solver="liblinear", class_weight="balanced", random_state=seed)


def _chisquare():
    try:
        from sklearn.feature_selection._univariate_selection import _chisquare as found
    except ImportError:        # a scikit-learn without it: the pipeline on the rows (the same numbers, slower)
        return None
    return found


def _screen(rows: TextRows, y: np.ndarray, train: np.ndarray, chisquare) -> tuple[Any, np.ndarray]:
    """A SelectKBest holding chi2's statistics of the `train` rows, and the kept columns (sorted)."""
    from sklearn.feature_selection import SelectKBest, chi2

    n = rows.distinct.shape[0]
    labels = y[train]
    positive = np.bincount(rows.row_of[train], weights=(labels == 1).astype(np.float64), minlength=n)
    negative = np.bincount(rows.row_of[train], weights=(labels != 1).astype(np.float64), minlength=n)
    observed = np.vstack([rows.distinct.T @ negative, rows.distinct.T @ positive])   # classes 0, 1 as chi2 orders them
    feature_count = (observed[0] + observed[1]).reshape(1, -1)
    Y = np.column_stack([labels != 1, labels == 1]).astype(np.int64)
    class_prob = Y.mean(axis=0).reshape(1, -1)
    expected = np.dot(class_prob.T, feature_count)
    selector = SelectKBest(chi2, k=min(K_BEST, rows.shape[1]))
    selector.scores_, selector.pvalues_ = chisquare(observed, expected)
    return selector, selector.get_support(indices=True)


def _fit(rows: TextRows, y: np.ndarray, train: np.ndarray, seed: int):
    """(fitted pipeline-equivalent: selector, regression, kept columns of the distinct rows)."""
    chisquare = _chisquare()
    if chisquare is None or set(np.unique(y[train]).tolist()) != {0.0, 1.0}:
        model = pipeline(seed, rows.shape[1]).fit(rows.matrix()[train], y[train])
        return model[0], model[-1], None
    selector, kept = _screen(rows, y, train, chisquare)
    columns = rows.distinct[:, kept]
    return selector, _regression(seed).fit(columns[rows.row_of[train]], y[train]), columns


def fit_predict(X, y: np.ndarray, train: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
    """The probability of relevance of the `test` rows from a model fitted on the `train` rows."""
    rows = TextRows.of(X)
    selector, regression, columns = _fit(rows, y, train, seed)
    held = columns[rows.row_of[test]] if columns is not None else selector.transform(rows.matrix()[test])
    return regression.predict_proba(held)[:, 1]


def held_out_jobs(X, y: np.ndarray, plan: HeldOut, seed: int) -> list[Callable[[], np.ndarray]]:
    rows = TextRows.of(X)
    return [functools.partial(fit_predict, rows, y, train, test, seed) for train, test in plan.folds]


def held_out(X, y: np.ndarray, groups: np.ndarray, seed: int, folds: int) -> np.ndarray:
    """Each row's predicted probability from a model trained on the other groups' pools only."""
    plan = group_folds(y, groups, folds)
    return plan.scores(run(held_out_jobs(X, y, plan, seed)))


def top_terms(X, y: np.ndarray, seed: int, k: int) -> tuple[tuple[str, float], ...]:
    """The k hashed features with the largest positive weight in one model fitted on every pool (the kept
    column's number; `text_probe.name_terms` names it)."""
    if len(np.unique(y)) < 2:
        return ()
    rows = TextRows.of(X)
    selector, regression, _ = _fit(rows, y, np.arange(len(y)), seed)
    coef, kept = regression.coef_[0], selector.get_support(indices=True)
    best = [int(j) for j in np.argsort(-coef, kind="stable")[:k] if coef[j] > 0]
    return tuple((f"text:{int(kept[j])}", round(float(coef[j]), 3)) for j in best)
