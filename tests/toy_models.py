"""Small deterministic models for runner tests (real functions of the input, no weights)."""
from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from mmbench.documents import Document, Image, Text
from mmbench.models.base import EmbeddingModel, ModelCard


class HashingModel(EmbeddingModel):
    """Text: hashed bag of words; images: mean colour of the loaded pixels. Counts its calls."""

    def __init__(self, dim: int = 64, modalities=("text", "image"), max_tokens: int | None = None) -> None:
        self.card = ModelCard(name="hashing", family="test", modalities=frozenset(modalities), max_tokens=max_tokens,
                              dim=dim, settings={"dim": dim})
        self.calls: list[int] = []

    def encode(self, documents: Sequence[Document], role, media) -> np.ndarray:
        self.calls.append(len(documents))
        out = np.zeros((len(documents), self.card.dim), dtype=np.float32)
        for i, d in enumerate(documents):
            for s in d.segments:
                if isinstance(s, Text):
                    for w in s.text.lower().split():
                        out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % (self.card.dim - 3)] += 1
                elif isinstance(s, Image):
                    pixels = np.asarray(media.load_image(s.ref, item=d.id), dtype=np.float32)
                    out[i, -3:] += pixels.reshape(-1, 3).mean(0) / 255
        out[:, 0] += 1e-3
        return out
