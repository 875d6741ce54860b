"""RAVEL's feature extraction: calibration images through a vision encoder, captions through a language model,
cached per image and per caption in the project's embedding cache (`mmbench.data.embedding_cache`).

Cache entries are keyed by the model's identity (folder, layer, pooling, preprocessing, dtype and extractor
version) and each item's content: the SHA-256 of the image file's bytes (or of its `sample://` reference) and of
the caption text. A patch matrix (P, d) is stored as one float32 row with its shape in the entry's metadata.
Items the cache holds are not encoded again; the others are encoded in order, `batch_size` at a time, and
stored one pack per batch (a killed run keeps its finished batches).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from mmbench.builders.sources.calibration_pairs import image_digest, load_image
from mmbench.data.calibration import Calibration
from mmbench.data.embedding_cache import CacheRow, EmbeddingCache, model_key
from mmbench.models.feature_models import FeatureModelError, one_line

EXTRACTOR_VERSION = 2  # 1: the whole-array cache under evaluators/ravel (retired)
VISUAL_ROLE, TEXT_ROLE = "ravel-patches", "ravel-text"


def feature_cache(root: str | Path | None, kind: str, identity: dict[str, Any]) -> EmbeddingCache | None:
    """The cache of one feature model under `root`; None when caching is off (`root` empty)."""
    if not root:
        return None
    return EmbeddingCache(Path(root), model_key({"ravel": kind, "model": identity, "v": EXTRACTOR_VERSION}))


def _cached(cache: EmbeddingCache | None, role: str, keys: list[str]) -> dict[str, np.ndarray]:
    if cache is None:
        return {}
    out = {}
    for key, entry in cache.get_many(role, keys).items():
        shape = entry.meta.get("shape")
        out[key] = entry.vector.reshape(shape) if isinstance(shape, list) else entry.vector
    return out


def _encode_missing(keys: list[str], found: dict[str, np.ndarray], batch_size: int,
                    encode: Callable[[list[int]], np.ndarray], cache: EmbeddingCache | None, role: str,
                    progress: Callable[[int, int], None] | None = None) -> None:
    """Encode the items whose key is not in `found` (first occurrence of each key), batch by batch, into `found`."""
    todo, queued = [], set(found)
    for i, k in enumerate(keys):
        if k not in queued:
            queued.add(k)
            todo.append(i)
    for s in range(0, len(todo), batch_size):
        batch = todo[s: s + batch_size]
        out = encode(batch)
        rows = []
        for i, vec in zip(batch, out):
            found[keys[i]] = vec
            rows.append(CacheRow(keys[i], vec.reshape(-1), {}, {"shape": list(vec.shape)}))
        if cache is not None:
            cache.put_many(role, rows)
        if progress:
            progress(min(len(todo), s + batch_size), len(todo))
    if cache is not None and todo:
        cache.save_index(role)


def _run(model: Any, what: str, first: str, call: Callable[[], Any]) -> np.ndarray:
    try:
        out: np.ndarray = call().cpu().numpy()
    except (ValueError, TypeError, RuntimeError, KeyError, IndexError) as exc:
        raise FeatureModelError(f"{what} {model.name}: failed on the batch starting at {first}: {one_line(exc)}") from None
    return out


def extract_visual(encoder: Any, calibration: Calibration, *, batch_size: int = 16, cache_root: str | Path | None = None,
                   progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """(n, P, d) float32 patch tokens for the calibration images (cached per image)."""
    pairs = calibration.pairs
    cache = feature_cache(cache_root, "vision-patches", encoder.describe())
    keys = [image_digest(p) for p in pairs] if cache is not None else [str(i) for i in range(len(pairs))]
    found = _cached(cache, VISUAL_ROLE, keys)

    def encode(batch: list[int]) -> np.ndarray:
        images = [load_image(pairs[i]) for i in batch]
        first = f"pair {pairs[batch[0]].index} ({pairs[batch[0]].image})"
        return _run(encoder, "--encoder", first, lambda: encoder.patch_tokens(encoder.preprocess(images)))

    _encode_missing(keys, found, batch_size, encode, cache, VISUAL_ROLE, progress)
    return _stack([found[k] for k in keys], "--encoder", encoder.name)


def extract_text(model: Any, calibration: Calibration, *, batch_size: int = 32,
                 cache_root: str | Path | None = None) -> np.ndarray:
    """(n, d_t) float32 caption vectors (cached per caption)."""
    texts = calibration.texts
    cache = feature_cache(cache_root, "llm-hidden", model.describe())
    keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
    if cache is None:
        keys = [str(i) for i in range(len(texts))]
    found = _cached(cache, TEXT_ROLE, keys)

    def encode(batch: list[int]) -> np.ndarray:
        first = f"pair {calibration.pairs[batch[0]].index}"
        return _run(model, "--llm", first, lambda: model.encode([texts[i] for i in batch]))

    _encode_missing(keys, found, batch_size, encode, cache, TEXT_ROLE)
    return _stack([found[k] for k in keys], "--llm", model.name)


def _stack(rows: Sequence[np.ndarray], what: str, name: str) -> np.ndarray:
    shapes = sorted({r.shape for r in rows})
    if len(shapes) > 1:
        raise FeatureModelError(f"{what} {name}: items gave features of different shapes {shapes[:3]}")
    return np.stack(rows).astype(np.float32)
