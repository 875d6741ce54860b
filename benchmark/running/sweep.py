"""Many evaluations at once: every (task, model) pair as a job, run here or on a Ray cluster.

A job is plain data (paths and options), so it travels to a Ray worker as is; the worker loads
the pool set and the model itself and writes its results folder, exactly as `mmbench run` would.
A failing job is reported with its error and never stops the others. Jobs whose results folder
already holds a run of the same pool set by the same requested model are skipped, so a sweep that
was interrupted resumes where it stopped (and the embedding cache, shared by all jobs, resumes the
job that was cut off mid-way).
"""
from __future__ import annotations

import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from mmbench.models.base import EmbeddingModel


@dataclass(frozen=True)
class Job:
    """One (task, model) evaluation: the pool set folder to read and the results folder to write."""

    task: str
    model: str
    data: str
    output: str
    content_hash: str
    model_options: dict[str, Any] = field(default_factory=dict)
    run_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class JobOutcome:
    """What became of a job: done, skipped (results already there) or failed, with the reason."""

    job: Job
    status: str
    detail: str = ""
    main_score: float | None = None
    n_failed_items: int = 0


def finished_summary(job: Job) -> dict[str, Any] | None:
    """results.json of `job.output` when the folder already holds complete, intact results of this pool set
    by this requested model; None otherwise (missing, unreadable or half rewritten: the job runs again)."""
    from mmbench.results.reruns import differences, previous_summary

    summary = previous_summary(Path(job.output))
    if summary is None or "unreadable" in summary:
        return None
    diffs = differences(summary, job.content_hash, None, job.model, job.run_options.get("limit"),
                        job.run_options.get("seed", 0))
    return None if diffs else summary


def run_job(job: Job) -> JobOutcome:
    """Load, evaluate, write; every error becomes a failed outcome naming it (never an exception)."""
    try:
        return _run(job)
    except Exception as exc:  # noqa: BLE001 - a job reports its failure instead of killing the sweep
        where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        at = f" (at {Path(where.filename).name}:{where.lineno})" if where else ""
        return JobOutcome(job, "failed", f"{type(exc).__name__}: {exc}{at}")


def _run(job: Job) -> JobOutcome:
    from mmbench.running.evaluation import evaluate_to_folder
    from mmbench.running.model_loading import ModelUnavailable
    from mmbench.data.poolset import check_integrity, load_poolset
    from mmbench.running.runner import RunOptions
    from mmbench.tasks import get_task

    task = get_task(job.task)
    ps = load_poolset(Path(job.data))
    check_integrity(ps)
    if ps.content_hash != job.content_hash:
        return JobOutcome(job, "failed", f"pool set {job.data} changed since the sweep was planned")
    try:
        model = _load(job)
    except ModelUnavailable as exc:
        return JobOutcome(job, "failed", str(exc))
    plain = {k: v for k, v in job.run_options.items() if k not in ("sharding", "model_home")}
    options = RunOptions(**{**plain, "progress": False})
    sharding = job.run_options.get("sharding")
    if sharding:  # inside a Ray task: the actors join the cluster this job runs on
        from mmbench.running.executors import make_executor

        options.executor = make_executor("ray", job.model, dict(job.model_options), int(sharding["workers"]),
                                         cpus_per_worker=float(sharding["cpus_per_worker"]),
                                         gpus_per_worker=float(sharding["gpus_per_worker"]))
    try:
        summary = evaluate_to_folder(task.name, ps, model, options, Path(job.output), job.model)
    finally:
        if options.executor is not None:
            options.executor.close()
    n_failed = int(summary["mmbench"].get("n_failed_items", 0))
    return JobOutcome(job, "done", f"{n_failed} failed items" if n_failed else "", _main_score(job, summary), n_failed)


def _load(job: Job) -> EmbeddingModel:
    """The job's model; with the cache on, a stand-in that loads the weights only if a vector is missing."""
    from mmbench.running.model_loading import load_model_explained
    from mmbench.running.lazy_model import load_model_lazily

    home = job.run_options.get("model_home")  # where remembered model cards live (the sweep's MMBENCH_HOME)
    if not job.run_options.get("use_cache", True) or not home:
        return load_model_explained(job.model, dict(job.model_options))
    return load_model_lazily(job.model, dict(job.model_options), Path(home), load_model_explained)


def _main_score(job: Job, summary: dict[str, Any]) -> float | None:
    """The task's main score over all items, as results.json states it."""
    from mmbench.results.mteb_layout import group_entries
    from mmbench.tasks import get_task

    return group_entries(summary).get("all", {}).get(get_task(job.task).main_score)


def _skipped(job: Job, summary: dict[str, Any]) -> JobOutcome:
    return JobOutcome(job, "skipped", "results already there", _main_score(job, summary))


def run_local(jobs: Sequence[Job]) -> list[JobOutcome]:
    """Run the jobs one after another in this process."""
    return [_skipped(j, done) if (done := finished_summary(j)) else run_job(j) for j in jobs]


def run_ray(jobs: Sequence[Job], address: str | None = None, cpus_per_job: float = 1.0,
            gpus_per_job: float = 0.0, num_cpus: int | None = None) -> list[JobOutcome]:
    """Run the jobs as Ray tasks (on `address`, or a local Ray started here), each with its own
    CPU/GPU reservation; Ray sets CUDA_VISIBLE_DEVICES per task. Outcomes keep the jobs' order."""
    import ray

    outcomes = {id(j): _skipped(j, done) for j in jobs if (done := finished_summary(j))}
    pending = [j for j in jobs if id(j) not in outcomes]
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, num_cpus=num_cpus if address is None else None, include_dashboard=False,
                 log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=cpus_per_job, num_gpus=gpus_per_job, max_retries=0)(run_job)
        refs = [(j, remote.remote(j)) for j in pending]
        for job, ref in refs:
            try:
                outcomes[id(job)] = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - the worker died (out of memory, node lost, ...)
                outcomes[id(job)] = JobOutcome(job, "failed", f"Ray task failed: {type(exc).__name__}: {exc}")
    finally:
        if started_here:
            ray.shutdown()
    return [outcomes[id(j)] for j in jobs]


def outcome_record(o: JobOutcome) -> dict[str, Any]:
    """A flat, JSON-ready row for the sweep report."""
    return {"task": o.job.task, "model": o.job.model, "status": o.status, "main_score": o.main_score,
            "failed_items": o.n_failed_items, "detail": o.detail, "output": o.job.output,
            "run_options": asdict(o.job)["run_options"]}
