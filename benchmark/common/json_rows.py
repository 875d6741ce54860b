"""Many small JSON texts (a table's meta column, a cache pack's rows) parsed as one JSON array: one call into the
parser instead of one per row, which was most of reading them."""
from __future__ import annotations

import json
from typing import Any, Sequence


class JSONRowError(ValueError):
    """Row `index` is not one JSON value; `reason` is the parser's message."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"row {index}: {reason}")
        self.index, self.reason = index, reason


def parse_json_rows(rows: Sequence[str | bytes]) -> list[Any]:
    """The JSON value of each row, in order; the first row that is not one JSON value is a JSONRowError."""
    if not rows:
        return []
    try:
        joined: str | bytes = (b"[" + b",".join(rows) + b"]" if isinstance(rows[0], bytes)  # type: ignore[arg-type]
                               else "[" + ",".join(rows) + "]")  # type: ignore[arg-type]
        values = json.loads(joined)
        if isinstance(values, list) and len(values) == len(rows):
            return values
    except (TypeError, ValueError):
        pass
    for i, row in enumerate(rows):  # which row: one at a time
        try:
            json.loads(row)
        except (TypeError, ValueError) as exc:
            raise JSONRowError(i, str(exc)) from None
    raise JSONRowError(len(rows) - 1, f"{len(rows)} rows do not parse as {len(rows)} JSON values")
