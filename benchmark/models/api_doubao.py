"""Doubao-Seed-1.6 embedding (ByteDance, Volcengine Ark): the proprietary 128K-window MEM of MMLongEmbed.

Protocol (Volcengine Ark API reference, "图文向量化 API", https://www.volcengine.com/docs/82379/1409290):
``POST {base_url}/embeddings/multimodal`` with ``{"model", "input": [parts], "encoding_format", "dimensions"}``,
where each part is ``{"type": "text", "text": ...}`` or ``{"type": "image_url", "image_url": {"url": ...}}``
(an https URL or a ``data:image/<format>;base64,...`` URL whose declared format matches the bytes). The
whole `input` list is embedded into ONE vector (``{"data": {"embedding": [...]}}``), so a document is one
request with its parts in reading order: interleaved text and images, as the endpoint takes them.
mteb 2.26's wrapper for ``Bytedance/Seed1.6-embedding`` (an independent reference) builds the same body.

What the service does not publish, mmbench states as stand-ins (recorded in the model card):
- the tokenizer: text budgets are measured with the Qwen3 tokenizer (offline here), so truncation at
  the 128K window is approximate in the service's own tokens;
- image cost: the unified count (⌈H/32⌉·⌈W/32⌉) is used for the budget;
- video: frames are sent as image parts in order (the endpoint also accepts ``video_url`` files, but
  pool sets store 1-FPS frames, not files).
The service refuses images outside [10, 6000] px per side or beyond a 1:100 aspect ratio; such an image
is reported as an error naming the document before any request is sent.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from mmbench.data.documents import Document, Image, Text, Video
from mmbench.data.media import MediaStore
from mmbench.common.http_client import URLAuth, api_key, public_url
from mmbench.models.api_common import APIEmbeddingModel, bad_response, client_from_options, data_url
from mmbench.models.base import EncodeError, ModelCard, Role

ARK_URL = "https://ark.cn-beijing.volces.com/api/v3"
DEFAULT_MODEL = "doubao-embedding-vision-250615"
WINDOW = 128_000            # the seed's stated context window for Doubao-Seed-1.6
DIMENSIONS = (2048, 1024)   # the output sizes the service offers (2048 is its default)
MIN_SIDE, MAX_SIDE, MAX_ASPECT = 10, 6000, 100.0


class DoubaoEmbeddingModel(APIEmbeddingModel):
    """One request per document: its text, images and frames as interleaved parts of one `input`."""

    def __init__(self, model: str = DEFAULT_MODEL, base_url: str | None = None, api_key_env: str = "ARK_API_KEY",
                 dimensions: int | None = None, query_prefix: str = "", document_prefix: str = "",
                 max_tokens: int | None = WINDOW, timeout: float = 60.0, max_attempts: int = 5,
                 max_concurrency: int = 4, requests_per_second: float | None = None, cache_dir: str | None = None,
                 name: str | None = None, revision: str | None = None, **_: Any) -> None:
        if dimensions is not None and dimensions not in DIMENSIONS:
            raise ValueError(f"dimensions must be one of {DIMENSIONS} for {model} (got {dimensions})")
        self._auth = URLAuth.of((base_url or os.environ.get("ARK_BASE_URL") or ARK_URL).rstrip("/"))
        self.base_url = self._auth.url
        self._key = self._auth.key or api_key(api_key_env, required=self.base_url == ARK_URL and not self._auth.basic)
        self.model, self.dimensions = model, dimensions
        self.prefixes = {"query": query_prefix, "document": document_prefix}
        self.client = client_from_options(timeout, max_attempts, max_concurrency, requests_per_second)
        from mmbench.data.tokens import UnifiedTokenCounter

        self._tokenizer = UnifiedTokenCounter.default().tokenizer
        self._cache_dir = cache_dir
        budget = None if max_tokens is None else max(max_tokens - self._prefix_tokens(), 0)
        self.card = ModelCard(
            name=name or "doubao-seed-1.6-embedding", family="api:doubao-multimodal-embeddings",
            modalities=frozenset({"text", "image", "video"}), max_tokens=budget, similarity="cosine",
            revision=revision or "api", dim=dimensions or DIMENSIONS[0],
            settings={"model": model, "base_url": public_url(self.base_url), "dimensions": dimensions,
                      "prefixes": self.prefixes, "images": "image_url parts with data URLs, in reading order",
                      "video": "1-FPS frames as image parts", "normalize": "l2",
                      "budget_tokenizer": "qwen3 (stand-in: the service's tokenizer is not published)"},
            notes=("remote model: its version can change behind the same name. Text budgets are measured with "
                   "the Qwen3 tokenizer as a stand-in, image budgets with the unified count."),
        )

    def _prefix_tokens(self) -> int:
        return max((len(self._tokenizer.encode(p)) for p in self.prefixes.values() if p), default=0)

    def _headers(self) -> dict[str, str]:
        return self._auth.headers({"Authorization": f"Bearer {self._key}"} if self._key else {})

    def _embed(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> list[list[float]]:
        payloads = [self.payload(doc, role, media) for doc in documents]  # bad images fail before any request
        jobs = list(zip(documents, payloads))
        return self.client.map(self._call, jobs)

    def payload(self, doc: Document, role: Role, media: MediaStore | None) -> dict[str, Any]:
        """The request body for one document (public so tests can compare it with mteb's wrapper)."""
        parts: list[dict[str, Any]] = []
        prefix = self.prefixes[role]
        if prefix:
            parts.append({"type": "text", "text": prefix})
        for seg in doc.segments:
            if isinstance(seg, Text):
                if seg.text:
                    parts.append({"type": "text", "text": seg.text})
            elif isinstance(seg, Image):
                parts.append(self._image_part(media, seg.ref, doc.id))
            elif isinstance(seg, Video):
                parts.extend(self._image_part(media, ref, doc.id) for ref in seg.frames)
        if not parts:
            raise EncodeError(f"document {doc.id!r} is empty: nothing to send to {self.model}")
        body: dict[str, Any] = {"model": self.model, "input": parts, "encoding_format": "float"}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        return body

    def _image_part(self, media: MediaStore | None, ref: str, doc_id: str) -> dict[str, Any]:
        if media is not None and media.path(ref).is_file():
            _check_image_size(media.path(ref), doc_id)
        return {"type": "image_url", "image_url": {"url": data_url(media, ref, doc_id)}}

    def _call(self, job: tuple[Document, dict[str, Any]]) -> list[float]:
        doc, payload = job
        body = self.client.post_json(f"{self.base_url}/embeddings/multimodal", payload, self._headers())
        data = body.get("data") if isinstance(body, dict) else None
        if isinstance(data, list) and len(data) == 1:  # tolerate the list form some gateways return
            data = data[0]
        if not isinstance(data, dict) or "embedding" not in data:
            what = f"{len(data)} embeddings for one document" if isinstance(data, list) else "no data.embedding"
            raise bad_response(self.card.name, doc.id, what)
        return data["embedding"]


def _check_image_size(path, doc_id: str) -> None:
    from PIL import Image as PILImage

    with PILImage.open(path) as im:
        w, h = im.size
    if min(w, h) < MIN_SIDE or max(w, h) > MAX_SIDE or max(w, h) / max(min(w, h), 1) > MAX_ASPECT:
        raise EncodeError(f"document {doc_id!r}: image {path.name} is {w}x{h} px; the Doubao endpoint takes sides of "
                          f"{MIN_SIDE}-{MAX_SIDE} px and aspect ratios up to 1:{MAX_ASPECT:g}")
