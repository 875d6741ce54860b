"""The board: an SQLite database (WAL) plus the accepted files, written all-or-nothing.

Layout of a board folder::

    board.sqlite                              submissions and their recomputed scores
    submissions/<task>/<slug>-<id>-<nonce>/   the accepted files, byte for byte as validated

Folder names are built from a sanitised slug, the submission id and a fresh nonce, never from a
submitted name as is. The database is the one source of truth, and its commit the one step that
makes a submission (or a replacement) exist:

1. the files are written to a private staging folder (locked with `flock` while its writer lives);
2. inside one ``BEGIN IMMEDIATE`` transaction the rows are written and the staging folder is
   renamed to its new, unused name (one rename), then the transaction commits;
3. only after the commit is a replaced submission's old folder removed.

A process killed at any point leaves at most a folder no row refers to (a renamed-in folder whose
transaction never committed, the old folder of a committed replacement) or a dead staging folder.
The next submit, holding the write lock, removes exactly those: folders under ``submissions/``
whose names follow the board's own pattern and that no committed row names, and staging folders
whose writer is gone. Concurrent submitters queue on SQLite's write lock.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import sqlite3
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from mmbench.common import flocks

from mmbench.leaderboards.files import json_shape_problem
from mmbench.leaderboards.problems import DuplicateSubmission, Problem
from mmbench.leaderboards.schema import Submission


DB_NAME = "board.sqlite"
FILES_DIR = "submissions"
STAGING_PREFIX = ".staging-"
_BUSY_TIMEOUT_S = 60.0
_STAGING_GRACE_S = 10.0         # a staging folder younger than this is never touched (its writer may lock it yet)
_STAGING_GRACE_NO_LOCK_S = 24 * 3600.0
# What the board itself names a submission folder: <slug>-<16 hex id>, optionally -<8 hex nonce>.
_OWN_FOLDER = re.compile(r"[A-Za-z0-9._-]+-[0-9a-f]{16}(?:-[0-9a-f]{8})?")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    task TEXT NOT NULL,
    task_version TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    model_name TEXT NOT NULL,
    model_json TEXT NOT NULL,
    folder TEXT NOT NULL,
    files_json TEXT NOT NULL,
    submitted_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS scores (
    submission_id TEXT NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    grp TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL,
    PRIMARY KEY (submission_id, grp, metric)
);
"""


@dataclass(frozen=True)
class Entry:
    """One accepted submission as stored on the board."""

    id: str
    kind: str
    task: str
    task_version: str
    content_hash: str
    model: dict[str, Any]
    folder: Path
    submitted_at: str
    scores: dict[str, dict[str, float]]
    problem: str | None = None   # why the stored row cannot be shown (its identity does not parse)

    @property
    def model_name(self) -> str:
        return str(self.model.get("name", "?"))

    @property
    def slug(self) -> str:
        """Stable name of the submission's pages (the folder's nonce changes with every replacement)."""
        return f"{slugify(self.model_name)}-{self.id}"


def slugify(text: str, max_len: int = 40) -> str:
    """A file-name-safe stand-in for user text: ASCII letters, digits, '.', '_', '-'; never '..'."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", text)
    slug = re.sub(r"\.{2,}", "_", slug).strip("._-")[:max_len]
    return slug or "x"


class Board:
    """A leaderboard folder; safe to use from several processes at once."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / FILES_DIR).mkdir(exist_ok=True)
        self.cleaned: list[Path] = []   # leftovers of killed submits removed by the last submit
        with closing(self._connect()) as con:
            self._retry(lambda: con.execute("PRAGMA journal_mode=WAL"))
            self._retry(lambda: con.executescript(f"BEGIN IMMEDIATE;{_SCHEMA}COMMIT;"))

    @property
    def db_path(self) -> Path:
        return self.root / DB_NAME

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.db_path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        con.execute("PRAGMA foreign_keys=ON")
        return con

    @staticmethod
    def _retry(fn, attempts: int = 20):
        """Switching to WAL needs a moment alone with the file; wait for a concurrent opener."""
        for i in range(attempts):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or i == attempts - 1:
                    raise
                time.sleep(0.05 * (i + 1))

    def submit(self, sub: Submission, replace: bool = False) -> Entry:
        """Store a validated submission; refuses a duplicate unless `replace`. Atomic: see the module docstring."""
        sid = sub.submission_id
        rel = Path(FILES_DIR) / slugify(sub.task) / f"{slugify(sub.model_name)}-{sid}-{secrets.token_hex(4)}"
        final = self._inside(self.root / rel)
        final.parent.mkdir(parents=True, exist_ok=True)
        self.cleaned = []
        with _Staging(self.root) as staging:
            digests = {}
            for name, data in sorted(sub.files.items()):
                target = self._inside(staging.path / slugify(name, max_len=64))
                try:
                    with open(target, "wb") as fh:
                        fh.write(data)
                        fh.flush()
                        os.fsync(fh.fileno())
                except OSError as exc:  # a full disk: the staging folder goes, the board is as it was
                    raise OSError(exc.errno, f"could not write to the board folder {self.root}: "
                                             f"{exc.strerror or exc}; nothing was added") from exc
                digests[target.name] = _sha256(data)
            old_dir: Path | None = None
            with closing(self._connect()) as con:
                con.execute("BEGIN IMMEDIATE")
                moved = False
                try:
                    self.cleaned = self._clean_leftovers(con)
                    old = con.execute("SELECT folder FROM submissions WHERE id = ?", (sid,)).fetchone()
                    if old and not replace:
                        raise DuplicateSubmission([Problem(
                            "submission", f"{sub.model_name!r} on {sub.task} v{sub.task_version} is already on the board "
                            f"(id {sid}); pass --replace to replace it")])
                    if old:
                        con.execute("DELETE FROM scores WHERE submission_id = ?", (sid,))
                        con.execute("DELETE FROM submissions WHERE id = ?", (sid,))
                        old_dir = self._inside(self.root / old[0])
                    con.execute("INSERT INTO submissions VALUES (?,?,?,?,?,?,?,?,?,?)",
                                (sid, sub.kind, sub.task, sub.task_version, sub.content_hash, sub.model_name,
                                 json.dumps(sub.model, sort_keys=True), rel.as_posix(), json.dumps(digests, sort_keys=True),
                                 datetime.now(timezone.utc).isoformat(timespec="seconds")))
                    con.executemany("INSERT INTO scores VALUES (?,?,?,?)",
                                    [(sid, g, m, v) for g, ms in sorted(sub.scores.items()) for m, v in sorted(ms.items())])
                    os.replace(staging.path, final)   # a fresh name: nothing is in the way, nothing is overwritten
                    moved = True
                    _fsync_dir(final.parent)          # the rename is on disk before the row that names it
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    if moved:
                        shutil.rmtree(final, ignore_errors=True)
                    raise
            if old_dir is not None and old_dir != final:
                shutil.rmtree(old_dir, ignore_errors=True)   # after the commit; if killed first, the next submit does it
        return self.get(sid)

    def _clean_leftovers(self, con: sqlite3.Connection) -> list[Path]:
        """Remove what killed submits left (the caller holds the write lock, so no submit is half-way now)."""
        referenced = {self._inside(self.root / r[0]) for r in con.execute("SELECT folder FROM submissions")}
        removed = []
        files = self.root / FILES_DIR
        for task_dir in sorted(p for p in files.iterdir() if p.is_dir() and not p.is_symlink()):
            for folder in sorted(task_dir.iterdir()):
                if (folder.is_dir() and not folder.is_symlink() and _OWN_FOLDER.fullmatch(folder.name)
                        and folder.resolve() not in referenced):
                    shutil.rmtree(folder, ignore_errors=True)   # its replacer may be removing it at the same time
                    removed.append(folder)
        for folder in sorted(self.root.glob(STAGING_PREFIX + "*")):
            if folder.is_dir() and not folder.is_symlink() and _Staging.is_dead(folder):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
        return removed + self._restore_legacy_trash(con)

    def _restore_legacy_trash(self, con: sqlite3.Connection) -> list[Path]:
        """The store before this design moved a replaced folder to `.trash-*/old` before committing; killed
        there, the row still names the folder, which is gone. Put such a folder back where its row says,
        when its files are exactly the ones the row records; anything else stays where it is."""
        restored = []
        rows = con.execute("SELECT folder, files_json FROM submissions").fetchall()
        for trash in sorted(self.root.glob(".trash-*")):
            old = trash / "old"
            try:
                young = time.time() - trash.stat().st_mtime < _STAGING_GRACE_S
            except OSError:
                continue
            if young or not old.is_dir() or old.is_symlink():
                continue
            files = {p.name: _sha256(p.read_bytes()) for p in old.iterdir() if p.is_file() and not p.is_symlink()}
            for folder, files_json in rows:
                target = self._inside(self.root / folder)
                if not target.exists() and json.loads(files_json) == files:
                    os.replace(old, target)
                    shutil.rmtree(trash, ignore_errors=True)
                    restored.append(target)
                    break
        return restored

    def _inside(self, path: Path) -> Path:
        """Defence in depth: every path the board writes stays under its root."""
        resolved = path.resolve()
        if not resolved.is_relative_to(self.root.resolve()):
            raise ValueError(f"refusing to write outside the board: {path}")
        return resolved

    def entries(self, kind: str | None = None) -> list[Entry]:
        with closing(self._connect()) as con:
            rows = con.execute("SELECT id, kind, task, task_version, content_hash, model_json, folder, submitted_at, model_name "
                               "FROM submissions ORDER BY task, model_name, id").fetchall()
            scores: dict[str, dict[str, dict[str, float]]] = {}
            for sid, grp, metric, value in con.execute("SELECT submission_id, grp, metric, value FROM scores"):
                scores.setdefault(sid, {}).setdefault(grp, {})[metric] = value
        out = []
        for r in rows:
            model, problem = _stored_model(r[5], r[8])
            out.append(Entry(r[0], r[1], r[2], r[3], r[4], model, self.root / r[6], r[7], scores.get(r[0], {}), problem))
        return [e for e in out if kind is None or e.kind == kind]

    def remove(self, sid: str) -> Entry:
        """Take submission `sid` off the board: its rows go in one transaction, then its folder."""
        entry = self.get(sid)
        with closing(self._connect()) as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                row = con.execute("SELECT folder FROM submissions WHERE id = ?", (sid,)).fetchone()
                con.execute("DELETE FROM scores WHERE submission_id = ?", (sid,))
                con.execute("DELETE FROM submissions WHERE id = ?", (sid,))
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        if row is not None:  # after the commit; if killed first, the next submit removes the orphan folder
            shutil.rmtree(self._inside(self.root / row[0]), ignore_errors=True)
        return entry

    def get(self, sid: str) -> Entry:
        for e in self.entries():
            if e.id == sid:
                return e
        raise KeyError(f"no submission {sid!r} on board {self.root}")

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries())


def _stored_model(model_json: str, model_name: str) -> tuple[dict[str, Any], str | None]:
    """A stored identity and None, or a stand-in holding its name and why it cannot be read (stored
    before the submit-time limits, or damaged): the build skips such an entry instead of dying on it."""
    try:
        model = json.loads(model_json)
    except (ValueError, RecursionError) as exc:
        return {"name": str(model_name)}, f"its stored identity does not parse ({type(exc).__name__})"
    if not isinstance(model, dict):
        return {"name": str(model_name)}, "its stored identity is not an object"
    problem = json_shape_problem(model)
    return (model, None) if problem is None else ({"name": str(model_name)}, f"its stored identity {problem}")


class _Staging:
    """A private folder under the board root, locked (`flock`) for as long as its writer lives."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __enter__(self) -> "_Staging":
        self.path = Path(tempfile.mkdtemp(dir=self.root, prefix=STAGING_PREFIX))
        self._fd = None
        if flocks.SUPPORTED:
            self._fd = os.open(self.path, os.O_RDONLY)
            flocks.hold(self._fd, wait=True)
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)                              # releases the lock
        if self.path.exists():                              # not renamed into place
            shutil.rmtree(self.path, ignore_errors=True)

    @staticmethod
    def is_dead(folder: Path) -> bool:
        """Whether no live process writes `folder` (old enough, and its lock can be taken)."""
        try:
            age = time.time() - folder.stat().st_mtime
        except OSError:
            return False
        if not flocks.SUPPORTED:
            return age > _STAGING_GRACE_NO_LOCK_S
        if age < _STAGING_GRACE_S:
            return False
        return flocks.is_free(folder)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot sync a directory
    finally:
        os.close(fd)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
