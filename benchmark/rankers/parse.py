"""Turn a listwise ranker's reply into a complete ranking, counting every repair.

The reply should be a JSON array of the image numbers 1..n. Whatever else arrives, the parser
finds the array, keeps each valid number once, and appends missing numbers in presented order.
Each kind of repair is counted; a reply without any usable array is a failure, never an exception.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

REPAIRS = ("extracted", "unterminated", "coerced", "duplicate", "unknown", "missing")
# extracted:    the array was cut out of surrounding text (prose, code fences, an object)
# unterminated: the array was never closed (a cut-off reply); its numbers were salvaged
# coerced:      an element was not a plain integer ("3", "Image 3", 3.0) but named one
# duplicate:    a number repeated; the later copy was dropped
# unknown:      an element that names no presented image (0, 26, "cat", null); dropped
# missing:      a presented image the reply left out; appended in presented order
_LABEL = re.compile(r"^\s*(?:image|img|id|candidate)?\s*(?:no\.?|number)?\s*[#:]?\s*(\d+)\s*$", re.IGNORECASE)
_DECODER = json.JSONDecoder()


@dataclass
class ParsedRanking:
    order: list[int]                       # a permutation of 1..n, or [] when failed
    repairs: dict[str, int] = field(default_factory=dict)
    failed: bool = False
    error: str | None = None

    @property
    def n_repairs(self) -> int:
        return sum(self.repairs.values())


def _arrays(text: str) -> list[tuple[list[Any], bool]]:
    """Every JSON array in `text`, as (array, was_extracted), in order of appearance."""
    stripped = text.strip()
    try:
        whole = json.loads(stripped)
        if isinstance(whole, list):
            return [(whole, False)]
    except ValueError:
        pass
    found = []
    for m in re.finditer(r"\[", text):
        try:
            value, _ = _DECODER.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(value, list):
            found.append((value, True))
    return found


def _unterminated(text: str) -> list[Any] | None:
    """Numbers after the last '[' when the array was never closed (e.g. cut off by a token limit)."""
    start = text.rfind("[")
    if start < 0 or "]" in text[start:]:
        return None
    tail = text[start + 1:]
    if not re.fullmatch(r"[\s\d,\"']*", tail) or not re.search(r"\d", tail):
        return None
    return [int(x) for x in re.findall(r"\d+", tail)]


def _label(value: Any, n: int) -> tuple[int | None, bool]:
    """(image number or None, whether it had to be coerced)."""
    if isinstance(value, bool) or value is None:
        return None, False
    if isinstance(value, int):
        return (value if 1 <= value <= n else None), False
    if isinstance(value, float) and value.is_integer():
        v = int(value)
        return (v if 1 <= v <= n else None), True
    if isinstance(value, str):
        m = _LABEL.match(value)
        if m:
            v = int(m.group(1))
            return (v if 1 <= v <= n else None), True
    return None, False


def _valid_count(arr: list[Any], n: int) -> int:
    return len({v for v in (_label(x, n)[0] for x in _flatten(arr)) if v is not None})


def _flatten(arr: list[Any]) -> list[Any]:
    """`[[3, 1, 2]]` (one nested array) counts as `[3, 1, 2]`."""
    return arr[0] if len(arr) == 1 and isinstance(arr[0], list) else arr


def parse_ranking(text: str | None, n: int) -> ParsedRanking:
    """A full ranking of images 1..n from `text`, with per-kind repair counts."""
    if n < 1:
        raise ValueError("a ranking needs at least one image")
    if not text or not text.strip():
        return ParsedRanking([], failed=True, error="empty response")
    repairs = dict.fromkeys(REPAIRS, 0)
    arrays = _arrays(text)
    if not arrays:
        salvaged = _unterminated(text)
        if salvaged is not None:
            arrays = [(salvaged, True)]
            repairs["unterminated"] = 1
    scored = [(i, arr, extracted, _valid_count(arr, n)) for i, (arr, extracted) in enumerate(arrays)]
    best = max(scored, key=lambda t: (t[3], t[0]), default=None)  # most valid numbers; ties: the last one
    if best is None or best[3] == 0:
        snippet = " ".join(text.split())[:120]
        return ParsedRanking([], failed=True, error=f"no JSON array of image numbers in the response: {snippet!r}")
    _, arr, extracted, _ = best
    repairs["extracted"] = int(extracted)
    order: list[int] = []
    seen: set[int] = set()
    for value in _flatten(arr):
        label, coerced = _label(value, n)
        if label is None:
            repairs["unknown"] += 1
            continue
        repairs["coerced"] += int(coerced)
        if label in seen:
            repairs["duplicate"] += 1
            continue
        seen.add(label)
        order.append(label)
    missing = [i for i in range(1, n + 1) if i not in seen]
    repairs["missing"] = len(missing)
    return ParsedRanking(order + missing, {k: v for k, v in repairs.items() if v})
