"""The next batch's inputs prepared in a background thread while the model forwards this one.

An adapter that splits `encode` into `prepare` (media read and resized, text tokenised: CPU work)
and `encode_prepared` (the forward pass) gets batch i + 1 prepared while batch i is forwarded;
tokenizers, image decoding and torch all release the GIL for their heavy parts, so the two overlap.
At most one batch is prepared ahead (one batch of inputs more in memory).

The vectors are the ones `encode` gives: an adapter keeps `encode == encode_prepared ∘ prepare`.
A batch whose preparation fails is encoded the plain way (`encode`, then one view at a time),
which names the failing views as before; nothing is prepared meanwhile, so a retry on this thread
never shares the model's tokenizer with the background one.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Sequence

from mmbench.data.documents import Document
from mmbench.data.media import MediaStore
from mmbench.models.base import EmbeddingModel, Role


class Prefetcher:
    """Hands out each batch's prepared inputs in order, preparing the next one ahead in one thread."""

    def __init__(self, model: EmbeddingModel, batches: Sequence[Sequence[Document]], role: Role,
                 media: MediaStore | None) -> None:
        self._model, self._batches, self._role, self._media = model, batches, role, media
        self._pool: ThreadPoolExecutor | None = None
        self._ahead: dict[int, Future[Any]] = {}
        self._splits = True  # until the model's `prepare` returns None: then it does all in `encode`

    def take(self, index: int) -> Any:
        """Batch `index`'s prepared inputs (None: encode it the plain way), with the next batch started."""
        if not self._splits:
            return None
        future = self._ahead.pop(index, None)
        try:
            prepared = future.result() if future is not None else self._prepare(index)
        except Exception:  # noqa: BLE001 - encoded the plain way, which isolates and names the failing views
            return None
        if prepared is None:
            self._splits = False
            return None
        self._start(index + 1)
        return prepared

    def settle(self) -> None:
        """Wait until no batch is being prepared (before this thread tokenises: a retry one view at a time)."""
        wait(list(self._ahead.values()))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def _prepare(self, index: int) -> Any:
        return self._model.prepare(self._batches[index], self._role, self._media)

    def _start(self, index: int) -> None:
        if index >= len(self._batches) or index in self._ahead:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="mmbench-prepare")
        self._ahead[index] = self._pool.submit(self._prepare, index)
