"""One evaluation's batches spread over Ray actors, each holding its own copy of the model.

The driver forms the batches exactly as a single-process run would (same views, same order,
same composition) and only decides which actor encodes which batch, so the vectors are the
ones a local run computes. Each actor keeps at most `inflight` batches; finished batches come
back to the driver, which stores them in the embedding cache as they arrive. An actor that dies
(killed, out of memory, node lost) loses only the batches it had not returned: they go back to
the queue and the remaining actors encode them. A batch on which `max_attempts` actors died is
reported as failed for its views instead of taking the whole pool of workers down.
"""
from __future__ import annotations

import logging
import os
from collections import deque
from typing import Any, Callable, Iterator, Sequence

from ..documents import Document
from ..media import MediaStore
from ..models.base import EmbeddingModel, Role
from .local import BatchResult, encode_batch

log = logging.getLogger(__name__)


class _EncodeWorker:
    """The actor body: loads the model once, then encodes the batches it is given."""

    def __init__(self, factory: Callable[[], EmbeddingModel], exit_after: int | None = None) -> None:
        self._model = factory()
        self._exit_after = exit_after  # test hook: the process exits after this many batches
        self._done = 0
        self.identity = self._model.card.identity()

    def model_identity(self) -> dict[str, Any]:
        return self.identity

    def encode(self, index: int, views: list[Document], role: Role, media: MediaStore | None) -> BatchResult:
        if self._exit_after is not None and self._done >= self._exit_after:
            os._exit(1)  # simulates a worker lost mid-run (the batch in hand is never returned)
        self._done += 1
        return encode_batch(self._model, views, role, media, index)


class RayExecutor:
    """`workers` Ray actors with `cpus`/`gpus` each; on `address`, or on a local Ray started here."""

    name = "ray"

    def __init__(self, factory: Callable[[], EmbeddingModel], workers: int = 2, *, cpus: float = 1.0,
                 gpus: float = 0.0, address: str | None = None, num_cpus: int | None = None,
                 inflight: int = 2, max_attempts: int = 3, exit_after: dict[int, int] | None = None) -> None:
        if workers < 1:
            raise ValueError("--workers must be at least 1")
        self.factory, self.workers, self.cpus, self.gpus = factory, workers, cpus, gpus
        self.address, self.num_cpus = address, num_cpus
        self.inflight, self.max_attempts = max(1, inflight), max(1, max_attempts)
        self._exit_after = dict(exit_after or {})
        self._actors: list[Any] | None = None
        self._started_ray = False
        self.lost_workers = 0
        self.requeued_batches = 0

    def _start(self, identity: dict[str, Any]) -> list[Any]:
        import ray

        if self._actors is not None:
            return self._actors
        if not ray.is_initialized():
            ray.init(address=self.address, num_cpus=self.num_cpus if self.address is None else None,
                     include_dashboard=False, log_to_driver=False)
            self._started_ray = True
        actor = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_restarts=0)(_EncodeWorker)
        self._actors = [actor.remote(self.factory, self._exit_after.get(i)) for i in range(self.workers)]
        ids = ray.get([a.model_identity.remote() for a in self._actors])
        for i, other in enumerate(ids):
            if other != identity:  # the vectors would be another model's: refuse rather than mix them
                raise RuntimeError(f"Ray worker {i} loaded a different model than the driver: {other} != {identity}")
        return self._actors

    def encode(self, model: EmbeddingModel, batches: Sequence[Sequence[Document]], role: Role,
               media: MediaStore | None, progress: bool = True) -> Iterator[BatchResult]:
        import ray
        from ray.exceptions import RayActorError

        if not batches:
            return
        actors = self._start(model.card.identity())
        alive = {i for i, a in enumerate(actors) if a is not None}
        queue: deque[int] = deque(range(len(batches)))
        attempts = [0] * len(batches)
        running: dict[Any, tuple[int, int]] = {}  # object ref -> (actor, batch)
        load = dict.fromkeys(alive, 0)

        def fill() -> None:
            for a in sorted(alive, key=lambda i: (load[i], i)):
                while queue and load[a] < self.inflight:
                    b = queue.popleft()
                    attempts[b] += 1
                    running[actors[a].encode.remote(b, list(batches[b]), role, media)] = (a, b)
                    load[a] += 1

        fill()
        while running:
            (ref,), _ = ray.wait(list(running), num_returns=1)
            a, b = running.pop(ref)
            load[a] -= 1
            try:
                yield ray.get(ref)
            except RayActorError as exc:
                if a in alive:
                    alive.discard(a)
                    actors[a] = None
                    self.lost_workers += 1
                    log.warning("Ray worker %d died (%s); its unfinished batches go to the others", a,
                                str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                if attempts[b] >= self.max_attempts:
                    why = f"worker died while encoding (tried on {attempts[b]} workers)"
                    yield BatchResult(b, [(None, None)] * len(batches[b]), 0, {v.id: why for v in batches[b]})
                else:
                    self.requeued_batches += 1
                    queue.appendleft(b)
                if not alive:
                    raise RuntimeError(f"all {self.workers} Ray workers died; {len(queue)} batches not encoded "
                                       "(the cache keeps what finished: run again to resume)") from exc
            fill()

    def close(self) -> None:
        import ray

        if self._actors is not None:
            for a in self._actors:
                if a is not None:
                    ray.kill(a)
            self._actors = None
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    def __enter__(self) -> "RayExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
