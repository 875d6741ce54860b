"""CKA-X (Appendix I): supervised reference predictor from coordinate-agnostic descriptors.

Descriptor of candidate m given a labelled reference pool R:
    d_m = [CKA(m, m′) for m′ ∈ R ; ridge R²(Z_m → Z_t) ; CKA(Z_m, Z_t)]
CKA is linear CKA on row-L2-normalised pooled features. The ridge R² is fitted on a random half
of the calibration pairs (split seed 42) with α chosen by efficient leave-one-out CV inside the
fitting half (sklearn ``RidgeCV``), and evaluated on the other half (R² averaged uniformly over
text dimensions). Predictor: gradient-boosted trees (depth 2, 50 rounds, learning rate 0.05,
subsample 0.8, random_state 0). Protocols: leave-one-out (R = V \\ {m}) and the labelled-budget
sweep (|R| ∈ budgets, 100 random subsets with seed 0, pooled Spearman over held-out predictions).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from mmbench.evaluators.ravel.cka import centered_gram, cka_from_grams

GBDT_PARAMS = dict(max_depth=2, n_estimators=50, learning_rate=0.05, subsample=0.8, random_state=0)
RIDGE_ALPHAS = tuple(np.logspace(-4, 4, 17))


def _rows_l2(z):
    z = np.asarray(z, dtype=np.float64)
    return z / np.linalg.norm(z, axis=1, keepdims=True).clip(1e-12)


def ridge_r2(z_m, z_t, *, seed: int = 42, alphas=RIDGE_ALPHAS) -> float:
    from sklearn.linear_model import RidgeCV
    from sklearn.metrics import r2_score

    x, y = _rows_l2(z_m), np.asarray(z_t, dtype=np.float64)
    n = len(x)
    order = np.random.default_rng(seed).permutation(n)
    fit, ev = order[: n // 2], order[n // 2:]
    model = RidgeCV(alphas=alphas).fit(x[fit], y[fit])  # cv=None → efficient leave-one-out
    return float(r2_score(y[ev], model.predict(x[ev])))


@dataclass
class CKAXInputs:
    names: list[str]
    cka: np.ndarray  # M × M candidate CKA matrix
    crossmodal: np.ndarray  # M × 2: [R², CKA(Z_m, Z_t)]

    @classmethod
    def from_features(cls, features: dict, text) -> "CKAXInputs":
        names = list(features)
        grams = [centered_gram(features[m]) for m in names]
        gt = centered_gram(text)
        m = len(names)
        k = np.eye(m)
        for i in range(m):
            for j in range(i + 1, m):
                k[i, j] = k[j, i] = cka_from_grams(grams[i], grams[j])
        x = np.array([[ridge_r2(features[nm], text), cka_from_grams(g, gt)] for nm, g in zip(names, grams)])
        return cls(names, k, x)

    def descriptors(self, rows, ref) -> np.ndarray:
        rows, ref = np.asarray(rows), np.asarray(ref)
        return np.hstack([self.cka[np.ix_(rows, ref)], self.crossmodal[rows]])


def _model():
    from sklearn.ensemble import GradientBoostingRegressor

    return GradientBoostingRegressor(**GBDT_PARAMS)


def fit_predict(inp: CKAXInputs, y, train, test) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    model = _model().fit(inp.descriptors(train, train), y[train])
    return model.predict(inp.descriptors(test, train))


def leave_one_out(inp: CKAXInputs, y) -> dict:
    m = len(inp.names)
    pred = np.empty(m)
    for i in range(m):
        train = np.array([j for j in range(m) if j != i])
        pred[i] = fit_predict(inp, y, train, np.array([i]))[0]
    y = np.asarray(y, dtype=np.float64)
    return {"predictions": pred, "spearman": float(stats.spearmanr(pred, y).statistic),
            "pearson": float(stats.pearsonr(pred, y).statistic)}


def budget_sweep(inp: CKAXInputs, y, budgets=(8, 16, 24, 32, 40, 48, 56, 64), repeats: int = 100,
                 seed: int = 0) -> list[dict]:
    y = np.asarray(y, dtype=np.float64)
    m = len(y)
    rng = np.random.default_rng(seed)
    out = []
    for b in budgets:
        if not 2 <= b <= m - 2:
            continue
        preds, truth, per = [], [], []
        for _ in range(repeats):
            perm = rng.permutation(m)
            train, test = np.sort(perm[:b]), np.sort(perm[b:])
            p = fit_predict(inp, y, train, test)
            preds.append(p)
            truth.append(y[test])
            if len(test) >= 3:
                per.append(stats.spearmanr(p, y[test]).statistic)
        preds, truth = np.concatenate(preds), np.concatenate(truth)
        out.append({"budget": b, "pooled_spearman": float(stats.spearmanr(preds, truth).statistic),
                    "mean_spearman": float(np.nanmean(per)) if per else float("nan"), "repeats": repeats})
    return out
