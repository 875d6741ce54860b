"""Reading a submission folder as data only: known names, size caps, content sniffed, no links.

Nothing here executes or unpickles anything: JSON is parsed strictly (no NaN/Infinity, no
duplicate keys) and Parquet is only accepted when it carries Parquet's magic bytes. The bytes
read here are the bytes validated and the bytes stored, so a file changed after validation
cannot slip in.
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .problems import Problem, SubmissionRejected

PARQUET_MAGIC = b"PAR1"
PICKLE_OPCODES = (b"\x80",)  # protocol 2+ pickles start with PROTO


@dataclass(frozen=True)
class Limits:
    """Caps on what a submission may hold; boards may tighten them."""

    max_file_bytes: int = 256 * 1024 * 1024
    max_json_bytes: int = 16 * 1024 * 1024
    max_name_chars: int = 200


def read_folder(folder: Path, accepted: dict[str, str], limits: Limits) -> dict[str, bytes]:
    """Bytes of every file in `folder`; `accepted` maps each allowed name to 'json' or 'parquet'."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        raise SubmissionRejected([Problem("submission", f"{folder} is not a folder")])
    problems: list[Problem] = []
    files: dict[str, bytes] = {}
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        shown = ascii(entry.name)[1:-1]  # names never reach a message or path unescaped
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            problems.append(Problem(f"file {shown}", "is a symbolic link; submit plain files"))
            continue
        if not stat.S_ISREG(st.st_mode):
            problems.append(Problem(f"file {shown}", "is not a plain file (folders and devices are not accepted)"))
            continue
        if entry.name not in accepted:
            problems.append(Problem(f"file {shown}", f"not an accepted data file; accepted: {', '.join(sorted(accepted))}"
                                    + _pickle_hint(Path(entry.path))))
            continue
        kind = accepted[entry.name]
        cap = limits.max_json_bytes if kind == "json" else limits.max_file_bytes
        if st.st_size > cap:
            problems.append(Problem(f"file {shown}", f"is {st.st_size} bytes, over the limit of {cap} bytes"))
            continue
        with open(entry.path, "rb") as fh:
            data = fh.read(cap + 1)
        if len(data) > cap:  # grew after stat
            problems.append(Problem(f"file {shown}", f"is over the limit of {cap} bytes"))
            continue
        reason = _sniff(data, kind)
        if reason:
            problems.append(Problem(f"file {shown}", reason))
            continue
        files[entry.name] = data
    if problems:
        raise SubmissionRejected(problems)
    return files


def _pickle_hint(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
    except OSError:
        return ""
    return " (it looks like a pickle: submissions are data only, JSON or Parquet)" if head[:1] in PICKLE_OPCODES else ""


def _sniff(data: bytes, kind: str) -> str | None:
    if kind == "parquet":
        if len(data) < 12 or data[:4] != PARQUET_MAGIC or data[-4:] != PARQUET_MAGIC:
            hint = " (it looks like a pickle)" if data[:1] in PICKLE_OPCODES else ""
            return f"is not a Parquet file{hint}; submissions are data only, JSON or Parquet"
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        hint = " (it looks like a pickle)" if data[:1] in PICKLE_OPCODES else ""
        return f"is not UTF-8 JSON{hint}; submissions are data only, JSON or Parquet"
    return None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (numbers must be finite)")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def parse_json(data: bytes, name: str) -> Any:
    """Strict JSON: rejects NaN/Infinity literals and duplicate keys, naming the file."""
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constants, object_pairs_hook=_no_duplicates)
    except ValueError as exc:
        raise SubmissionRejected([Problem(name, f"invalid JSON: {exc}")]) from None
