"""Work every build repeats, remembered on disk by content: token counts and long texts' token ids.

Every build of a task counts the tokens of the texts it assembles and tokenises its long source texts (the ~106K-token
background of Visual Grounding, the filler of Multi-Source Reasoning) before it draws anything from its seed; the
draws of `mmbench draws`, the fresh draws of `mmbench overfit` and every rebuild do it again. The results depend
only on the text, the tokenizer and the code that counts, so they are kept under MMBENCH_HOME/work-cache/ and
looked up by a key over exactly those:

- the key of a value is a BLAKE2b digest of the namespace's *version* and the text's UTF-8 bytes; the version is a
  SHA-256 of FORMAT, the tokenizer's identity (`Qwen3Tokenizer.identity`: the vocabulary's package versions, or the
  tokenizer.json's own SHA-256) and the bytes of the module files that compute the value (`code_digest`), so an
  edited text, another tokenizer or changed code finds nothing and computes afresh: a changed source can never be
  served a stale value;
- `CountTable` (many small values: one count per text) keeps packs, each a file of 16-byte keys and 8-byte counts
  named by the SHA-256 of its bytes, written atomically (a temporary file renamed into place) once per build by
  `flush` (and at exit); a pack whose bytes do not match its name is ignored, and past MAX_PACKS the packs are
  merged into one. Writers that share the folder never write the same file differently.
- `load_array` / `store_array` keep one file per value (a long text's token ids), its SHA-256 ahead of its bytes.

Anything unreadable, damaged or missing is a miss, and a failed write (a full disk) is dropped: the cache can make a
build faster, never different (`tests/test_work_cache.py` builds with and without it and compares). Set
MMBENCH_WORK_CACHE=off to neither read nor write it; delete the folder to reclaim the space.
"""
from __future__ import annotations

import atexit
import functools
import hashlib
import io
import logging
import os
from pathlib import Path
from typing import Iterable

import numpy as np

from mmbench.common.home import mmbench_home
from mmbench.data.media import atomic_write_bytes

log = logging.getLogger(__name__)

FORMAT = "mmbench-work-cache/1"
ENV = "MMBENCH_WORK_CACHE"
KEY_BYTES = 16
MAX_PACKS = 16
_tables: dict[tuple[str | None, ...], "CountTable"] = {}


def enabled() -> bool:
    return os.environ.get(ENV, "").strip().lower() not in ("off", "0", "false", "no")


def folder(namespace: str, version: str) -> Path | None:
    """Where a namespace's values of one version live (None when the cache is off)."""
    return mmbench_home() / "work-cache" / namespace / version[:32] if enabled() else None


@functools.lru_cache(maxsize=None)
def code_digest(*files: str) -> str:
    """SHA-256 of FORMAT and the bytes of the given source files: the code that computes a cached value."""
    h = hashlib.sha256(FORMAT.encode())
    for name in files:
        h.update(b"\0" + Path(name).read_bytes())
    return h.hexdigest()


def version(*parts: str) -> str:
    return hashlib.sha256("\0".join((FORMAT, *parts)).encode()).hexdigest()


def text_key(version: str, text: str) -> bytes:
    """The 16-byte key of a text's value (lone surrogates kept as they are)."""
    h = hashlib.blake2b(version.encode(), digest_size=KEY_BYTES)
    h.update(b"\0" + text.encode("utf-8", "surrogatepass"))
    return h.digest()


def table(namespace: str, version: str) -> "CountTable":
    """The process's table of a namespace's counts of one version, under the current MMBENCH_HOME (in memory only
    when the cache is off)."""
    key = (namespace, version, os.environ.get("MMBENCH_HOME"), os.environ.get(ENV))   # what `folder` reads
    found = _tables.get(key)
    if found is None:
        found = _tables[key] = CountTable(folder(namespace, version))
    return found


class CountTable:
    """Integers keyed by 16-byte keys, read from the packs under `root` on first use, new ones written by `flush`
    (with no root, a memo of this process only)."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self.values: dict[bytes, int] | None = None
        self.new: dict[bytes, int] = {}
        self.packs: list[Path] = []

    def _load(self) -> dict[bytes, int]:
        if self.values is None:
            self.values = {}
            self.packs = sorted(self.root.glob("*.pack")) if self.root is not None and self.root.is_dir() else []
            for path in self.packs:
                self.values.update(_read_pack(path))
        return self.values

    def get(self, key: bytes) -> int | None:
        found = self.new.get(key)
        return found if found is not None else self._load().get(key)

    def put(self, key: bytes, value: int) -> None:
        if self._load().get(key) != value:
            self.new[key] = value

    def flush(self) -> None:
        """Write the values found since the last flush as one pack (all packs merged into one past MAX_PACKS)."""
        values = self._load()
        values.update(self.new)
        if not self.new or self.root is None:
            self.new.clear()
            return
        merge = len(self.packs) + 1 > MAX_PACKS
        entries = values if merge else self.new
        try:
            written = _write_pack(self.root, entries)
        except OSError as exc:
            log.info("work cache %s not written (%s)", self.root, exc)
            self.new.clear()
            return
        if merge:
            for path in self.packs:
                if path != written:
                    path.unlink(missing_ok=True)
            self.packs = [written]
        else:
            self.packs.append(written)
        self.new.clear()


def _write_pack(root: Path, entries: dict[bytes, int]) -> Path:
    keys = sorted(entries)
    data = b"".join(keys) + np.array([entries[k] for k in keys], dtype="<i8").tobytes()
    path = root / f"{hashlib.sha256(data).hexdigest()}.pack"
    if not path.exists():
        atomic_write_bytes(path, data)
    return path


def _read_pack(path: Path) -> Iterable[tuple[bytes, int]]:
    try:
        data = path.read_bytes()
    except OSError:           # merged away by another writer since the folder was listed
        return []
    n, rest = divmod(len(data), KEY_BYTES + 8)
    if rest or hashlib.sha256(data).hexdigest() != path.stem:
        log.info("ignoring the damaged work-cache pack %s", path)
        return []
    keys = [data[i * KEY_BYTES:(i + 1) * KEY_BYTES] for i in range(n)]
    return zip(keys, np.frombuffer(data, dtype="<i8", offset=n * KEY_BYTES).tolist())


def flush() -> None:
    """Write every table's new values (each build calls it once its pool set is written; also at exit)."""
    for counts in _tables.values():
        counts.flush()


atexit.register(flush)


def load_array(root: Path | None, key: bytes) -> np.ndarray | None:
    """The array stored under `key`, or None (no cache, not there, or damaged)."""
    if root is None:
        return None
    path = root / key.hex()[:2] / f"{key.hex()}.npy"
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data[32:]).digest() != data[:32]:
        log.info("ignoring the damaged work-cache entry %s", path)
        return None
    try:
        return np.load(io.BytesIO(data[32:]), allow_pickle=False)
    except ValueError:
        return None


def store_array(root: Path | None, key: bytes, value: np.ndarray) -> None:
    """Keep `value` under `key` (atomically; a failed write is dropped)."""
    if root is None:
        return
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(value), allow_pickle=False)
    payload = buf.getvalue()
    try:
        atomic_write_bytes(root / key.hex()[:2] / f"{key.hex()}.npy", hashlib.sha256(payload).digest() + payload)
    except OSError as exc:
        log.info("work cache entry not written (%s)", exc)
