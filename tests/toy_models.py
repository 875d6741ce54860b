"""Small deterministic models for runner tests (real functions of the input, no weights)."""
from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from mmbench.data.documents import Document, Image, Text
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


class BatchSensitiveModel(HashingModel):
    """HashingModel whose vectors move in the last float bits with the batch's padded length, as a real
    padded forward pass does, and which takes a little time per batch (so a kill can land mid-run)."""

    def __init__(self, delay: float = 0.02, **kw) -> None:
        super().__init__(modalities=("text",), **kw)
        self.card = ModelCard(name="batch-sensitive", family="test", modalities=frozenset({"text"}), max_tokens=None,
                              dim=self.card.dim, settings={"dim": self.card.dim, "delay": delay})
        self._delay = delay

    def encode(self, documents: Sequence[Document], role, media) -> np.ndarray:
        import time

        time.sleep(self._delay)
        out = super().encode(documents, role, media)
        padded = max(len(d.text) for d in documents) * len(documents)
        out[:, 1] += np.float32(1e-6) * (padded % 97)  # batch composition shows in the scores' last digits
        return out


class UnloadableModel(HashingModel):
    """A model whose loading fails (as a missing weights folder does on a worker)."""

    def __init__(self, **kw) -> None:
        raise OSError("weights missing: /nowhere/model.safetensors")


class GarbageModel(HashingModel):
    """HashingModel whose second batch onward is garbage of one `kind` (a broken plugin or checkpoint)."""

    def __init__(self, kind: str = "nan", **kw) -> None:
        super().__init__(**kw)
        self.card = ModelCard(name="garbage-local", family="test", modalities=frozenset({"text", "image"}),
                              max_tokens=None, dim=self.card.dim, settings={"kind": kind})
        self.kind = kind

    def encode(self, documents: Sequence[Document], role, media):
        good = super().encode(documents, role, media)
        return good if len(self.calls) == 1 else garbage(self.kind, good)


def garbage(kind: str, good: np.ndarray):
    """`good` (n x d) spoilt the way `kind` names: what a broken model can hand back."""
    n, d = good.shape
    if kind == "nan":
        good[-1, 0] = np.nan
        return good
    if kind == "inf":
        good[0, 1] = np.inf
        return good
    if kind == "rows":
        return np.vstack([good, good[:1]])
    if kind == "rank":
        return good[:, :, None]
    if kind == "strings":
        return [[str(x) for x in row] for row in good]
    if kind == "ragged":
        return [list(row) for row in good[:-1]] + [list(good[-1, :-1])] if n > 1 else [list(good[0]), [1.0]]
    if kind == "dimension":
        return np.hstack([good, np.ones((n, 1), np.float32)])
    raise ValueError(kind)


class ThreadSensitiveModel(HashingModel):
    """HashingModel computed as a float32 torch forward pass whose reduction order follows torch's intra-op thread
    count, as MKL's and ATen's do on some CPUs (an Intel Xeon moved a score in its eighth digit between a local
    run and a Ray actor limited to one thread). `threads`: the count this copy sets when it loads, as Ray's
    OMP_NUM_THREADS or another machine's core count would."""

    def __init__(self, threads: int | None = None, **kw) -> None:
        import torch

        super().__init__(modalities=("text",), **kw)
        self.card = ModelCard(name="thread-sensitive", family="test", modalities=frozenset({"text"}), max_tokens=None,
                              dim=self.card.dim, settings={"dim": self.card.dim})
        if threads is not None:
            torch.set_num_threads(threads)

    def encode(self, documents: Sequence[Document], role, media) -> np.ndarray:
        import torch

        x = torch.from_numpy(super().encode(documents, role, media))
        mix = torch.linspace(0.1, 1.0, x.shape[1] ** 2, dtype=torch.float32).reshape(x.shape[1], x.shape[1]).sin()
        chunks = torch.get_num_threads()    # each "thread" sums its share of the inner dimension, then the shares add
        parts = [x[:, k::chunks] @ mix[k::chunks] for k in range(chunks)]
        out = parts[0]
        for p in parts[1:]:
            out = out + p
        return out.numpy()
