"""Where the draws of `mmbench draws` and `mmbench overfit` are built and run: one after another in this process,
in worker processes of this machine, or as tasks on a Ray cluster; the results are the same bytes either way.

`build_and_run` takes the draws to make (`DrawPlan`: seed, builder parameters, where each model's run goes) and the
loaded models. With one worker (`--jobs 1`) it does what the commands always did: every draw built here in seed
order, then each model over the draws in seed order. Otherwise each draw is a job (`draw_jobs.DrawJob`) done by a
worker (`--executor local`: a process of its own, started with `spawn`, so it shares no state with this one and
ends when this one is killed; `--executor ray`: a Ray task reserving one CPU). A worker builds its draw and runs
the models whose runs depend on no other draw's (see `draw_jobs`); this process takes the finished draws in seed
order and runs the cached models over them itself, as the one-after-another path does, while the workers go on
building. Every result the commands read back is then the file a run wrote (`load_results`), so the reports are
made from the same bytes.

How many workers (`--jobs auto`): the smallest of the number of draws, the cores this process may use and how
many workers fit in the memory available now, each counted at what one was measured to need (`draw_memory`).

A killed command resumes: each draw is built into its own folder, whole or not at all, and each run written whole
or not at all, so the next command rebuilds and reruns only what is missing.
"""
from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from mmbench.data.poolset import PoolSet, PoolSetError, check_integrity, load_poolset
from mmbench.models.base import EmbeddingModel
from mmbench.results.store import RunResults, load_results
from mmbench.running.draw_memory import auto_workers, models_key, remember_peak, worker_need
from mmbench.running.draw_jobs import DrawBuildError, DrawDone, DrawJob, DrawRun, WorkerSetup, do_draw_job, option_fields
from mmbench.running.draws import build_draw, draws_root, run_over_draws
from mmbench.tasks import TaskSpec

log = logging.getLogger(__name__)

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class DrawPlan:
    """A draw to make: its seed and builder parameters, for each model the folder whose <content hash>
    sub-folder gets its run over the draw, and whether the runs are a fresh draw's."""

    seed: int
    params: dict[str, Any]
    outs: tuple[Path, ...] = ()
    fresh: bool = False


@dataclass(frozen=True)
class Parallel:
    """Where the draws are made: `executor` local or ray; `jobs` workers (None: as many as fit, see the module
    notes; 1 with local: one after another in this process); a Ray cluster's address and the CPUs of a Ray
    started here; the --include files a worker loads first.

    Local workers are started with `spawn`, which imports the calling program's main module again in each worker,
    as any multiprocessing program does: a script that calls `build_and_run` with more than one local worker keeps
    its top-level work under `if __name__ == "__main__":`."""

    executor: str = "local"
    jobs: int | None = 1
    ray_address: str | None = None
    ray_num_cpus: int | None = None
    includes: tuple[str, ...] = ()


Models = Sequence[tuple[str, EmbeddingModel]]   # (the model as the user named it, the loaded model)


def build_and_run(spec: TaskSpec, source: str, plans: Sequence[DrawPlan], models: Models, options: Any,
                  where: Parallel = Parallel(), announce: Callable[[str], Any] | None = None
                  ) -> tuple[list[PoolSet], list[list[RunResults]]]:
    """Build every draw of `plans` (unless built) and run every model over each (unless run there): the draws'
    pool sets in the plans' order and, per model, its runs in that order. A build that fails raises
    `DrawBuildError` naming the draw; a run that fails raises what the run raised."""
    if where.executor not in EXECUTORS:
        raise ValueError(f"unknown executor {where.executor!r} (local or ray)")
    say = announce or (lambda line: None)
    on_cluster = where.executor == "ray" and where.ray_address is not None   # the cluster's CPUs decide there
    auto = None if where.jobs or on_cluster else auto_workers(len(plans), _need(spec, source, plans, models, options))
    if where.executor == "local":
        workers = min(where.jobs or auto or 1, len(plans))
        if workers <= 1:
            return one_after_another(spec, source, plans, models, options, say)
        pool: Any = ProcessWorkers(workers)
        say(f"making {len(plans)} draws in {workers} worker processes (--jobs {where.jobs or 'auto'})")
    else:
        pool = RayWorkers(where.ray_address, where.ray_num_cpus or where.jobs or auto)
        say(f"making {len(plans)} draws as Ray tasks")
    ahead = where.jobs if where.executor == "ray" and where.ray_address and where.jobs else len(plans)
    return in_workers(spec, source, plans, models, options, pool, ahead, _setup(where), say)


def one_after_another(spec: TaskSpec, source: str, plans: Sequence[DrawPlan], models: Models, options: Any,
                      say: Callable[[str], Any]) -> tuple[list[PoolSet], list[list[RunResults]]]:
    """Every draw built here in the plans' order, then each model over the draws in that order."""
    poolsets = []
    for plan in plans:
        try:
            poolsets.append(build_draw(spec, plan.seed, draw_folder(spec, source, plan), source, dict(plan.params),
                                       announce=say))
        except Exception as exc:  # noqa: BLE001 - the command says it as a build error
            raise DrawBuildError(plan.seed, exc) from None
    runs = [[run_over_draws(model, requested, spec, [ps], plan.outs[j], options, fresh=plan.fresh, announce=say)[0]
             for plan, ps in zip(plans, poolsets)] for j, (requested, model) in enumerate(models)]
    return poolsets, runs


def in_workers(spec: TaskSpec, source: str, plans: Sequence[DrawPlan], models: Models, options: Any, pool: Any,
               ahead: int, setup: WorkerSetup, say: Callable[[str], Any]) -> tuple[list[PoolSet], list[list[RunResults]]]:
    """The draws as jobs of `pool` (at most `ahead` handed out beyond the one being taken), taken in the plans'
    order; the models whose runs depend on the order (`runs_here`) run here over each draw as it is taken."""
    here = [j for j, (_, model) in enumerate(models) if runs_here(model, options)]
    away = [j for j in range(len(models)) if j not in here]
    jobs = [DrawJob(spec.name, p.seed, source, dict(p.params), str(draw_folder(spec, source, p)),
                    tuple(DrawRun(models[j][0], str(p.outs[j]), p.fresh) for j in away), option_fields(options), setup)
            for p in plans]
    handles: list[Any] = []
    poolsets: list[PoolSet] = []
    runs: list[list[Any]] = [[None] * len(plans) for _ in models]
    failed = True
    try:
        for i, plan in enumerate(plans):
            while len(handles) < min(len(jobs), i + max(1, ahead)):
                handles.append(_hand_out(pool, jobs[len(handles)], say))
            done = pool.result(handles[i], jobs[i])
            remember_peak(Path(done.folder).parent, models_key(models[j][0] for j in away), done.peak_rss)
            poolsets.append(_taken(spec, done))
            for line in done.lines:
                say(line)
            for k, j in enumerate(away):
                runs[j][i] = load_results(Path(done.results[k]))
            for j in here:
                requested, model = models[j]
                runs[j][i] = run_over_draws(model, requested, spec, [poolsets[i]], plan.outs[j], options,
                                            fresh=plan.fresh, announce=say)[0]
        failed = False
    finally:
        pool.close(failed, handles)
    return poolsets, runs


def _hand_out(pool: Any, job: DrawJob, say: Callable[[str], Any]) -> Any:
    if not (Path(job.folder) / "manifest.json").is_file():
        say(f"building draw {job.seed} of {job.task} into {job.folder}")
    return pool.submit(job)


def _taken(spec: TaskSpec, done: DrawDone) -> PoolSet:
    """The draw a worker made, loaded and checked here (it must still be the one the worker made)."""
    try:
        ps = load_poolset(Path(done.folder))
        check_integrity(ps)
        if ps.content_hash != done.content_hash:
            raise PoolSetError(f"its content hash is {ps.content_hash[:16]}, not the worker's {done.content_hash[:16]}")
    except PoolSetError as exc:
        raise DrawBuildError(done.seed, PoolSetError(f"draw {done.seed} of {spec.name} ({done.folder}): {exc}")) from None
    if done.peak_rss is not None:
        log.debug("draw %d done by a worker of peak resident memory %.0f MB", done.seed, done.peak_rss / 2**20)
    return ps


def _setup(where: Parallel) -> WorkerSetup:
    from mmbench.common.home import mmbench_home
    from mmbench.running import provenance

    command = tuple(provenance.COMMAND_LINE) if provenance.COMMAND_LINE else None
    return WorkerSetup(str(mmbench_home().resolve()), tuple(str(Path(p).resolve()) for p in where.includes), command,
                       logging.getLogger().getEffectiveLevel())


def draw_folder(spec: TaskSpec, source: str, plan: DrawPlan) -> Path:
    return draws_root(spec, source, dict(plan.params)) / f"seed{plan.seed}"


def _need(spec: TaskSpec, source: str, plans: Sequence[DrawPlan], models: Models, options: Any) -> int:
    """What one worker is counted at (`draw_memory.worker_need`) for these draws and the models it would run."""
    away = [requested for requested, model in models if not runs_here(model, options)]
    roots = sorted({draws_root(spec, source, dict(p.params)) for p in plans})
    return worker_need(roots, models_key(away), away)


def runs_here(model: EmbeddingModel, options: Any) -> bool:
    """Whether `model`'s runs must follow the draws' order (the embedding cache serves it, so what one run stores
    another reads): then this process runs it, over the draws in order, as the one-after-another path does."""
    return bool(options.use_cache and options.cache_dir is not None and getattr(model, "cacheable", True))


class ProcessWorkers:
    """Draw jobs in `workers` processes of this machine, started with `spawn` (a fresh interpreter with this
    process's environment: no state, lock or thread pool is inherited); each ends when this process does, even
    when it is killed (Linux: the parent-death signal)."""

    def __init__(self, workers: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=end_with_parent, initargs=(os.getpid(),))

    def submit(self, job: DrawJob) -> Any:
        return self.pool.submit(do_draw_job, job)

    def result(self, handle: Any, job: DrawJob) -> DrawDone:
        from concurrent.futures.process import BrokenProcessPool

        try:
            return handle.result()
        except BrokenProcessPool:
            raise RuntimeError(f"a worker process died while making draw {job.seed} (killed by a signal, perhaps for "
                               "lack of memory, or it failed to start); the draws finished so far are kept: run the "
                               "command again to go on, with fewer --jobs if memory ran short") from None

    def close(self, failed: bool, handles: Sequence[Any]) -> None:
        """Wait for the workers to end (after a failure, the jobs not started are dropped first)."""
        self.pool.shutdown(wait=True, cancel_futures=failed)


def end_with_parent(parent: int) -> None:
    """A worker's first step: be killed when the process that started it dies (Linux), and end now if it has."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)


class RayWorkers:
    """Draw jobs as Ray tasks of one CPU each, on the cluster at `address` or on a Ray started here with
    `num_cpus` CPUs (None: Ray's count); a Ray this process started is shut down at the end."""

    def __init__(self, address: str | None, num_cpus: int | None) -> None:
        import ray

        self.started = not ray.is_initialized()
        if self.started:
            ray.init(address=address, num_cpus=num_cpus if address is None else None, include_dashboard=False,
                     log_to_driver=False)
        self.remote = ray.remote(num_cpus=1, max_retries=0)(do_draw_job)

    def submit(self, job: DrawJob) -> Any:
        return self.remote.remote(job)

    def result(self, handle: Any, job: DrawJob) -> DrawDone:
        import ray
        from ray.exceptions import RayError, RayTaskError

        try:
            return ray.get(handle)
        except RayTaskError as exc:  # what the task raised, as this process would have raised it
            if isinstance(exc.cause, BaseException):
                raise exc.cause from None
            raise
        except RayError as exc:  # the task's worker died, or the cluster was lost
            raise RuntimeError(f"the Ray task making draw {job.seed} failed: {type(exc).__name__}: {exc}; the draws "
                               "finished so far are kept: run the command again to go on") from None

    def close(self, failed: bool, handles: Sequence[Any]) -> None:
        import ray

        if failed:
            for ref in handles:
                ray.cancel(ref)
        if self.started:
            ray.shutdown()
