"""One evaluation's batches spread over Ray actors, each holding its own copy of the model.

The driver forms the batches exactly as a single-process run would (same views, same order,
same composition) and only decides which actor encodes which batch, so the vectors are the
ones a local run computes. Each actor keeps at most `inflight` batches; finished batches come
back to the driver, which stores them in the embedding cache as they arrive.

Liveness. An actor that dies (killed, out of memory, node lost) loses only the batches it had
not returned: they go back to the queue and the remaining actors encode them. An actor that
is alive but silent is treated the same way: one that takes longer than `timeout` seconds to
load its model, or to encode the batch it is working on, is killed and its batches re-queued.
A batch that `max_attempts` actors failed to return (died or timed out on it) is reported as
failed for its views instead of taking the whole pool of workers down. When no actor is left,
the run stops with one line saying so; the batches already returned are in the cache.
"""
from __future__ import annotations

import logging
import os
import time
from collections import deque
from typing import Any, Callable, Generator, Iterator, Sequence

from mmbench.data.documents import Document
from mmbench.data.media import MediaStore
from mmbench.models.base import EmbeddingModel, Role
from mmbench.models.output_check import BadModelOutput
from mmbench.running.executors.local import BatchResult, encode_batch

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 1800.0  # loading a model or encoding one batch; generous: a 7B model on a slow disk


def _content(identity: dict[str, Any]) -> dict[str, Any]:
    """A card identity less its display name: `--model-name` renames the driver's model, not the workers'."""
    return {k: v for k, v in identity.items() if k != "name"}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _EncodeWorker:
    """The actor body: loads the model once, then encodes the batches it is given."""

    def __init__(self, factory: Callable[[], EmbeddingModel], exit_after: int | None = None,
                 hang_after: int | None = None) -> None:
        self._model: EmbeddingModel | None = None
        self.load_error: str | None = None
        try:
            self._model = factory()
        except Exception as exc:  # noqa: BLE001 - reported to the driver in words, not as Ray's wrapped trace
            self.load_error = f"{type(exc).__name__}: {_first_line(exc)}"
        self._exit_after = exit_after  # test hook: the process exits after this many batches
        self._hang_after = hang_after  # test hook: the actor stops answering after this many batches
        self._done = 0
        self.identity = self._model.card.identity() if self._model is not None else None

    def model_identity(self) -> dict[str, Any] | str:
        """The loaded model's identity, or why it could not be loaded."""
        if self.identity is None:
            return self.load_error or "the model was not loaded"
        return self.identity

    def encode(self, index: int, views: list[Document], role: Role, media: MediaStore | None) -> BatchResult:
        if self._exit_after is not None and self._done >= self._exit_after:
            # simulates a worker lost mid-run (the batch in hand is never returned); the pause lets the replies of
            # the batches it finished leave the process first, as they would from a worker that dies while encoding
            time.sleep(0.5)
            os._exit(1)
        if self._hang_after is not None and self._done >= self._hang_after:
            time.sleep(3600)  # simulates a stuck worker (a wedged GPU, a dead mount): alive, never answers
        self._done += 1
        if self._model is None:  # the driver sends no batch to a worker that failed to load; said if it ever does
            raise RuntimeError(f"this worker has no model: {self.load_error}")
        return encode_batch(self._model, views, role, media, index)


class RayExecutor:
    """`workers` Ray actors with `cpus`/`gpus` each; on `address`, or on a local Ray started here.

    `timeout` (seconds) bounds an actor's work on any one batch and, unless `start_timeout` is given,
    its start (scheduling and model load) too."""

    name = "ray"

    def __init__(self, factory: Callable[[], EmbeddingModel], workers: int = 2, *, cpus: float = 1.0,
                 gpus: float = 0.0, address: str | None = None, num_cpus: int | None = None,
                 inflight: int = 2, max_attempts: int = 3, timeout: float = DEFAULT_TIMEOUT_S,
                 start_timeout: float | None = None, exit_after: dict[int, int] | None = None, hang_after: dict[int, int] | None = None) -> None:
        if workers < 1:
            raise ValueError("--workers must be at least 1")
        if not timeout > 0:
            raise ValueError(f"the Ray worker timeout must be a positive number of seconds, not {timeout!r}")
        self.factory, self.workers, self.cpus, self.gpus = factory, workers, cpus, gpus
        self.address, self.num_cpus = address, num_cpus
        self.inflight, self.max_attempts = max(1, inflight), max(1, max_attempts)
        self.timeout = float(timeout)
        self.start_timeout = self.timeout if start_timeout is None else float(start_timeout)
        self._exit_after = dict(exit_after or {})
        self._hang_after = dict(hang_after or {})
        self._actors: list[Any] | None = None
        self._started_ray = False
        self.lost_workers = 0
        self.timed_out_workers = 0
        self.requeued_batches = 0

    def _lose(self, a: int, why: str, *, kill: bool = False) -> None:
        """Actor `a` is gone (or made so): counted once, killed if it may still hold resources."""
        import ray

        actors = self._actors
        if actors is None or actors[a] is None:
            return
        if kill:
            ray.kill(actors[a])
        actors[a] = None
        self.lost_workers += 1
        log.warning("Ray worker %d lost (%s); its unfinished batches go to the others", a, why)

    def _no_workers(self, left: int, cause: str) -> RuntimeError:
        return RuntimeError(f"all {self.workers} Ray workers are gone (last: {cause}); {left} batches not encoded "
                            "(the cache keeps the finished ones: run again to resume)")

    def _start(self, identity: dict[str, Any], n_batches: int) -> list[Any]:
        import ray
        from ray.exceptions import RayActorError

        if self._actors is not None:
            return self._actors
        if not ray.is_initialized():
            ray.init(address=self.address, num_cpus=self.num_cpus if self.address is None else None,
                     include_dashboard=False, log_to_driver=False)
            self._started_ray = True
        actor = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_restarts=0)(_EncodeWorker)
        self._actors = [actor.remote(self.factory, self._exit_after.get(i), self._hang_after.get(i))
                        for i in range(self.workers)]
        pending = {self._actors[i].model_identity.remote(): i for i in range(self.workers)}
        ready, late = ray.wait(list(pending), num_returns=len(pending), timeout=self.start_timeout)
        cause = ""
        for ref in ready:
            i = pending[ref]
            try:
                other = ray.get(ref)
            except RayActorError as exc:  # its model failed to load, or the process died while loading
                cause = f"worker {i} failed to start: {_first_line(exc)}"
                self._lose(i, cause)
                continue
            if isinstance(other, str):  # the factory raised in the actor
                cause = f"worker {i} failed to load the model: {other}"
                self._lose(i, cause, kill=True)
                continue
            if _content(other) != _content(identity):  # another model's vectors: refuse rather than mix them
                raise RuntimeError(f"Ray worker {i} loaded a different model than the driver: {other} != {identity}")
        for ref in late:  # never scheduled (the reservation does not fit) or stuck while loading
            cause = f"worker {pending[ref]} did not start within {self.start_timeout:g} s"
            self.timed_out_workers += 1
            self._lose(pending[ref], cause, kill=True)
        if all(a is None for a in self._actors):
            raise self._no_workers(n_batches, cause)
        return self._actors

    def encode(self, model: EmbeddingModel, batches: Sequence[Sequence[Document]], role: Role,
               media: MediaStore | None, progress: bool = True) -> Iterator[BatchResult]:
        import ray

        if not batches:
            return
        d = _Dispatch(self, self._start(model.card.identity(), len(batches)), batches, role, media)
        d.fill()
        cause = ""
        while d.running:
            done, _ = ray.wait(list(d.running), num_returns=1, timeout=d.wait_budget())
            if not done:  # some actor has been on one batch for longer than the timeout
                cause = yield from self._drop_slow(d, cause)
            else:
                cause = yield from self._collect(d, done[0], cause)
            if not d.alive:
                raise self._no_workers(len(d.queue) + len(d.running), cause) from None
            d.fill()

    def _drop_slow(self, d: _Dispatch, cause: str) -> Generator[BatchResult, None, str]:
        """Kill every actor past the timeout on its current batch; its batches go back (or fail)."""
        now = time.monotonic()
        for a in sorted(a for a in d.alive if d.order[a] and now - d.since[a] >= self.timeout):
            cause = f"worker {a} took more than {self.timeout:g} s on one batch"
            self.timed_out_workers += 1
            self._lose(a, cause, kill=True)
            yield from d.take_back(a, "worker timed out while encoding")
        return cause

    def _collect(self, d: _Dispatch, ref: Any, cause: str) -> Generator[BatchResult, None, str]:
        """The batch `ref` finished: its result, or (its actor died) the batches that actor held."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        a = d.running[ref][0]  # an actor taken back has no refs left in `running`: `a` is alive
        try:
            result = ray.get(ref)
        except RayActorError as exc:
            cause = f"worker {a} died: {_first_line(exc)}"
            self._lose(a, cause)
            yield from d.take_back(a, "worker died while encoding")
            return cause
        except RayTaskError as exc:   # garbage vectors stop the run as in this process: one line, exit 2
            if isinstance(exc.cause, BadModelOutput):
                raise BadModelOutput(str(exc.cause)) from None
            raise
        d.finished(a, ref)
        yield result
        return cause

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


class _Dispatch:
    """One `RayExecutor.encode` call's bookkeeping: which batches wait, which actor runs which, since when."""

    def __init__(self, executor: RayExecutor, actors: list[Any], batches: Sequence[Sequence[Document]], role: Role,
                 media: MediaStore | None) -> None:
        self.executor, self.actors, self.batches, self.role, self.media = executor, actors, batches, role, media
        self.alive = {i for i, a in enumerate(actors) if a is not None}
        self.queue: deque[int] = deque(range(len(batches)))
        self.attempts = [0] * len(batches)
        self.running: dict[Any, tuple[int, int]] = {}  # object ref -> (actor, batch)
        self.order: dict[int, deque[Any]] = {a: deque() for a in self.alive}  # each actor's refs, in its order
        self.since: dict[int, float] = {}  # when the actor began the batch at the head of its line
        self.load = dict.fromkeys(self.alive, 0)

    def fill(self) -> None:
        """Hand queued batches to the least loaded live actors, up to `inflight` each."""
        for a in sorted(self.alive, key=lambda i: (self.load[i], i)):
            while self.queue and self.load[a] < self.executor.inflight:
                b = self.queue.popleft()
                self.attempts[b] += 1
                ref = self.actors[a].encode.remote(b, list(self.batches[b]), self.role, self.media)
                self.running[ref] = (a, b)
                if not self.order[a]:
                    self.since[a] = time.monotonic()
                self.order[a].append(ref)
                self.load[a] += 1

    def wait_budget(self) -> float:
        """Seconds until the first actor on a batch passes the timeout (the timeout when none is busy)."""
        timeout, now = self.executor.timeout, time.monotonic()
        return max(0.0, min((self.since[a] + timeout - now for a in self.alive if self.order[a]), default=timeout))

    def finished(self, a: int, ref: Any) -> None:
        self.running.pop(ref)
        self.load[a] -= 1
        self.order[a].remove(ref)
        self.since[a] = time.monotonic()

    def give_back(self, b: int, why: str) -> BatchResult | None:
        """Batch `b` was not returned: back to the queue, or failed once `max_attempts` actors lost it."""
        if self.attempts[b] >= self.executor.max_attempts:
            reason = f"{why} (tried on {self.attempts[b]} workers)"
            return BatchResult(b, [(None, None)] * len(self.batches[b]), 0, {v.id: reason for v in self.batches[b]})
        self.executor.requeued_batches += 1
        self.queue.appendleft(b)
        return None

    def take_back(self, a: int, why: str) -> list[BatchResult]:
        """Actor `a` is gone: every batch in its line goes back (or fails, see `give_back`). Only the first
        was being encoded; the ones queued behind it never started there, so they are not attempts."""
        self.alive.discard(a)
        self.load[a] = 0
        failed = []
        for k, ref in enumerate(self.order.pop(a, ())):
            _, b = self.running.pop(ref)
            if k > 0:
                self.attempts[b] -= 1
            result = self.give_back(b, why)
            if result is not None:
                failed.append(result)
        return failed
