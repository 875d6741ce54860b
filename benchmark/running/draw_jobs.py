"""One draw as a job another process can do: build the draw, then run the models whose runs need no other draw.

`mmbench draws` and `mmbench overfit` hand each draw to a worker (a process of their own or a Ray task; see
`mmbench.running.draw_pool`). A job is plain data (names, folders, options), so it travels to either as is. The
worker replays what the driver set up before the job could mean the same thing there: the driver's
MMBENCH_HOME, its `--include` files (the tasks and models they register), its command line (recorded in each
results.json) and its log level. Then it builds the draw into the draw's own folder unless a finished build is
there already (`draws.build_draw`: a build is written whole or not at all), and runs each of the job's models over
it into <out>/<content hash>, reusing a run that is already there (`draws.run_over_draws`: results are written whole
or not at all too). So a job cut off anywhere leaves its draw either finished or absent, and doing it again redoes
only what is absent.

Which runs travel with a job: only those that cannot depend on another draw's run, i.e. models the embedding
cache does not serve (BM25, whose vectors depend on the run's own corpus, or any model with the cache turned off).
A cached model's vector for a document that two draws share is the one the first run to encode it stored, in that
run's batch (a vector's last bits depend on its batch); the driver keeps that the one-after-another order's by
running cached models itself, over the draws in their order.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmbench.models.base import EmbeddingModel


@dataclass(frozen=True)
class DrawRun:
    """One model's run over a job's draw: the model as the user named it, the folder whose <content hash>
    sub-folder gets the run, and whether the run is a fresh draw's (its own protocol id, `draws.mark_fresh`)."""

    requested: str
    out: str
    fresh: bool = False


@dataclass(frozen=True)
class DrawJob:
    """A draw to build in `folder` (task, seed, source, builder parameters) and the runs to do over it, with what
    the worker needs to do them as the driver would (`run_options`: RunOptions fields; `setup`: `WorkerSetup`)."""

    task: str
    seed: int
    source: str
    params: dict[str, Any]
    folder: str
    runs: tuple[DrawRun, ...] = ()
    run_options: dict[str, Any] = field(default_factory=dict)
    setup: "WorkerSetup | None" = None


@dataclass(frozen=True)
class WorkerSetup:
    """The driver's state a worker takes on before a job: MMBENCH_HOME, the --include files (absolute paths),
    the command line results record, and the root log level."""

    home: str
    includes: tuple[str, ...] = ()
    command_line: tuple[str, ...] | None = None
    log_level: int = logging.WARNING


@dataclass(frozen=True)
class DrawDone:
    """What a worker did: the draw's folder and content hash, each run's results folder (in the job's order),
    the lines it has to say (runs reused), and its process's peak resident memory in bytes (None: unknown)."""

    seed: int
    folder: str
    content_hash: str
    results: tuple[str, ...]
    lines: tuple[str, ...]
    peak_rss: int | None = None


class DrawBuildError(Exception):
    """Building or loading a draw failed (not a run over it): `cause` is what the build raised, so the command
    says it as it says a build error of its own process."""

    def __init__(self, seed: int, cause: BaseException) -> None:
        super().__init__(seed, cause)
        self.seed, self.cause = seed, cause

    def __str__(self) -> str:
        return f"draw {self.seed}: {type(self.cause).__name__}: {self.cause}"


_MODELS: dict[tuple[str, bool], EmbeddingModel] = {}   # a worker's loaded models, reused by its later jobs
_INCLUDED: set[str] = set()


def setup_worker(setup: WorkerSetup | None) -> None:
    """Take on the driver's state (see `WorkerSetup`); a file already included in this process is not again."""
    if setup is None:
        return
    from mmbench.running import provenance

    os.environ["MMBENCH_HOME"] = setup.home
    provenance.COMMAND_LINE = list(setup.command_line) if setup.command_line else None
    if not logging.getLogger().handlers:
        logging.basicConfig(level=setup.log_level, format="%(levelname)s %(name)s: %(message)s")
    for path in setup.includes:
        if path not in _INCLUDED:
            include(path)
            _INCLUDED.add(path)


def include(path: str) -> None:
    """An --include file, as the command line takes it: a task file is registered, a Python file imported."""
    from mmbench.common.plugins import include_file
    from mmbench.tasks.declarative import is_task_file, register_task_file

    if is_task_file(path):
        register_task_file(path)
    else:
        include_file(path)


def job_model(requested: str, cached: bool) -> EmbeddingModel:
    """The model `requested`, loaded as `mmbench draws` loads it (with the cache on, a stand-in that loads the
    weights only if a vector is missing); loaded once per worker process."""
    from mmbench.common.home import mmbench_home
    from mmbench.running.lazy_model import load_model_lazily
    from mmbench.running.model_loading import load_model_explained

    key = (requested, cached)
    if key not in _MODELS:
        _MODELS[key] = (load_model_lazily(requested, {}, mmbench_home(), load_model_explained) if cached
                        else load_model_explained(requested, {}))
    return _MODELS[key]


def run_options(fields: dict[str, Any]) -> Any:
    """The RunOptions of a job (its plain fields; no progress bars in a worker)."""
    from mmbench.running.runner import RunOptions

    cache_dir = fields.get("cache_dir")
    return RunOptions(**{**fields, "cache_dir": Path(cache_dir) if cache_dir else None, "progress": False})


def option_fields(options: Any) -> dict[str, Any]:
    """The plain fields of RunOptions `options` a job carries (what a draw's run reads of them)."""
    return {"batch_tokens": options.batch_tokens, "max_batch_size": options.max_batch_size,
            "cache_dir": str(options.cache_dir) if options.cache_dir else None, "use_cache": options.use_cache,
            "limit": options.limit, "seed": options.seed}


def do_draw_job(job: DrawJob) -> DrawDone:
    """Build the job's draw (unless built), run its models over it (unless run); what was done, as plain data."""
    from mmbench.running.draws import build_draw, run_over_draws
    from mmbench.tasks import get_task

    setup_worker(job.setup)
    spec = get_task(job.task)
    try:
        ps = build_draw(spec, job.seed, Path(job.folder), job.source, dict(job.params))
    except Exception as exc:  # noqa: BLE001 - handed to the driver, which says it as a build error
        raise DrawBuildError(job.seed, exc) from None
    lines: list[str] = []
    options = run_options(job.run_options)
    results = []
    for run in job.runs:
        model = job_model(run.requested, options.use_cache)
        (res,) = run_over_draws(model, run.requested, spec, [ps], Path(run.out), options, fresh=run.fresh,
                                announce=lines.append)
        results.append(str(res.root))
    return DrawDone(job.seed, job.folder, ps.content_hash, tuple(results), tuple(lines), peak_rss())


def peak_rss() -> int | None:
    """This process's peak resident memory in bytes (VmHWM), where /proc tells it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
