"""RAVEL's calibration set: image-text pairs, the seeded draw, and the JSONL manifest that records it.

Sampling: `sample_pairs(pool, n, seed)` draws `n` distinct pool indices with
`numpy.random.default_rng(seed).choice(len(pool), n, replace=False)` and keeps them in ascending pool order.
The manifest (JSONL; the first line a header with source, seed, n, pool size and fingerprint) records the
index, id, image and text of every drawn pair; it is written atomically and read back with one-line errors
naming the file, the line and the field.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mmbench.common.errors import CLIError
from mmbench.data.media import atomic_write_bytes

DEFAULT_N = 1000
DEFAULT_SEED = 42


class CalibrationError(CLIError):
    """A calibration source, manifest or image is missing or malformed; the message names the file and record."""


@dataclass(frozen=True)
class Pair:
    index: int  # position in the source pool
    id: str
    image: str  # file path, or "sample://<pool_seed>/<index>"
    text: str


@dataclass
class Calibration:
    pairs: list[Pair]
    source: str
    seed: int
    pool_size: int

    @property
    def texts(self) -> list[str]:
        return [p.text for p in self.pairs]

    def __len__(self) -> int:
        return len(self.pairs)

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for p in self.pairs:
            h.update(json.dumps([p.index, p.id, p.image, p.text], ensure_ascii=False).encode())
            h.update(b"\n")
        return h.hexdigest()[:20]

    def subset(self, n: int) -> Calibration:
        return Calibration(self.pairs[:n], self.source, self.seed, self.pool_size)

    def manifest_bytes(self) -> bytes:
        head = {"source": self.source, "seed": self.seed, "n": len(self.pairs), "pool_size": self.pool_size,
                "fingerprint": self.fingerprint()}
        lines = [json.dumps(head)] + [json.dumps(asdict(p), ensure_ascii=False) for p in self.pairs]
        return "".join(line + "\n" for line in lines).encode("utf-8")

    def write_manifest(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, self.manifest_bytes())
        return path


def sample_pairs(pool: Sequence[Pair], n: int = DEFAULT_N, seed: int = DEFAULT_SEED, source: str = "") -> Calibration:
    if n > len(pool):
        raise CalibrationError(f"cannot draw {n} pairs from a pool of {len(pool)} (lower --n)")
    if n < 1:
        raise CalibrationError(f"--n must be at least 1, got {n}")
    idx = np.sort(np.random.default_rng(seed).choice(len(pool), size=n, replace=False))
    return Calibration([pool[int(i)] for i in idx], source, seed, len(pool))


_HEAD_FIELDS = {"source": str, "seed": int, "pool_size": int}
_PAIR_FIELDS = {"index": int, "id": str, "image": str, "text": str}


def _record(line: str, where: str) -> dict[str, Any]:
    try:
        rec = json.loads(line)
    except ValueError as exc:
        raise CalibrationError(f"{where}: invalid JSON ({exc})") from None
    if not isinstance(rec, dict):
        raise CalibrationError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    return rec


def _typed(rec: dict[str, Any], fields: dict[str, type], where: str) -> None:
    for name, kind in fields.items():
        if name not in rec:
            raise CalibrationError(f"{where}: field {name!r} missing")
        if not isinstance(rec[name], kind) or isinstance(rec[name], bool):
            raise CalibrationError(f"{where}: field {name!r} is {rec[name]!r}, expected a {kind.__name__}")


def read_manifest(path: str | Path) -> Calibration:
    """The calibration a manifest records; its fingerprint must match its pairs (an edited manifest is refused)."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise CalibrationError(f"manifest {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"manifest {path}: cannot read ({exc})") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise CalibrationError(f"manifest {path}: empty file")
    head = _record(lines[0][1], f"{path}:{lines[0][0]}")
    _typed(head, _HEAD_FIELDS, f"{path}:{lines[0][0]} (header)")
    pairs = []
    for n, line in lines[1:]:
        rec = _record(line, f"{path}:{n}")
        _typed(rec, _PAIR_FIELDS, f"{path}:{n}")
        pairs.append(Pair(**{k: rec[k] for k in _PAIR_FIELDS}))
    cal = Calibration(pairs, head["source"], head["seed"], head["pool_size"])
    if head.get("fingerprint") and head["fingerprint"] != cal.fingerprint():
        raise CalibrationError(f"{path}: manifest fingerprint mismatch (edited?)")
    return cal
