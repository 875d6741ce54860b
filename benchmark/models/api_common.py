"""What the API embedders share: keys from the environment, an optional embedding cache, images as data.

Subclasses implement `_embed(documents, role, media)` for the documents not found in the cache.
Keys are read from environment variables at construction and kept out of the model card,
results and logs.
"""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mmbench.data.documents import Document
from mmbench.data.media import MediaError, MediaStore
from mmbench.data.tokens import TextTokenizer
from mmbench.models.base import EmbeddingModel, EncodeError, Role
from mmbench.models.output_check import BadModelOutput, batch_rows
from mmbench.common.http_client import HttpClient, RetryPolicy

MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp", ".gif": "image/gif"}


def image_bytes(media: MediaStore | None, ref: str, item: str) -> tuple[bytes, str]:
    """The stored file's bytes and MIME type (sent as-is: no re-encoding changes what the server sees)."""
    if media is None:
        raise EncodeError(f"document {item!r} has images but no media store was given")
    path = media.path(ref)
    if not path.is_file():
        raise EncodeError(f"missing media file {path} (referenced by {item})")
    try:
        data = media.read_bytes(ref, item)  # verified against its content address
    except MediaError as exc:
        raise EncodeError(str(exc)) from None
    return data, MIME.get(path.suffix.lower(), "image/png")


def data_url(media: MediaStore | None, ref: str, item: str) -> str:
    data, mime = image_bytes(media, ref, item)
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def load_text_tokenizer(spec: str | None) -> TextTokenizer | None:
    """A budget tokenizer from a local tokenizer.json path, or None (then the runner does not cut text)."""
    if not spec:
        return None
    path = Path(spec)
    if not path.is_file():
        raise ValueError(f"tokenizer file {path} does not exist (give the served model's tokenizer.json)")
    from mmbench.data.tokens import Qwen3Tokenizer

    return Qwen3Tokenizer(path)  # a generic tokenizer.json reader: encode/decode without special tokens


def tokenizer_fingerprint(spec: str | None) -> str | None:
    """A content hash of the budget tokenizer file: it decides where texts are cut, so it keys the cache."""
    if not spec:
        return None
    import hashlib

    return hashlib.sha256(Path(spec).read_bytes()).hexdigest()[:16]


def client_from_options(timeout: float, max_attempts: int, max_concurrency: int,
                        requests_per_second: float | None) -> HttpClient:
    return HttpClient(retry=RetryPolicy(max_attempts=max_attempts), timeout=timeout,
                      max_concurrency=max_concurrency, requests_per_second=requests_per_second)


class APIEmbeddingModel(EmbeddingModel):
    """Base for remote embedders: cache look-up, call, shape check, L2 normalisation."""

    client: HttpClient
    _tokenizer: TextTokenizer | None = None
    _cache_dir: str | None = None

    def budget_tokenizer(self) -> TextTokenizer | None:
        return self._tokenizer

    def _embed(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> list[list[float]]:
        raise NotImplementedError

    def encode(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> np.ndarray:
        cache = self._cache()
        out: list[np.ndarray | None] = [None] * len(documents)
        todo = []
        hashes = [doc.content_hash() for doc in documents] if cache else []
        hits = cache.get_many(role, hashes) if cache else {}
        for i in range(len(documents)):
            hit = hits.get(hashes[i]) if cache else None
            if hit is not None:
                out[i] = hit.vector
            else:
                todo.append(i)
        if todo:
            asked = [documents[i] for i in todo]
            rows = batch_rows(self.card.name, self._embed(asked, role, media), asked, role, self.card.dim)
            for i, vec in zip(todo, rows):
                out[i] = vec
            if cache:  # one pack for the call's new vectors
                from mmbench.data.embedding_cache import CacheRow

                cache.put_many(role, [CacheRow(hashes[i], out[i], {}) for i in todo])
                cache.save_index(role)
        mat = np.stack(out).astype(np.float32)
        return mat / np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)

    def _cache(self):
        if not self._cache_dir:
            return None
        from mmbench.data.embedding_cache import EmbeddingCache, model_key

        # A folder of its own: entries here are keyed by the view's hash and carry no seen-record, so they must
        # never be read by the runner's cache (keyed by whole documents) when both are given the same folder.
        return EmbeddingCache(Path(self._cache_dir) / "api-views", model_key(self.card.identity()))


def bad_response(model_name: str, first: str, what: str) -> BadModelOutput:
    """A reply that holds no usable list of embeddings: garbage from the service, which stops the run."""
    return BadModelOutput(f"model {model_name!r} gave an unusable response for the batch starting at {first!r}: {what}; "
                          "the run stops here")


def batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i:i + size] for i in range(0, len(items), max(1, size))]
