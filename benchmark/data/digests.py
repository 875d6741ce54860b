"""SHA-256 of files, remembered by what `stat` says, so large weights are read once per change.

A model folder's revision is the digest of its files' contents (a checkpoint retrained and saved
over the old one gets a new revision, so cached vectors of the old weights are never reused).
Reading gigabytes on every run would be slow, so each file's digest is kept in a memo keyed by
(real path, size, mtime_ns, ctime_ns, inode): a rewritten, replaced or touched file misses the
memo and is read again. `ctime_ns` is set by the kernel on every change, so even a rewrite that
restores the old mtime is noticed. The memo is a JSON file under MMBENCH_HOME, written atomically;
losing it costs one re-read, never a wrong digest. Concurrent runs sharing a home merge their entries under an
flock on a sibling lock file (read the memo again, add this run's entries, write), so none loses another's.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path

from mmbench.common import flocks
from mmbench.common.home import mmbench_home
from mmbench.data.media import atomic_write_bytes

log = logging.getLogger(__name__)

MEMO_FILE = "file-digests.json"
MEMO_LIMIT = 20000  # entries kept (most recent); a model folder has tens of files
_lock = threading.Lock()
_memo: dict[str, str] = {}
_loaded_from: Path | None = None


def _key(path: Path) -> tuple[str, os.stat_result]:
    real = os.path.realpath(path)
    st = os.stat(real)
    return f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}", st


def _memo_path() -> Path:
    return mmbench_home() / MEMO_FILE


def _load(memo_path: Path) -> None:
    global _loaded_from
    if _loaded_from == memo_path:
        return
    _memo.clear()
    try:
        data = json.loads(memo_path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            _memo.update({k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)})
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:  # a damaged memo is only a cache: start a new one
        log.warning("ignoring unreadable digest memo %s: %s", memo_path, exc)
    _loaded_from = memo_path


def _save(memo_path: Path, new: dict[str, str]) -> None:
    """Add `new` to the memo on disk, under the lock, so entries another process wrote meanwhile are kept."""
    try:
        memo_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(memo_path.with_name(memo_path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:  # read-only home: digests are still right, only not remembered
        log.debug("cannot write digest memo %s: %s", memo_path, exc)
        return
    try:
        flocks.hold(fd, wait=True)
        global _loaded_from
        _loaded_from = None
        _load(memo_path)   # what is on disk now, other runs' entries included
        for key, digest in new.items():
            _memo.pop(key, None)
            _memo[key] = digest
        items = list(_memo.items())[-MEMO_LIMIT:]
        atomic_write_bytes(memo_path, json.dumps(dict(items), sort_keys=False).encode())
    except OSError as exc:
        log.debug("cannot write digest memo %s: %s", memo_path, exc)
    finally:
        os.close(fd)   # releases the lock


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of the file's bytes (read in blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_digests(paths: list[Path]) -> list[str]:
    """SHA-256 of each file, from the memo where the file's stat is unchanged, else read (and remembered)."""
    memo_path = _memo_path()
    with _lock:
        _load(memo_path)
        out, new = [], {}
        for p in paths:
            key, _ = _key(p)
            digest = _memo.get(key)
            if digest is None:
                digest = sha256_file(p)
                after, _ = _key(p)
                if after == key:  # not being written while read: safe to remember
                    _memo.pop(key, None)
                    _memo[key] = new[key] = digest
            out.append(digest)
        if new:
            _save(memo_path, new)
        return out


def folder_files(folder: Path) -> list[Path]:
    """Regular files under `folder` (links followed), hidden ones (.git, .cache, ...) left out, sorted."""
    folder = Path(folder)
    files = []
    for f in sorted(folder.rglob("*")):
        rel = f.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or not f.is_file():
            continue
        files.append(f)
    return files


def folder_digest(folder: str | Path) -> str:
    """SHA-256 over the relative paths and contents of a folder's files (see `folder_files`)."""
    folder = Path(folder)
    files = folder_files(folder)
    h = hashlib.sha256()
    for f, digest in zip(files, file_digests(files)):
        h.update(f.relative_to(folder).as_posix().encode() + b"\0" + digest.encode() + b"\n")
    return h.hexdigest()
