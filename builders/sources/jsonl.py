"""Reading JSON-lines source files with error messages that name the file and line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator


def read_jsonl(path: str | Path) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Yield (`file:line`, line number, record) for each non-blank line; every record must be an object."""
    path = Path(path)
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{where}: invalid JSON ({exc})") from exc
            if not isinstance(rec, dict):
                raise ValueError(f"{where}: expected a JSON object")
            yield where, lineno, rec
