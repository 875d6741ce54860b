"""Encoding one batch (with per-item isolation of failures), and the in-process executor."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from mmbench.common.progress import progress_bar
from mmbench.data.documents import Document
from mmbench.data.media import MediaStore
from mmbench.models.base import EmbeddingModel, Role
from mmbench.models.output_check import BadModelOutput, batch_rows
from mmbench.running.executors.prefetch import Prefetcher
from mmbench.common.address_limit import is_out_of_memory
from mmbench.running.executors.threads import encode_threads

log = logging.getLogger(__name__)


@dataclass
class BatchResult:
    """What one batch gave: (vector, adapter info) per view, (None, None) for a view that failed."""

    index: int
    rows: list[tuple[Any, dict[str, Any] | None]]
    encoded: int = 0
    failures: dict[str, str] = field(default_factory=dict)


def encode_batch(model: EmbeddingModel, views: Sequence[Document], role: Role, media: MediaStore | None,
                 index: int = 0, prepared: Any = None, before_retry: Callable[[], None] | None = None) -> BatchResult:
    """Encode `views` in one call; if that fails, retry them one by one so a bad document fails alone.

    `prepared`: the batch's inputs from `model.prepare` (forwarded with `model.encode_prepared`); None encodes
    with `model.encode`. `before_retry` runs before the one-by-one retry (the prefetcher waits for its thread).
    Every forward pass runs with torch's intra-op thread count at `ENCODE_THREADS` (`executors.threads`), here
    and in a Ray actor alike, so the vectors do not depend on the executor or on the caller's thread count."""
    out = BatchResult(index, [])
    with encode_threads():
        out.rows = _encode(model, list(views), role, media, out, prepared, before_retry)
    return out


def _encode(model: EmbeddingModel, views: list[Document], role: Role, media: MediaStore | None,
            out: BatchResult, prepared: Any = None, before_retry: Callable[[], None] | None = None
            ) -> list[tuple[Any, dict[str, Any] | None]]:
    try:
        vectors = model.encode(views, role, media) if prepared is None else model.encode_prepared(prepared)
        rows = batch_rows(model.card.name, vectors, views, role, model.card.dim)
        out.encoded += len(views)
    except BadModelOutput:
        raise   # garbage from the model is no fault of one document: the run stops at the first bad batch
    except Exception as exc:  # noqa: BLE001 - isolate the failing documents instead of losing the batch
        if before_retry is not None:
            before_retry()
        if len(views) == 1:
            if is_out_of_memory(exc):  # one document that does not fit stops the run as memory, not as its fault
                raise

            out.failures[views[0].id] = f"{type(exc).__name__}: {exc}"
            log.error("encoding %s %s failed: %s", role, views[0].id, exc)
            return [(None, None)]
        return [_encode(model, [v], role, media, out)[0] for v in views]
    info = getattr(model, "last_encode_info", None)
    infos = info if isinstance(info, list) and len(info) == len(views) else [None] * len(views)
    return list(zip(rows, infos))


class LocalExecutor:
    """Every batch in this process, in order, with the driver's model; the next batch's inputs are prepared in a
    background thread meanwhile where the model splits its `encode` (`mmbench.running.executors.prefetch`)."""

    name = "local"

    def encode(self, model: EmbeddingModel, batches: Sequence[Sequence[Document]], role: Role,
               media: MediaStore | None, progress: bool = True) -> Iterator[BatchResult]:
        ahead = Prefetcher(model, batches, role, media)
        try:
            for i, views in enumerate(progress_bar(batches, unit="batch", disable=not progress or not batches,
                                                   desc="encode queries" if role == "query" else "encode documents")):
                yield encode_batch(model, views, role, media, i, ahead.take(i), ahead.settle)
        finally:
            ahead.close()

    def close(self) -> None:
        pass
