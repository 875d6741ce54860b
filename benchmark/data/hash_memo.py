"""Documents' content hashes remembered by the SHA-256 of the table file they were read from.

A warm run hashes every document's segments to find its vectors (tens of MB of JSON for a Visual
Grounding pool set). `load_poolset` digests each table from the very bytes it parses, and the same
bytes give the same records, hence the same content hashes: so they are remembered under
MMBENCH_HOME/document-hashes/, keyed by the table's digest and HASH_VERSION (the document hash's
definition). A memo is checked against its own SHA-256 and its ids against the table's; anything
unreadable or different is recomputed (and rewritten), never trusted. Writes are atomic.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Sequence

from mmbench.data.documents import Document
from mmbench.common.home import mmbench_home
from mmbench.data.media import atomic_write_bytes

log = logging.getLogger(__name__)

HASH_VERSION = "mmbench-document-hash/1"  # bump with any change to Document.content_hash


def _memo_path(table_digest: str) -> Path:
    key = hashlib.sha256(f"{HASH_VERSION}\0{table_digest}".encode()).hexdigest()[:32]
    return mmbench_home() / "document-hashes" / f"{key}.json"


def _check(ids: list[str], hashes: list[str]) -> str:
    return hashlib.sha256(json.dumps([HASH_VERSION, ids, hashes]).encode()).hexdigest()


def _read(path: Path, ids: list[str]) -> list[str] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        hashes = data["hashes"]
        if data["ids"] != ids or len(hashes) != len(ids) or data["check"] != _check(ids, hashes):
            raise ValueError("does not match its table or its own digest")
        return hashes
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.info("recomputing the document hashes of %s (%s: %s)", path, type(exc).__name__, exc)
        return None


def remember_hashes(docs: Sequence[Document], table_digest: str | None) -> None:
    """Give each document of a table its content hash, from the memo of `table_digest` or computed (and
    remembered); without a digest (a table not read from disk), nothing is remembered."""
    if not table_digest or not docs:
        return
    path = _memo_path(table_digest)
    ids = [d.id for d in docs]
    hashes = _read(path, ids)
    if hashes is not None:
        for d, h in zip(docs, hashes):
            d.known_content_hash(h)
        return
    hashes = [d.content_hash() for d in docs]
    payload = {"version": HASH_VERSION, "table": table_digest, "ids": ids, "hashes": hashes,
               "check": _check(ids, hashes)}
    try:
        atomic_write_bytes(path, json.dumps(payload).encode())
    except OSError as exc:  # a read-only home: the hashes are right, only not remembered
        log.debug("cannot write document hash memo %s: %s", path, exc)
