"""The shortcut probe's model fits, planned fold by fold and run side by side on a few threads.

The probe fits 24 models on a pool set (for each of the three feature sets of gradient boosting and for the text
probe's regression: one per fold and one on every pool for the importances). Each fit is seeded and single-threaded,
and none reads another's result, so they may run in any order and at once: scikit-learn's tree builder and liblinear
run without Python's lock, and on two cores two fits at a time take about half the wall time of one after the
other, with the same numbers (each fit is the same computation on the same rows).

A `HeldOut` plan fixes everything random before any fit runs (the folds, and the seeded sample of a fold's groups
past `probe.MAX_TRAIN_ROWS`, drawn fold after fold from one generator as before), so the jobs are plain functions of
their rows. `run` runs a list of jobs and returns their results in order; a `Pool` takes jobs as their inputs are
ready and runs them while its caller does other work (`validate` computes the label-blind, pool-aware and lexical
checks, which hold Python's lock, while the probe's fits run beside them). The threads are
`MMBENCH_CHECK_THREADS` (1: one fit after another, when submitted), else the usable cores, at most four.
"""
from __future__ import annotations

import os
import threading
import time
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


class Pool:
    """Threads that run fits while the caller goes on (`validate` computes the other checks meanwhile); with one
    thread, each job runs when it is submitted. `cpu` adds up the CPU seconds the jobs took, thread by thread."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = threads() if workers is None else workers
        self.cpu = 0.0
        self._lock = threading.Lock()
        self._executor: Any = None
        if self.workers > 1:
            from concurrent.futures import ThreadPoolExecutor

            self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="mmbench-fit")

    def _timed(self, job: Callable[[], Any]) -> Any:
        start = time.thread_time()
        try:
            return job()
        finally:
            with self._lock:
                self.cpu += time.thread_time() - start

    def submit(self, jobs: Sequence[Callable[[], Any]]) -> Callable[[], list[Any]]:
        """Start the jobs; the returned function waits for them and gives their results in the jobs' order."""
        if self._executor is None:
            done = [self._timed(job) for job in jobs]
            return lambda: done
        futures = [self._executor.submit(self._timed, job) for job in jobs]
        return lambda: [f.result() for f in futures]

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run(jobs: Sequence[Callable[[], Any]]) -> list[Any]:
    """Every job's result, in the jobs' order (the first exception is raised once all have ended)."""
    with Pool(min(threads(), len(jobs))) as pool:
        return pool.submit(jobs)()


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
