"""The Gemini embedding API (`batchEmbedContents`), with text and inline image parts.

Each document is one `content` whose parts follow its reading order: text parts and
`inline_data` images. Queries and documents use the RETRIEVAL_QUERY / RETRIEVAL_DOCUMENT task
types. The key goes in the `x-goog-api-key` header, never in the URL.
"""
from __future__ import annotations

import base64
from typing import Any, Sequence

from mmbench.data.documents import Document, Image, Text
from mmbench.data.media import MediaStore
from mmbench.common.http_client import URLAuth, api_key
from mmbench.models.api_common import (APIEmbeddingModel, bad_response, client_from_options, image_bytes, load_text_tokenizer,
                         tokenizer_fingerprint)
from mmbench.models.base import EncodeError, ModelCard, Role
from mmbench.common.http_client import public_url

GEMINI_URL = "https://generativelanguage.googleapis.com/v1beta"
TASK_TYPES = {"query": "RETRIEVAL_QUERY", "document": "RETRIEVAL_DOCUMENT"}
# Text-only embedding models: the API counts only the text parts of their content, so images sent to them
# would be ignored without an error while the results claimed the model saw them.
TEXT_ONLY_MODELS = frozenset({"gemini-embedding-001", "text-embedding-004", "embedding-001"})


def takes_images(model: str) -> bool:
    """Whether `model` embeds image parts (False for the known text-only Gemini embedding models)."""
    return model.removeprefix("models/") not in TEXT_ONLY_MODELS


class GeminiEmbeddingModel(APIEmbeddingModel):
    """Gemini embeddings; images are sent as inline parts when `images` is on (default: multimodal models)."""

    def __init__(self, model: str = "gemini-embedding-001", base_url: str | None = None,
                 api_key_env: str = "GEMINI_API_KEY", dimensions: int | None = None, batch_size: int = 32,
                 images: bool | None = None, max_tokens: int | None = 2048, tokenizer: str | None = None,
                 timeout: float = 60.0, max_attempts: int = 5, max_concurrency: int = 4,
                 requests_per_second: float | None = None, cache_dir: str | None = None, name: str | None = None,
                 revision: str | None = None, **_: Any) -> None:
        self._auth = URLAuth.of((base_url or GEMINI_URL).rstrip("/"))
        self.base_url = self._auth.url
        self._key = self._auth.key or api_key(api_key_env, required=self.base_url == GEMINI_URL and not self._auth.basic)
        images = takes_images(model) if images is None else bool(images)
        self.model, self.dimensions, self.batch_size, self.images = model, dimensions, batch_size, images
        self.client = client_from_options(timeout, max_attempts, max_concurrency, requests_per_second)
        self._tokenizer = load_text_tokenizer(tokenizer)
        self._cache_dir = cache_dir
        self.card = ModelCard(
            name=name or f"gemini:{model}", family="api:gemini-embedding",
            modalities=frozenset({"text", "image"} if images else {"text"}),
            max_tokens=max_tokens if self._tokenizer else None, similarity="cosine", revision=revision or "api",
            dim=dimensions,
            settings={"model": model, "base_url": public_url(self.base_url), "dimensions": dimensions,
                      "task_types": TASK_TYPES, "images": "inline_data parts" if images else "none",
                      "normalize": "l2", "budget_tokenizer": tokenizer_fingerprint(tokenizer)},
            notes=("remote model: its version can change behind the same name. Parts keep reading order; "
                   "images are sent only to multimodal models (gemini-embedding-001 and the other text-only "
                   "models see text only, and images are recorded as unseen). Without a tokenizer file the "
                   "runner cannot measure text, so documents are not truncated."),
        )

    def _embed(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> list[list[float]]:
        jobs = [list(range(i, min(i + self.batch_size, len(documents))))
                for i in range(0, len(documents), self.batch_size)]
        results = self.client.map(lambda idx: self._call(idx, documents, role, media), jobs)
        return [v for vecs in results for v in vecs]

    def _parts(self, doc: Document, media: MediaStore | None) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        for seg in doc.segments:
            if isinstance(seg, Text):
                parts.append({"text": seg.text})
            elif isinstance(seg, Image):
                if not self.images:
                    raise EncodeError(f"document {doc.id!r} has images but images=False for this model")
                data, mime = image_bytes(media, seg.ref, doc.id)
                parts.append({"inline_data": {"mime_type": mime, "data": base64.b64encode(data).decode("ascii")}})
        return parts or [{"text": ""}]

    def _call(self, idx: list[int], documents: Sequence[Document], role: Role,
              media: MediaStore | None) -> list[Any]:
        requests = []
        for i in idx:
            req: dict[str, Any] = {"model": f"models/{self.model}", "taskType": TASK_TYPES[role],
                                   "content": {"parts": self._parts(documents[i], media)}}
            if self.dimensions:
                req["outputDimensionality"] = self.dimensions
            requests.append(req)
        headers = self._auth.headers({"x-goog-api-key": self._key} if self._key else {})
        body = self.client.post_json(f"{self.base_url}/models/{self.model}:batchEmbedContents",
                                     {"requests": requests}, headers)
        first = documents[idx[0]].id
        items = body.get("embeddings") if isinstance(body, dict) else None
        if not isinstance(items, list) or len(items) != len(idx):
            got = f"{len(items)} items" if isinstance(items, list) else "none"
            raise bad_response(self.card.name, first, f"expected an 'embeddings' list of {len(idx)} items, got {got}")
        try:
            return [item["values"] for item in items]
        except (KeyError, TypeError) as exc:
            raise bad_response(self.card.name, first, f"malformed item ({type(exc).__name__}: {exc})") from None
