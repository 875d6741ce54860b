"""On-disk embedding cache: vectors by (model identity, role, document content), one pack file per batch.

Layout under the cache folder, per model key and role::

    MODEL/ROLE/packs/NAME.npz   the rows of one stored batch: content hashes, a float32 matrix, each row's
                                seen-record and metadata, and each row's SHA-256; NAME is the SHA-256 of
                                the file's bytes, so a name always means the same bytes
    MODEL/ROLE/index.json       which pack holds which content hash: only a hint, checked against the
                                packs folder on every open and rebuilt (from the packs' hash lists) for
                                packs it does not list; losing or damaging it costs a re-read, never a
                                wrong vector
    MODEL/ROLE/HH/HASH.npz      one document per file, written by mmbench before packs; still read

Packs are written atomically (temporary file + rename), so a run killed at any point leaves only whole
packs (whole batches) and the next run resumes from them. Writers never modify a pack, so processes and
hosts sharing the folder cannot corrupt each other's: two writers of the same batch write the same name
(same bytes: nothing changes) or two names (both verified; the first by name is read). Every row's
SHA-256 covers its role, content hash, vector, seen-record and metadata, and is checked on every read: a
pack with a damaged row (a disk error, a truncated copy, a file copied over another) is reported by
name and row, set aside as `NAME.npz.corrupt` (renamed, never deleted), and its documents are encoded
again. The row digest is the per-document entry's digest of ENTRY_FORMAT 2, so both layouts share one
model key.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

from mmbench.common.json_rows import JSONRowError, parse_json_rows
from mmbench.data.media import atomic_write_bytes
from mmbench.common.address_limit import is_out_of_memory

log = logging.getLogger(__name__)

ENTRY_FORMAT = 2  # part of every model key: entries of an older layout (no digest) are never read
INDEX_FORMAT = "mmbench-cache-index/1"
PACK_FIELDS = ("hashes", "vectors", "seen", "seen_offsets", "meta", "meta_offsets", "sha256")


def model_key(identity: dict[str, Any]) -> str:
    payload = {"identity": identity, "entry_format": ENTRY_FORMAT}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:24]


class CacheEntry(NamedTuple):
    vector: np.ndarray
    seen: dict[str, Any]
    meta: dict[str, Any]


class CacheRow(NamedTuple):
    """One row to store: a document's content hash, its vector, seen-record and metadata."""

    content_hash: str
    vector: Any
    seen: dict[str, Any]
    meta: dict[str, Any] | None = None


class CorruptEntry(ValueError):
    """An entry or pack whose bytes do not verify."""


def _digest(role: str, content_hash: str, vector: np.ndarray, seen: bytes, meta: bytes) -> bytes:
    h = hashlib.sha256(f"mmbench-embedding/{ENTRY_FORMAT}\0{role}\0{content_hash}\0".encode())
    h.update(repr((vector.dtype.str, vector.shape)).encode() + b"\0")
    h.update(np.ascontiguousarray(vector).tobytes() + b"\0" + seen + b"\0" + meta)
    return h.digest()


@dataclass
class EmbeddingCache:
    root: Path
    model: str  # model_key(...) of the model identity
    set_aside: list[Path] = field(default_factory=list)  # damaged packs or entries found (and renamed) here
    _index: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)  # role -> content hash -> pack
    _packs: dict[str, dict[str, list[str]]] = field(default_factory=dict, repr=False)  # role -> pack -> hashes
    _dirty: set[str] = field(default_factory=set, repr=False)  # roles whose index.json is behind

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    def _role_dir(self, role: str) -> Path:
        return self.root / self.model / role

    def _path(self, role: str, content_hash: str) -> Path:
        """Where a per-document entry of the earlier layout lives (read, never written)."""
        return self._role_dir(role) / content_hash[:2] / f"{content_hash}.npz"

    def pack_paths(self, role: str) -> list[Path]:
        """The packs of `role` on disk, by name."""
        folder = self._role_dir(role) / "packs"
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".npz") and not n.startswith("."))
        except FileNotFoundError:
            return []
        return [folder / n for n in names]

    # --- reading ---------------------------------------------------------------------------------------

    def get(self, role: str, content_hash: str) -> tuple[np.ndarray, dict[str, Any]] | None:
        entry = self.get_entry(role, content_hash)
        return None if entry is None else (entry.vector, entry.seen)

    def get_entry(self, role: str, content_hash: str) -> CacheEntry | None:
        """The verified entry, or None when there is none or it is damaged (then it is set aside)."""
        return self.get_many(role, [content_hash]).get(content_hash)

    def get_many(self, role: str, content_hashes: Iterable[str]) -> dict[str, CacheEntry]:
        """Verified entries of those hashes the cache holds; each pack needed is read once."""
        wanted = list(dict.fromkeys(content_hashes))
        index = self._load_index(role)
        by_pack: dict[str, list[str]] = {}
        for h in wanted:
            name = index.get(h)
            if name is not None:
                by_pack.setdefault(name, []).append(h)
        found: dict[str, CacheEntry] = {}
        folder = self._role_dir(role) / "packs"
        for name in sorted(by_pack):
            rows = self._read_pack_or_set_aside(role, folder / f"{name}.npz")
            if rows is not None:
                found.update((h, rows[h]) for h in by_pack[name] if h in rows)
                self._correct(role, name, list(rows))
        if role in self._dirty:
            self.save_index(role)
        for h in wanted:  # not in any pack: a per-document entry of the earlier layout, if there is one
            if h not in found:
                path = self._path(role, h)
                if path.is_file():
                    try:
                        found[h] = _read_entry(path, role, h)
                    except Exception as exc:  # noqa: BLE001 - zipfile, zlib, numpy and json each raise their own
                        if is_out_of_memory(exc):
                            raise
                        self._set_aside(path, exc)
        return found

    def _read_pack_or_set_aside(self, role: str, path: Path) -> dict[str, CacheEntry] | None:
        try:
            return read_pack(path, role)
        except FileNotFoundError:  # set aside by another process since the index was read
            self._forget_pack(role, path.stem)
            return None
        except Exception as exc:  # noqa: BLE001 - zipfile, zlib, numpy and json each raise their own types
            if is_out_of_memory(exc):  # a healthy pack that did not fit is not set aside as damaged
                raise
            self._set_aside(path, exc)
            self._forget_pack(role, path.stem)
            return None

    def _set_aside(self, path: Path, exc: Exception) -> None:
        bad = path.with_name(path.name + ".corrupt")
        n = 1
        while bad.exists():  # an earlier damaged copy of the same file is kept too
            n += 1
            bad = path.with_name(f"{path.name}.corrupt{n}")
        try:
            os.replace(path, bad)
            where = f"moved to {bad.name}"
        except OSError as move_exc:
            where = f"could not be moved aside ({move_exc})"
        self.set_aside.append(path)
        what = "pack" if path.parent.name == "packs" else "entry"
        log.warning("damaged embedding cache %s %s (%s: %s); %s, its documents are encoded again",
                    what, path, type(exc).__name__, exc, where)

    # --- the index -----------------------------------------------------------------------------------------

    def _load_index(self, role: str) -> dict[str, str]:
        """Content hash -> pack name for the packs on disk now: index.json where it lists exactly those
        packs, the hash lists of the others read from the packs themselves."""
        if role in self._index:
            return self._index[role]
        on_disk = {p.stem for p in self.pack_paths(role)}
        listed = _read_index_file(self._role_dir(role) / "index.json")
        packs = {name: hashes for name, hashes in listed.items() if name in on_disk}
        changed = len(packs) != len(listed)
        folder = self._role_dir(role) / "packs"
        for name in sorted(on_disk - set(packs)):
            try:
                packs[name] = read_pack_hashes(folder / f"{name}.npz")
            except FileNotFoundError:
                continue
            except Exception as exc:  # noqa: BLE001 - a pack whose hash list cannot be read is damaged
                self._set_aside(folder / f"{name}.npz", exc)
                continue
            changed = True
        self._packs[role] = packs
        self._index[role] = _invert(packs)
        if changed:
            self._dirty.add(role)
            self.save_index(role)
        return self._index[role]

    def _correct(self, role: str, name: str, hashes: list[str]) -> None:
        """The index's list for a pack just read, replaced by what the pack holds if they differ (an index
        edited by hand, or a pack copied over another under its name): the next run finds those hashes."""
        packs = self._packs.get(role)
        if packs is not None and packs.get(name) != hashes:
            packs[name] = hashes
            self._index[role] = _invert(packs)
            self._dirty.add(role)

    def _forget_pack(self, role: str, name: str) -> None:
        packs = self._packs.get(role)
        if packs is not None and packs.pop(name, None) is not None:
            self._index[role] = _invert(packs)
            self._dirty.add(role)

    def save_index(self, role: str | None = None) -> None:
        """Write index.json of `role` (every role when None) if it is behind what this instance knows.

        Concurrent writers each write their own view; the last rename wins, and a reader that finds packs
        the index does not list reads their hash lists, so a lost update costs time, never a vector."""
        for r in sorted(self._dirty) if role is None else [role]:
            if r not in self._dirty or r not in self._packs:
                continue
            payload = {"format": INDEX_FORMAT, "packs": {n: self._packs[r][n] for n in sorted(self._packs[r])}}
            try:
                atomic_write_bytes(self._role_dir(r) / "index.json", json.dumps(payload).encode())
                self._dirty.discard(r)
            except OSError as exc:  # a read-only cache: the index is only a hint
                log.debug("cannot write cache index of %s: %s", self._role_dir(r), exc)

    # --- writing -------------------------------------------------------------------------------------------

    def put(self, role: str, content_hash: str, vector: np.ndarray, seen: dict[str, Any],
            meta: dict[str, Any] | None = None) -> None:
        self.put_many(role, [CacheRow(content_hash, vector, seen, meta)])

    def put_many(self, role: str, rows: Sequence[CacheRow]) -> list[Path]:
        """Store `rows` as one pack (one per vector shape), written atomically; returns the pack paths.

        The cache only saves time: a folder that cannot be written (a full disk, a read-only mount) is
        named in one warning per folder and process, and the run goes on without caching."""
        if self.root in _UNWRITABLE:
            return []
        try:
            return self._put_many(role, rows)
        except OSError as exc:
            _UNWRITABLE.add(self.root)
            log.warning("the embedding cache folder %s cannot be written (%s); this run goes on without caching "
                        "(free space there, or pass --cache-dir or --no-cache)", self.root, exc.strerror or exc)
            return []

    def _put_many(self, role: str, rows: Sequence[CacheRow]) -> list[Path]:
        groups: dict[tuple[int, ...], list[CacheRow]] = {}
        for row in rows:
            groups.setdefault(np.shape(row.vector), []).append(row)
        out = []
        for group in groups.values():
            data, hashes = pack_bytes(role, group)
            name = hashlib.sha256(data).hexdigest()[:32]
            path = self._role_dir(role) / "packs" / f"{name}.npz"
            if not path.is_file():
                atomic_write_bytes(path, data)
            out.append(path)
            if role in self._packs:  # keep this instance's index current; index.json is written by save_index
                self._packs[role][name] = hashes
                index = self._index[role]
                for h in hashes:
                    index.setdefault(h, name)
                self._dirty.add(role)
        return out


_UNWRITABLE: set[Path] = set()  # cache folders a write failed in (warned once; not written again by this process)


def _invert(packs: dict[str, list[str]]) -> dict[str, str]:
    index: dict[str, str] = {}
    for name in sorted(packs):  # a hash held by two packs (two writers of one batch): the first by name
        for h in packs[name]:
            index.setdefault(h, name)
    return index


def _read_index_file(path: Path) -> dict[str, list[str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable embedding cache index %s (%s); it is rebuilt from the packs", path, exc)
        return {}
    packs = data.get("packs") if isinstance(data, dict) and data.get("format") == INDEX_FORMAT else None
    if not isinstance(packs, dict):
        return {}
    return {n: hs for n, hs in packs.items()
            if isinstance(n, str) and isinstance(hs, list) and all(isinstance(h, str) for h in hs)}


def _blob(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(p) for p in parts])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), offsets


def pack_bytes(role: str, rows: Sequence[CacheRow]) -> tuple[bytes, list[str]]:
    """The .npz bytes of one pack (rows of one vector shape) and its content hashes, in row order."""
    hashes = [str(r.content_hash) for r in rows]
    vectors = np.stack([np.asarray(r.vector, dtype=np.float32) for r in rows])
    seen = [json.dumps(r.seen, sort_keys=True).encode() for r in rows]
    meta = [json.dumps(r.meta or {}, sort_keys=True).encode() for r in rows]
    digests = np.frombuffer(b"".join(_digest(role, h, vectors[i], seen[i], meta[i]) for i, h in enumerate(hashes)),
                            dtype=np.uint8).reshape(len(rows), 32)
    seen_blob, seen_off = _blob(seen)
    meta_blob, meta_off = _blob(meta)
    buf = io.BytesIO()
    np.savez(buf, hashes=np.array(hashes, dtype=str), vectors=vectors, seen=seen_blob, seen_offsets=seen_off,
             meta=meta_blob, meta_offsets=meta_off, sha256=digests)
    return buf.getvalue(), hashes


def read_pack_hashes(path: Path) -> list[str]:
    """The content hashes a pack holds (only that member is read)."""
    with np.load(path, allow_pickle=False) as data:
        if "hashes" not in data.files:
            raise CorruptEntry("field 'hashes' missing")
        return [str(h) for h in data["hashes"]]


def read_pack(path: Path, role: str) -> dict[str, CacheEntry]:
    """Every row of a pack, verified: the file's bytes against its name, so every row is as it was written;
    and the first row against its SHA-256, which ties it to its role and content hash (a pack is written for
    one role, by `pack_bytes`, so a pack copied into another role's folder fails there). The other rows'
    digests add nothing the file's hash has not checked, and computing them was a tenth of a warm run's cache
    reads. CorruptEntry names what failed, and the row."""
    raw = path.read_bytes()
    if hashlib.sha256(raw).hexdigest()[:32] != path.stem:
        raise CorruptEntry("its bytes do not hash to its name (damaged, truncated or another file copied over it)")
    with np.load(io.BytesIO(raw), allow_pickle=False) as data:
        missing = sorted(set(PACK_FIELDS) - set(data.files))
        if missing:
            raise CorruptEntry(f"fields {missing} missing")
        hashes, vectors, digests = data["hashes"], data["vectors"], data["sha256"]
        seen, seen_off = data["seen"].tobytes(), data["seen_offsets"]
        meta, meta_off = data["meta"].tobytes(), data["meta_offsets"]
    n = len(hashes)
    if vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape[0] != n:
        raise CorruptEntry(f"vectors of dtype {vectors.dtype} and shape {vectors.shape}, expected {n} float32 rows")
    if digests.shape != (n, 32) or seen_off.shape != (n + 1,) or meta_off.shape != (n + 1,):
        raise CorruptEntry(f"row fields of {n} rows have shapes {digests.shape}, {seen_off.shape}, {meta_off.shape}")
    names = [str(h) for h in hashes]
    seen_rows = [seen[seen_off[i]:seen_off[i + 1]] for i in range(n)]
    meta_rows = [meta[meta_off[i]:meta_off[i + 1]] for i in range(n)]
    for i, h in enumerate(names[:1]):
        if _digest(role, h, vectors[i], seen_rows[i], meta_rows[i]) != digests[i].tobytes():
            raise CorruptEntry(f"row {i} ({h[:12]}): SHA-256 does not match its contents or its role")
    try:  # verified bytes that are not JSON: written so, still unusable
        seen_values, meta_values = parse_json_rows(seen_rows), parse_json_rows(meta_rows)
    except JSONRowError as exc:
        raise CorruptEntry(f"row {exc.index} ({names[exc.index][:12]}): {exc.reason}") from None
    out: dict[str, CacheEntry] = {}
    for i, h in enumerate(names):
        out.setdefault(h, CacheEntry(vectors[i], seen_values[i], meta_values[i]))
    return out


def _read_entry(path: Path, role: str, content_hash: str) -> CacheEntry:
    """A per-document entry of the earlier layout (one .npz per document)."""
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


def write_entry(path: Path, role: str, content_hash: str, vector: np.ndarray, seen: dict[str, Any],
                meta: dict[str, Any] | None = None) -> None:
    """A per-document entry in the earlier layout, as mmbench wrote it before packs (kept to test that
    such caches are still read)."""
    vec = np.asarray(vector, dtype=np.float32)
    seen_b = json.dumps(seen, sort_keys=True).encode()
    meta_b = json.dumps(meta or {}, sort_keys=True).encode()
    buf = io.BytesIO()
    np.savez(buf, vector=vec, seen=np.frombuffer(seen_b, dtype=np.uint8), meta=np.frombuffer(meta_b, dtype=np.uint8),
             sha256=np.frombuffer(_digest(role, content_hash, vec, seen_b, meta_b), dtype=np.uint8))
    atomic_write_bytes(path, buf.getvalue())
