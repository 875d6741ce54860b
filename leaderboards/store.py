"""The board: an SQLite database (WAL) plus the accepted files, written all-or-nothing.

Layout of a board folder::

    board.sqlite                      submissions and their recomputed scores
    submissions/<task>/<slug>-<id>/   the accepted files, byte for byte as validated

Folder names are built from a sanitised slug and the submission id, never from a submitted
name as is. A submission is staged in a private folder, then the database rows are inserted and
the folder renamed into place inside one ``BEGIN IMMEDIATE`` transaction, so concurrent
submitters queue on SQLite's write lock and a failure leaves neither rows nor files behind.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from .problems import DuplicateSubmission, Problem
from .schema import Submission

DB_NAME = "board.sqlite"
FILES_DIR = "submissions"
_BUSY_TIMEOUT_S = 60.0

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

    @property
    def model_name(self) -> str:
        return str(self.model.get("name", "?"))

    @property
    def slug(self) -> str:
        return self.folder.name


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
        """Store a validated submission; refuses a duplicate unless `replace`."""
        sid = sub.submission_id
        rel = Path(FILES_DIR) / slugify(sub.task) / f"{slugify(sub.model_name)}-{sid}"
        final = self._inside(self.root / rel)
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=self.root, prefix=".staging-"))
        trash: Path | None = None  # where a replaced submission's folder waits until the commit
        moved = False
        try:
            digests = {}
            for name, data in sorted(sub.files.items()):
                target = self._inside(staging / slugify(name, max_len=64))
                target.write_bytes(data)
                digests[target.name] = _sha256(data)
            with closing(self._connect()) as con:
                con.execute("BEGIN IMMEDIATE")
                try:
                    old = con.execute("SELECT folder FROM submissions WHERE id = ?", (sid,)).fetchone()
                    if old and not replace:
                        raise DuplicateSubmission([Problem(
                            "submission", f"{sub.model_name!r} on {sub.task} v{sub.task_version} is already on the board "
                            f"(id {sid}); pass --replace to replace it")])
                    if old:
                        con.execute("DELETE FROM scores WHERE submission_id = ?", (sid,))
                        con.execute("DELETE FROM submissions WHERE id = ?", (sid,))
                        old_dir = self._inside(self.root / old[0])
                        if old_dir.exists():
                            trash = Path(tempfile.mkdtemp(dir=self.root, prefix=".trash-")) / "old"
                            os.replace(old_dir, trash)
                    con.execute("INSERT INTO submissions VALUES (?,?,?,?,?,?,?,?,?,?)",
                                (sid, sub.kind, sub.task, sub.task_version, sub.content_hash, sub.model_name,
                                 json.dumps(sub.model, sort_keys=True), rel.as_posix(), json.dumps(digests, sort_keys=True),
                                 datetime.now(timezone.utc).isoformat(timespec="seconds")))
                    con.executemany("INSERT INTO scores VALUES (?,?,?,?)",
                                    [(sid, g, m, v) for g, ms in sorted(sub.scores.items()) for m, v in sorted(ms.items())])
                    os.replace(staging, final)
                    moved = True
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    if moved:
                        os.replace(final, staging)
                    if trash is not None:
                        os.replace(trash, final)
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            if trash is not None:
                shutil.rmtree(trash.parent, ignore_errors=True)
        return self.get(sid)

    def _inside(self, path: Path) -> Path:
        """Defence in depth: every path the board writes stays under its root."""
        resolved = path.resolve()
        if not resolved.is_relative_to(self.root.resolve()):
            raise ValueError(f"refusing to write outside the board: {path}")
        return resolved

    def entries(self, kind: str | None = None) -> list[Entry]:
        with closing(self._connect()) as con:
            rows = con.execute("SELECT id, kind, task, task_version, content_hash, model_json, folder, submitted_at "
                               "FROM submissions ORDER BY task, model_name, id").fetchall()
            scores: dict[str, dict[str, dict[str, float]]] = {}
            for sid, grp, metric, value in con.execute("SELECT submission_id, grp, metric, value FROM scores"):
                scores.setdefault(sid, {}).setdefault(grp, {})[metric] = value
        out = [Entry(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), self.root / r[6], r[7], scores.get(r[0], {}))
               for r in rows]
        return [e for e in out if kind is None or e.kind == kind]

    def get(self, sid: str) -> Entry:
        for e in self.entries():
            if e.id == sid:
                return e
        raise KeyError(f"no submission {sid!r} on board {self.root}")

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries())


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
