"""On-disk embedding cache: one file per (model identity, role, document content).

Entries are written atomically (temporary file + rename), so a run killed at any point
leaves only whole entries and the next run resumes from them. Each entry carries a SHA-256
over its key, vector, seen-record and metadata, checked on every read: a damaged entry (a
disk error, a truncated copy, a file copied over another) is reported by name, set aside
as `NAME.corrupt` (renamed, never deleted) and its document is encoded again.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .media import atomic_write_bytes

log = logging.getLogger(__name__)

ENTRY_FORMAT = 2  # part of every model key: entries of an older layout (no digest) are never read


def model_key(identity: dict[str, Any]) -> str:
    payload = {"identity": identity, "entry_format": ENTRY_FORMAT}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:24]


class CacheEntry(NamedTuple):
    vector: np.ndarray
    seen: dict[str, Any]
    meta: dict[str, Any]


class CorruptEntry(ValueError):
    """An entry whose bytes do not verify."""


def _digest(role: str, content_hash: str, vector: np.ndarray, seen: bytes, meta: bytes) -> bytes:
    h = hashlib.sha256(f"mmbench-embedding/{ENTRY_FORMAT}\0{role}\0{content_hash}\0".encode())
    h.update(repr((vector.dtype.str, vector.shape)).encode() + b"\0")
    h.update(np.ascontiguousarray(vector).tobytes() + b"\0" + seen + b"\0" + meta)
    return h.digest()


@dataclass
class EmbeddingCache:
    root: Path
    model: str  # model_key(...) of the model identity
    set_aside: list[Path] = field(default_factory=list)  # damaged entries found (and renamed) by this instance

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    def _path(self, role: str, content_hash: str) -> Path:
        return self.root / self.model / role / content_hash[:2] / f"{content_hash}.npz"

    def get(self, role: str, content_hash: str) -> tuple[np.ndarray, dict[str, Any]] | None:
        entry = self.get_entry(role, content_hash)
        return None if entry is None else (entry.vector, entry.seen)

    def get_entry(self, role: str, content_hash: str) -> CacheEntry | None:
        """The verified entry, or None when there is none or it is damaged (then it is set aside)."""
        path = self._path(role, content_hash)
        if not path.is_file():
            return None
        try:
            return _read(path, role, content_hash)
        except Exception as exc:  # noqa: BLE001 - zipfile, zlib, numpy and json each raise their own types
            self._set_aside(path, exc)
            return None

    def _set_aside(self, path: Path, exc: Exception) -> None:
        bad = path.with_name(path.name + ".corrupt")
        n = 1
        while bad.exists():  # an earlier damaged copy of the same entry is kept too
            n += 1
            bad = path.with_name(f"{path.name}.corrupt{n}")
        try:
            os.replace(path, bad)
            where = f"moved to {bad.name}"
        except OSError as move_exc:
            where = f"could not be moved aside ({move_exc})"
        self.set_aside.append(path)
        log.warning("damaged embedding cache entry %s (%s: %s); %s, the document is encoded again",
                    path, type(exc).__name__, exc, where)

    def put(self, role: str, content_hash: str, vector: np.ndarray, seen: dict[str, Any],
            meta: dict[str, Any] | None = None) -> None:
        vec = np.asarray(vector, dtype=np.float32)
        seen_b = json.dumps(seen, sort_keys=True).encode()
        meta_b = json.dumps(meta or {}, sort_keys=True).encode()
        buf = io.BytesIO()
        np.savez(buf, vector=vec, seen=np.frombuffer(seen_b, dtype=np.uint8),
                 meta=np.frombuffer(meta_b, dtype=np.uint8),
                 sha256=np.frombuffer(_digest(role, content_hash, vec, seen_b, meta_b), dtype=np.uint8))
        atomic_write_bytes(self._path(role, content_hash), buf.getvalue())


def _read(path: Path, role: str, content_hash: str) -> CacheEntry:
    with np.load(path, allow_pickle=False) as data:
        missing = sorted({"vector", "seen", "meta", "sha256"} - set(data.files))
        if missing:
            raise CorruptEntry(f"fields {missing} missing")
        vec = data["vector"]
        seen_b, meta_b = bytes(data["seen"]), bytes(data["meta"])
        stored = bytes(data["sha256"])
    if vec.dtype != np.float32 or vec.ndim != 1:
        raise CorruptEntry(f"vector of dtype {vec.dtype} and shape {vec.shape}, expected a float32 row")
    if _digest(role, content_hash, vec, seen_b, meta_b) != stored:
        raise CorruptEntry("SHA-256 does not match its contents or its name")
    return CacheEntry(vec, json.loads(seen_b.decode()), json.loads(meta_b.decode()))
