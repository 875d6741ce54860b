"""The model protocol: what the runner needs from an embedding model.

An adapter declares a `ModelCard` (identity, modalities, context window, similarity) and
implements `encode(documents, role, media)`. The runner has already reduced each document
to what the model can see and middle-truncated it to `card.max_tokens`, measured with
`budget_tokenizer()` and `visual_tokens()`, so adapters never truncate inside a processor.

An adapter may also split `encode` in two: `prepare` (the CPU side: media read and resized, text
tokenised) and `encode_prepared` (the forward pass). The local executor then prepares the next
batch in a background thread while the model forwards the current one.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Sequence

import numpy as np

from mmbench.data.documents import Document, Segment
from mmbench.data.media import MediaStore
from mmbench.data.tokens import TextTokenizer, image_tokens

Role = Literal["query", "document"]


@dataclass(frozen=True)
class ModelCard:
    """Identity and capabilities of a model; `settings` holds everything that changes vectors."""

    name: str
    family: str
    modalities: frozenset[str]
    max_tokens: int | None
    similarity: Literal["cosine", "dot"] = "cosine"
    revision: str = "unknown"
    dim: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    notes: str = ""

    def identity(self) -> dict[str, Any]:
        """Everything that determines an embedding; keys the cache and goes into results."""
        d = asdict(self)
        d["modalities"] = sorted(self.modalities)
        d.pop("notes")
        return d


class EmbeddingModel(ABC):
    """Base class for adapters: documents in, one L2-comparable vector per document out."""

    card: ModelCard

    @abstractmethod
    def encode(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> np.ndarray:
        """Return a float32 array of shape (len(documents), dim)."""

    def prepare(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> Any:
        """The batch's model inputs made ready on the CPU, for `encode_prepared`; None (the default) where the
        adapter does everything in `encode`. An adapter that splits keeps `encode(d, r, m)` equal to
        `encode_prepared(prepare(d, r, m))`. `prepare` runs in a background thread while the previous batch is
        forwarded, so it may read the model's processor and tokenizer but must not change what a forward pass
        reads (and must not set `last_encode_info`: `encode_prepared` does, from what `prepare` returned)."""
        return None

    def encode_prepared(self, prepared: Any) -> np.ndarray:
        """Forward a batch `prepare` made ready: the same float32 array `encode` returns."""
        raise NotImplementedError(f"{type(self).__name__} prepares no batch ahead (its prepare returns None)")

    def budget_tokenizer(self) -> TextTokenizer | None:
        """Tokenizer in which `card.max_tokens` is measured (None: no text limit)."""
        return None

    def visual_tokens(self, width: int, height: int) -> int:
        """Tokens one image of this size costs the model."""
        return image_tokens(width, height)

    def video_tokens(self, n_frames: int, width: int, height: int) -> int:
        """Tokens `n_frames` frames of a video cost (models that merge frames in time override it)."""
        return n_frames * self.visual_tokens(width, height)

    def text_join_tokens(self) -> int:
        """Tokens the model's input puts between two consecutive text segments (its template's joiner); truncation
        pays for each join of a view from the window. 0: texts are passed as they are."""
        return 0

    def rendered_excess(self, segments: Sequence[Segment]) -> int:
        """Tokens by which a view of these segments, as the model really renders it, exceeds its window (0 where it
        fits, or where the adapter does not measure it). `model_view` truncates again by the excess, so
        what the model is given always fits, whatever the truncation's per-segment counts missed."""
        return 0

    def fit(self, documents: Sequence[Document], media: MediaStore | None) -> None:
        """Corpus-dependent models (BM25) see the candidate corpus first; embedders ignore it."""


class EncodeError(RuntimeError):
    """A model failed on specific documents; the message names them."""
