"""On-disk embedding cache: one file per (model identity, role, document content).

Entries are written atomically (temporary file + rename), so a run killed at any point
leaves only whole entries and the next run resumes from them.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .media import atomic_write_bytes

log = logging.getLogger(__name__)


def model_key(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:24]


@dataclass
class EmbeddingCache:
    root: Path
    model: str  # model_key(...) of the model identity

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    def _path(self, role: str, content_hash: str) -> Path:
        return self.root / self.model / role / content_hash[:2] / f"{content_hash}.npz"

    def get(self, role: str, content_hash: str) -> tuple[np.ndarray, dict[str, Any]] | None:
        path = self._path(role, content_hash)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                return data["vector"].astype(np.float32), json.loads(bytes(data["seen"]).decode())
        except (OSError, ValueError, KeyError) as exc:  # an unreadable entry is re-encoded, not trusted
            log.warning("ignoring unreadable cache entry %s: %s", path, exc)
            return None

    def put(self, role: str, content_hash: str, vector: np.ndarray, seen: dict[str, Any]) -> None:
        buf = io.BytesIO()
        np.savez(buf, vector=np.asarray(vector, dtype=np.float32),
                 seen=np.frombuffer(json.dumps(seen, sort_keys=True).encode(), dtype=np.uint8))
        atomic_write_bytes(self._path(role, content_hash), buf.getvalue())
