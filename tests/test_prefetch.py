"""The local executor prepares batch i + 1 in a background thread while batch i is forwarded (issue 38), gives the
vectors and failures the plain path gives, and never tokenises on two threads at once."""
from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np
import pytest

from mmbench.data.documents import Document, Text
from mmbench.models.base import EmbeddingModel, ModelCard
from mmbench.running.executors import LocalExecutor, encode_batch
from mmbench.running.executors.prefetch import Prefetcher


CARD = ModelCard("split", "test", frozenset({"text"}), None, dim=3)


def _vector(text: str) -> np.ndarray:
    v = np.array([len(text), sum(map(ord, text)) % 97, 1.0], dtype=np.float32)
    return v / np.linalg.norm(v)


class SplitModel(EmbeddingModel):
    """Prepares on any thread, forwards on the caller's; checks that nothing prepares while it tokenises itself."""

    card = CARD

    def __init__(self, wait_for_next: bool = False, n_batches: int = 0) -> None:
        self.started = [threading.Event() for _ in range(n_batches + 1)]
        self.wait_for_next = wait_for_next
        self.overlapped: list[bool] = []
        self.prepare_threads: list[str] = []
        self.preparing = 0
        self.overlapping_plain_encodes = 0
        self.batch_of: dict[str, int] = {}

    def prepare(self, documents: Sequence[Document], role: Any, media: Any) -> Any:
        self.preparing += 1
        try:
            index = self.batch_of.get(documents[0].id, -1) if documents else -1
            if 0 <= index < len(self.started):
                self.started[index].set()
            self.prepare_threads.append(threading.current_thread().name)
            if any(d.text == "bad" for d in documents):
                raise ValueError("cannot tokenise 'bad'")
            return [(d.text, index) for d in documents]
        finally:
            self.preparing -= 1

    def encode_prepared(self, prepared: Any) -> np.ndarray:
        index = prepared[0][1] if prepared else -1
        if self.wait_for_next and index + 1 < len(self.started) - 1:
            # the next batch's preparation must start while this batch is still being forwarded
            self.overlapped.append(self.started[index + 1].wait(timeout=10))
        if any(text == "boom" for text, _ in prepared):
            raise RuntimeError("forward failed on 'boom'")
        return np.stack([_vector(text) for text, _ in prepared]) if prepared else np.zeros((0, 3), np.float32)

    def encode(self, documents: Sequence[Document], role: Any, media: Any) -> np.ndarray:
        if self.preparing:
            self.overlapping_plain_encodes += 1
        return self.encode_prepared(self.prepare(documents, role, media))


class PlainModel(SplitModel):
    def prepare(self, documents: Sequence[Document], role: Any, media: Any) -> Any:
        return None

    def encode(self, documents: Sequence[Document], role: Any, media: Any) -> np.ndarray:
        return np.stack([_vector(d.text) for d in documents])


def _batches(texts: list[list[str]]) -> list[list[Document]]:
    return [[Document(f"b{i}-{j}", [Text(t)]) for j, t in enumerate(batch)] for i, batch in enumerate(texts)]


def _run(model: EmbeddingModel, batches: list[list[Document]]) -> list[Any]:
    return list(LocalExecutor().encode(model, batches, "document", None, progress=False))


def _rows(results: list[Any]) -> list[list[Any]]:
    return [[None if vec is None else vec.tolist() for vec, _ in r.rows] for r in results]


def test_next_batch_is_prepared_while_this_one_is_forwarded():
    batches = _batches([["a long text", "mid"], ["xy", "z"], ["q"], ["last one"]])
    model = SplitModel(wait_for_next=True, n_batches=len(batches))
    model.batch_of = {d.id: i for i, b in enumerate(batches) for d in b}
    results = _run(model, batches)
    assert model.overlapped == [True, True, True]
    assert "mmbench-prepare" in " ".join(model.prepare_threads)  # batches after the first: on the background thread
    plain = [encode_batch(PlainModel(), b, "document", None, i) for i, b in enumerate(batches)]
    assert _rows(results) == _rows(plain) and [r.index for r in results] == [0, 1, 2, 3]
    assert all(r.encoded == len(b) and not r.failures for r, b in zip(results, batches))


def test_a_batch_that_cannot_be_prepared_is_encoded_plainly_and_names_its_bad_view():
    batches = _batches([["fine"], ["ok", "bad", "good"], ["after"]])
    model = SplitModel()
    results = _run(model, batches)
    assert list(results[1].failures) == ["b1-1"] and "cannot tokenise" in results[1].failures["b1-1"]
    assert [vec is None for vec, _ in results[1].rows] == [False, True, False]
    assert results[1].encoded == 2 and results[2].encoded == 1 and results[0].encoded == 1
    assert model.overlapping_plain_encodes == 0


def test_a_failed_forward_is_retried_view_by_view_after_the_background_thread_settles():
    batches = _batches([["x", "boom", "y"], ["next", "batch"], ["third"]])
    model = SplitModel()
    results = _run(model, batches)
    assert list(results[0].failures) == ["b0-1"] and "forward failed" in results[0].failures["b0-1"]
    assert results[0].rows[0][0].tolist() == _vector("x").tolist() and results[1].encoded == 2
    assert model.overlapping_plain_encodes == 0  # the retry never tokenised beside the background thread


def test_a_model_that_does_not_split_starts_no_thread():
    batches = _batches([["a"], ["b", "c"]])
    ahead = Prefetcher(PlainModel(), batches, "document", None)
    assert ahead.take(0) is None and ahead.take(1) is None and ahead._pool is None
    ahead.close()
    assert _rows(_run(PlainModel(), batches)) == [[_vector("a").tolist()], [_vector("b").tolist(), _vector("c").tolist()]]


def test_garbage_from_a_prepared_forward_still_stops_the_run():
    from mmbench.models.output_check import BadModelOutput

    class NaNModel(SplitModel):
        def encode_prepared(self, prepared: Any) -> np.ndarray:
            return np.full((len(prepared), 3), np.nan, dtype=np.float32)

    with pytest.raises(BadModelOutput):
        _run(NaNModel(), _batches([["a"], ["b"]]))
