"""Reading JSON-lines source files with error messages that name the file and line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator


def read_jsonl(path: str | Path) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Yield (`file:line`, line number, record) for each non-blank line; every record must be an object."""
    path = Path(path)
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            where = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"{where}: not UTF-8 (byte {raw[exc.start]:#04x} at column {exc.start + 1})") from None
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{where}: invalid JSON ({exc})") from exc
            if not isinstance(rec, dict):
                raise ValueError(f"{where}: expected a JSON object")
            yield where, lineno, rec
