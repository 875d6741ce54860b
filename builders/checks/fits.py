"""The shortcut probe's model fits, planned fold by fold and run side by side on a few threads.

The probe fits 24 models on a pool set (for each of the three feature sets of gradient boosting and for the text
probe's regression: one per fold and one on every pool for the importances). Each fit is seeded and single-threaded,
and none reads another's result, so they may run in any order and at once: scikit-learn's tree builder and liblinear
run without Python's lock, and on two cores two fits at a time take about half the wall time of one after the
other, with the same numbers (each fit is the same computation on the same rows).

A `HeldOut` plan fixes everything random before any fit runs (the folds, and the seeded sample of a fold's groups
past `probe.MAX_TRAIN_ROWS`, drawn fold after fold from one generator as before), so the jobs are plain functions of
their rows. `run` runs a list of jobs and returns their results in order. The threads are `MMBENCH_CHECK_THREADS`
(1: one fit after another), else the usable cores, at most four.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

MAX_THREADS = 4


def threads() -> int:
    """How many fits run at once: MMBENCH_CHECK_THREADS, else the usable cores (at most MAX_THREADS)."""
    given = os.environ.get("MMBENCH_CHECK_THREADS", "").strip()
    if given:
        try:
            return max(1, int(given))
        except ValueError:
            raise ValueError(f"MMBENCH_CHECK_THREADS={given!r}: expected a whole number of threads") from None
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_THREADS, usable))


def run(jobs: Sequence[Callable[[], Any]]) -> list[Any]:
    """Every job's result, in the jobs' order (the first exception is raised once all have ended)."""
    n = min(threads(), len(jobs))
    if n <= 1:
        return [job() for job in jobs]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="mmbench-fit") as pool:
        futures = [pool.submit(job) for job in jobs]
        return [f.result() for f in futures]


@dataclass
class HeldOut:
    """The folds of a held-out prediction: (training rows, held-out rows) of each fold that trains."""

    n: int
    folds: list[tuple[np.ndarray, np.ndarray]]

    def scores(self, predicted: Sequence[np.ndarray]) -> np.ndarray:
        """Each row's held-out probability (0 in a fold that could not train), rounded so ties are ties on every
        machine."""
        out = np.zeros(self.n)
        for (_, test), p in zip(self.folds, predicted):
            out[test] = p
        return np.round(out, 9)


def group_folds(y: np.ndarray, groups: np.ndarray, folds: int, cap: int | None = None,
                seed: int = 0) -> HeldOut:
    """GroupKFold's folds (at most `folds`, one per group when fewer) that hold both classes in training; past
    `cap` training rows a fold trains on a seeded sample of its groups (one generator, fold after fold)."""
    from sklearn.model_selection import GroupKFold

    k = min(folds, len(np.unique(groups)))
    rng = np.random.default_rng(seed)
    planned = []
    for train, test in GroupKFold(n_splits=k).split(np.zeros(len(y)), y, groups):
        if cap is not None and len(train) > cap:
            names = np.unique(groups[train])
            keep = rng.choice(names, size=min(len(names), max(2, int(len(names) * cap / len(train)))), replace=False)
            train = train[np.isin(groups[train], keep)]
        if len(np.unique(y[train])) < 2:
            continue              # a fold with one class learns nothing: every held-out candidate ties at 0
        planned.append((train, test))
    return HeldOut(len(y), planned)
