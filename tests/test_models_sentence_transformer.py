"""The sentence-transformers adapter, split into `prepare` (tokenise) and `encode_prepared` (forward) so the local
executor can tokenise the next batch during this one's forward pass, gives stock `SentenceTransformer.encode`'s
vectors bit for bit, whatever was prepared in between."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")

from mmbench.data.documents import Document, Text  # noqa: E402
from mmbench.models.sentence_transformer import SentenceTransformerModel, packaged_minilm_path  # noqa: E402

TEXTS = ["a cat sits on the mat", "", "the quick brown fox " * 40, "short", "an image of a dog running on a beach " * 3]


def _docs(texts: list[str], prefix: str = "d") -> list[Document]:
    return [Document(f"{prefix}{i}", [Text(t)]) for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def prompted():
    path = packaged_minilm_path()
    if path is None:
        pytest.skip("the packaged all-MiniLM-L6-v2 is not installed")
    return SentenceTransformerModel(str(path), name="minilm-prompted", query_prompt="query: ")


def test_vectors_are_stock_sentence_transformers_bit_for_bit(prompted):
    stock = prompted._model
    for role, prefix in (("document", ""), ("query", "query: ")):
        got = prompted.encode(_docs(TEXTS), role, None)
        want = stock.encode([prefix + t for t in TEXTS], batch_size=len(TEXTS), convert_to_numpy=True,
                            normalize_embeddings=True, show_progress_bar=False)
        assert got.dtype == np.float32 and got.shape == (len(TEXTS), 384)
        assert np.array_equal(got, want), role


def test_a_batch_prepared_ahead_forwards_to_the_same_vectors(prompted):
    first, second = _docs(TEXTS[:3], "a"), _docs(TEXTS[2:], "b")
    ready_first = prompted.prepare(first, "document", None)
    ready_second = prompted.prepare(second, "document", None)  # the executor prepares the next batch this early
    assert np.array_equal(prompted.encode_prepared(ready_first), prompted.encode(first, "document", None))
    assert np.array_equal(prompted.encode_prepared(ready_second), prompted.encode(second, "document", None))
    assert prompted.encode([], "document", None).shape == (0, 384)
