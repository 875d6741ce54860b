"""OpenAI-compatible `/v1/embeddings` (OpenAI, vLLM, most hosted services).

Text-only documents go in batches through `input`. A document with images goes alone through
the chat-style `messages` form vLLM's embedding endpoint accepts (images as data URLs); servers
that do not accept it answer with an error, which is reported, never silently dropped.
"""
from __future__ import annotations

from typing import Any, Sequence

from mmbench.data.documents import Document, Image, Text
from mmbench.data.media import MediaStore
from mmbench.common.http_client import URLAuth, api_key
from mmbench.models.api_common import (APIEmbeddingModel, bad_response, batches, client_from_options, data_url, load_text_tokenizer,
                         tokenizer_fingerprint)
from mmbench.models.base import EncodeError, ModelCard, Role
from mmbench.common.http_client import public_url

OPENAI_URL = "https://api.openai.com/v1"


class OpenAIEmbeddingModel(APIEmbeddingModel):
    """Embeddings from any server speaking the OpenAI embeddings protocol."""

    def __init__(self, model: str = "text-embedding-3-small", base_url: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", dimensions: int | None = None, batch_size: int = 64,
                 images: bool | None = None, query_prefix: str = "", document_prefix: str = "",
                 max_tokens: int | None = 8191, tokenizer: str | None = None, timeout: float = 60.0,
                 max_attempts: int = 5, max_concurrency: int = 4, requests_per_second: float | None = None,
                 cache_dir: str | None = None, name: str | None = None, revision: str | None = None,
                 **_: Any) -> None:
        import os

        self._auth = URLAuth.of((base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL).rstrip("/"))
        self.base_url = self._auth.url
        self._key = self._auth.key or api_key(api_key_env, required=self.base_url == OPENAI_URL and not self._auth.basic)
        if images is None:  # OpenAI's own embedding models are text only; other servers may take images
            images = self.base_url != OPENAI_URL
        self.model, self.dimensions, self.batch_size, self.images = model, dimensions, batch_size, images
        self.prefixes = {"query": query_prefix, "document": document_prefix}
        self.client = client_from_options(timeout, max_attempts, max_concurrency, requests_per_second)
        self._tokenizer = load_text_tokenizer(tokenizer)
        self._cache_dir = cache_dir
        self.card = ModelCard(
            name=name or f"openai:{model}", family="api:openai-embeddings",
            modalities=frozenset({"text", "image"} if images else {"text"}),
            max_tokens=self._text_budget(max_tokens), similarity="cosine", revision=revision or "api",
            dim=dimensions,
            settings={"model": model, "base_url": public_url(self.base_url), "dimensions": dimensions,
                      "prefixes": self.prefixes, "images": "chat messages with data URLs" if images else "none",
                      "normalize": "l2", "budget_tokenizer": tokenizer_fingerprint(tokenizer)},
            notes=("remote model: its version can change behind the same name. Text is joined in reading order; "
                   "documents with images use the vLLM-style messages form. Without a tokenizer file the runner "
                   "cannot measure text, so documents are not truncated (the server may reject long inputs)."),
        )

    def _text_budget(self, max_tokens: int | None) -> int | None:
        """The window left for a document once the longer of the two prefixes is sent in front of it."""
        if self._tokenizer is None or max_tokens is None:
            return None
        prefix = max(len(self._tokenizer.encode(p)) if p else 0 for p in self.prefixes.values())
        return max(max_tokens - prefix, 0)

    def _headers(self) -> dict[str, str]:
        return self._auth.headers({"Authorization": f"Bearer {self._key}"} if self._key else {})

    def _embed(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> list[list[float]]:
        prefix = self.prefixes[role]
        visual = [i for i, d in enumerate(documents) if any(isinstance(s, Image) for s in d.segments)]
        if visual and not self.images:
            raise EncodeError(f"document {documents[visual[0]].id!r} has images but images=False for this model")
        plain = [i for i in range(len(documents)) if i not in set(visual)]
        jobs: list[tuple[list[int], dict[str, Any]]] = []
        for chunk in batches(plain, self.batch_size):
            jobs.append((list(chunk), self._payload(input=[prefix + documents[i].text for i in chunk])))
        for i in visual:
            jobs.append(([i], self._payload(messages=[{"role": "user", "content": self._content(
                documents[i], prefix, media)}])))
        results = self.client.map(lambda job: self._call(job, documents), jobs)
        out: list[list[float]] = [[] for _ in documents]
        for (idx, _), vecs in zip(jobs, results):
            for i, v in zip(idx, vecs):
                out[i] = v
        return out

    def _payload(self, **body: Any) -> dict[str, Any]:
        payload = {"model": self.model, "encoding_format": "float", **body}
        if self.dimensions:
            payload["dimensions"] = self.dimensions
        return payload

    def _content(self, doc: Document, prefix: str, media: MediaStore | None) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = [{"type": "text", "text": prefix}] if prefix else []
        for seg in doc.segments:
            if isinstance(seg, Text):
                parts.append({"type": "text", "text": seg.text})
            elif isinstance(seg, Image):
                parts.append({"type": "image_url", "image_url": {"url": data_url(media, seg.ref, doc.id)}})
        return parts

    def _call(self, job: tuple[list[int], dict[str, Any]], documents: Sequence[Document]) -> list[Any]:
        idx, payload = job
        body = self.client.post_json(f"{self.base_url}/embeddings", payload, self._headers())
        first = documents[idx[0]].id
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) != len(idx):
            got = f"{len(data)} items" if isinstance(data, list) else "none"
            raise bad_response(self.card.name, first, f"expected a 'data' list of {len(idx)} items, got {got}")
        try:
            indexes = [d.get("index") for d in data]
            if all(i is None for i in indexes):  # no index given: the inputs' order
                return [d["embedding"] for d in data]
            whole = all(isinstance(i, int) and not isinstance(i, bool) for i in indexes)
            if not whole or sorted(indexes) != list(range(len(idx))):
                raise ValueError(f"the 'index' fields {indexes[:8]}{' ...' if len(indexes) > 8 else ''} are not "
                                 f"0..{len(idx) - 1}, each once (duplicated, missing or out of range)")
            by_index = dict(zip(indexes, data))
            return [by_index[i]["embedding"] for i in range(len(idx))]
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise bad_response(self.card.name, first, f"malformed item ({type(exc).__name__}: {exc})") from None
