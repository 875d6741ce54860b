"""Reading source files (JSON lines, JSON, text) with errors that name the file, the line and the field.

Every source reader goes through these helpers, so a file that is not UTF-8, a line that is not
JSON, or a field of the wrong type is reported as `path:line: ...` instead of a bare
`'utf-8' codec can't decode byte 0xff in position 7` or `'int' object has no attribute 'strip'`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Mapping

# Names for JSON types in messages ("expected text, got a number").
_JSON_NAMES = {str: "text", int: "a number", float: "a number", bool: "true/false", list: "a list", dict: "an object",
               type(None): "null"}


def _kind(value: Any) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)


def _decode(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                         "save the file as UTF-8") from None


def read_text(path: str | Path, encoding: str = "utf-8") -> str:
    """A whole text file; a byte that is not UTF-8 is reported with its line and column.

    `encoding` may be "utf-8-sig" to drop a byte-order mark.
    """
    path = Path(path)
    raw = path.read_bytes()
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ValueError(f"{path}:{line}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {column}); "
                         "save the file as UTF-8") from None


def read_json(path: str | Path) -> Any:
    """A whole JSON file; invalid JSON is reported with its line and column."""
    path = Path(path)
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: invalid JSON at column {exc.colno} ({exc.msg})") from None


def check_fields(rec: Mapping[str, Any], where: str, fields: Mapping[str, type | tuple[type, ...]]) -> None:
    """Raise ValueError naming `where` and the field when a present field has a type other than expected.

    Absent fields and nulls pass: readers decide which fields are required and what a default is.
    """
    for name, expected in fields.items():
        value = rec.get(name)
        if value is None:
            continue
        types = expected if isinstance(expected, tuple) else (expected,)
        if isinstance(value, bool) and bool not in types:  # JSON true/false is not a number here
            ok = False
        else:
            ok = isinstance(value, types)
        if not ok:
            wanted = " or ".join(dict.fromkeys(_JSON_NAMES.get(t, t.__name__) for t in types))
            shown = json.dumps(value, ensure_ascii=False, default=str)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise ValueError(f"{where}: field {name!r}: expected {wanted}, got {_kind(value)} ({shown})")


def read_jsonl(path: str | Path, fields: Mapping[str, type | tuple[type, ...]] | None = None
               ) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Yield (`file:line`, line number, record) for each non-blank line; every record must be an object.

    Lines are decoded one by one, so a byte that is not UTF-8 is reported with its line; `fields`
    (name -> expected type or types) checks the types of those fields in every record.
    """
    path = Path(path)
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            where = f"{path}:{lineno}"
            line = _decode(raw, where)
            if lineno == 1 and line.startswith("\ufeff"):  # a byte-order mark some editors write
                line = line[1:]
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{where}: invalid JSON ({exc})") from exc
            if not isinstance(rec, dict):
                raise ValueError(f"{where}: expected a JSON object, got {_kind(rec)}")
            if fields:
                check_fields(rec, where, fields)
            yield where, lineno, rec
