"""Turn a listwise ranker's reply into a complete ranking, counting every repair.

The reply should be a JSON array of the image numbers 1..n. Whatever else arrives, the parser
finds the array, keeps each valid number once, and appends missing numbers in presented order.
Each kind of repair is counted; a reply without any usable array is a failure, never an exception.

Which array is the answer: every top-level array in the reply is a candidate (brackets inside an
array, such as `["[3]", "[1]"]` or `[[3], [1]]`, belong to it), and so is a cut-off array at the end.
The candidate naming the most distinct valid images wins, so a stray `[25]` in prose never beats
a longer (even cut-off) answer. On a tie, an array right after an answer cue ("ranking", "answer",
"final", "result") wins, the last such one (a revision supersedes a draft); without cues the first
wins (the reply was asked to be the array alone, so later arrays are commentary, e.g. an echo of
the presented order). A one-number array inside prose names an image rather than ranking them,
so it is used only after an answer cue; a bare or fenced short array is a partial answer and used.

The work is linear in the reply's length whatever it holds: an array read is never read again
(the search continues after it); the characters that failed tries read are counted, and the
search stops once they exceed `WORK_PER_CHAR` times the reply's length (only hostile replies get
there: ordinary failed tries stop within a few characters); whether an array has text around
it is answered from prefix counts. A string label longer than `MAX_LABEL_CHARS` names no image.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

REPAIRS = ("extracted", "unterminated", "syntax", "coerced", "duplicate", "unknown", "missing")
# extracted:    the array was cut out of surrounding text (prose, code fences, an object) or out of
#               an outer array (`[[3, 1, 2]]`); each layer counts once
# unterminated: the array was never closed (a cut-off reply); its numbers were salvaged
# syntax:       a flat array that is not JSON only because of a trailing comma (`[3, 1, 2,]`) was read
# coerced:      an element was not a plain integer ("3", "Image 3:", "[3]", [3], 3.0) but named one
# duplicate:    a number repeated; the later copy was dropped
# unknown:      an element that names no presented image (0, 26, "cat", null); dropped
# missing:      a presented image the reply left out; appended in presented order
# Used with fullmatch on a stripped string; each `\s*` follows a required token, so no two runs of
# whitespace compete for the same characters (an earlier form backtracked polynomially on blanks).
_LABEL = re.compile(r"(?:(?:image|img|picture|photo|id|candidate)\s*)?(?:(?:no\.?|number)\s*)?(?:#\s*)?"
                    r"(?:[\[(]\s*)?(\d{1,9})(?:\.0*)?(?:\s*[\])])?(?:\s*[:.])?", re.IGNORECASE)
MAX_LABEL_CHARS = 40     # longer strings name no image ("Candidate number #12345:" fits easily)
WORK_PER_CHAR = 8        # failed tries may read this many characters per character of the reply
_CUE = re.compile(r"\b(?:answer|ranking|ranked|final|result)\b", re.IGNORECASE)
_FENCE = re.compile(r"```[A-Za-z]*")
_TRAILING_COMMA = re.compile(r"\[([^\[\]]*?),\s*\]")   # a flat array closed right after a comma
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


@dataclass
class _Candidate:
    """One array found in the reply, with what it took to get it out."""

    values: list[Any]        # its elements (a lone inner array already unwrapped)
    valid: int               # distinct presented images it names
    extracted: int           # layers cut away: surrounding text, an outer array
    unterminated: bool       # salvaged from a reply cut off before ']'
    syntax: bool             # a trailing comma had to be dropped
    prose: bool              # the surrounding text has words (not just a code fence)
    cued: bool               # the text just before it announces an answer


def _number(digits: str) -> int:
    """An id from a run of digits; absurdly long runs are no id (0) rather than an int() error."""
    return int(digits) if len(digits) <= 9 else 0


def _label(value: Any, n: int) -> tuple[int | None, bool]:
    """(image number or None, whether it had to be coerced)."""
    coerced = False
    if isinstance(value, list) and len(value) == 1 and not isinstance(value[0], list):
        value, coerced = value[0], True                     # [[3], [1], [2]]: one number per inner array
    if isinstance(value, bool) or value is None:
        return None, False
    if isinstance(value, int):
        return (value if 1 <= value <= n else None), coerced
    if isinstance(value, float) and value.is_integer():
        v = int(value)
        return (v if 1 <= v <= n else None), True
    if isinstance(value, str):
        value = value.strip()
        m = _LABEL.fullmatch(value) if len(value) <= MAX_LABEL_CHARS else None
        if m:
            v = int(m.group(1))
            return (v if 1 <= v <= n else None), True
    return None, False


class _Text:
    """The reply with prefix counts, so that "is there text around this array?" costs O(1) per array."""

    def __init__(self, text: str) -> None:
        self.text = text
        fenced = bytearray(len(text))
        for m in _FENCE.finditer(text):          # a code fence's language tag is not prose
            fenced[m.start():m.end()] = b"\x01" * (m.end() - m.start())
        self._ink = [0]                          # non-whitespace characters before i
        self._letters = [0]                      # prose letters (ASCII, outside fences) before i
        for ch, f in zip(text, fenced):
            self._ink.append(self._ink[-1] + (not ch.isspace()))
            self._letters.append(self._letters[-1] + (not f and ch.isascii() and ch.isalpha()))

    @staticmethod
    def _outside(counts: list[int], start: int, end: int | None) -> int:
        return counts[start] + (0 if end is None else counts[-1] - counts[end])

    def surrounded(self, start: int, end: int | None) -> bool:
        return self._outside(self._ink, start, end) > 0

    def prose(self, start: int, end: int | None) -> bool:
        return self._outside(self._letters, start, end) > 0


def _candidate(t: _Text, values: list[Any], start: int, end: int | None, done: int, n: int,
               syntax: bool = False) -> _Candidate:
    """The array at text[start:end] (end None: cut off); `done` is where the previous array ended."""
    wrapped = len(values) == 1 and isinstance(values[0], list)
    if wrapped:
        values = values[0]
    valid = len({v for v in (_label(x, n)[0] for x in values) if v is not None})
    before = t.text[max(done, start - 60):start]
    return _Candidate(values, valid, int(t.surrounded(start, end)) + int(wrapped), end is None, syntax,
                      prose=t.prose(start, end), cued=bool(_CUE.search(before)))


def _unterminated(text: str) -> tuple[int, list[int]] | None:
    """(position, numbers) after the last '[' when the array was never closed (e.g. cut off by a token limit)."""
    start = text.rfind("[")
    if start < 0 or "]" in text[start:]:
        return None
    tail = text[start + 1:]
    if not re.fullmatch(r"[\s\d,\"']*", tail) or not re.search(r"\d", tail):
        return None
    return start, [_number(x) for x in re.findall(r"\d+", tail)]


def _decode_at(text: str, start: int) -> tuple[list[Any] | None, int, bool]:
    """(values or None, where reading stopped, trailing-comma repair used) for the array at `start`.

    On a failure, reading stopped where the decoder gave up; a nesting too deep to read has no position,
    so it counts as reading to the end of the text."""
    try:
        values, end = _DECODER.raw_decode(text, start)
        return (values if isinstance(values, list) else None), end, False
    except json.JSONDecodeError as exc:
        stopped = max(exc.pos, start + 1)
    except (ValueError, RecursionError):          # e.g. an integer too long to convert; nesting too deep
        stopped = len(text)
    m = _TRAILING_COMMA.match(text, start)     # stops at the first bracket after `start`
    if m:
        try:
            values = json.loads(f"[{m.group(1)}]")
        except (ValueError, RecursionError):
            values = None
        if isinstance(values, list):
            return values, m.end(), True
    return None, stopped, False


def _candidates(text: str, n: int) -> list[_Candidate]:
    """Every top-level JSON array in `text`, then a cut-off one at the end, in order of appearance.

    Each '[' not inside an array already read is tried; the characters read by failed tries are
    counted, and once they pass `WORK_PER_CHAR` times the reply's length the search stops."""
    t = _Text(text)
    found: list[_Candidate] = []
    done = 0                     # brackets before this index lie inside an array already read
    budget = WORK_PER_CHAR * len(text) + 1000
    start = text.find("[")
    while start >= 0 and budget > 0:
        values, end, syntax = _decode_at(text, start)
        if values is not None:
            found.append(_candidate(t, values, start, end, done, n, syntax))
            done = end
        else:
            budget -= end - start
        start = text.find("[", max(start + 1, done))
    tail = _unterminated(text)
    if tail is not None and tail[0] >= done:
        found.append(_candidate(t, tail[1], tail[0], None, done, n))
    return found


def _usable(c: _Candidate, n: int) -> bool:
    """Names a presented image, and is not merely one image mentioned in passing in prose."""
    return c.valid >= 1 and (not c.prose or c.cued or c.valid >= min(2, n))


def _pick(candidates: list[_Candidate], n: int) -> _Candidate | None:
    """Most valid ids; ties: the last array after an answer cue, else the first (see the module docstring)."""
    ranked = [(c.valid, c.cued, i if c.cued else -i, c) for i, c in enumerate(candidates) if _usable(c, n)]
    return max(ranked, key=lambda t: t[:3])[3] if ranked else None


def parse_ranking(text: str | None, n: int) -> ParsedRanking:
    """A full ranking of images 1..n from `text`, with per-kind repair counts."""
    if n < 1:
        raise ValueError("a ranking needs at least one image")
    if not text or not text.strip():
        return ParsedRanking([], failed=True, error="empty response")
    best = _pick(_candidates(text, n), n)
    if best is None:
        snippet = " ".join(text.split())[:120]
        return ParsedRanking([], failed=True, error=f"no JSON array of image numbers in the response: {snippet!r}")
    repairs = dict.fromkeys(REPAIRS, 0)
    repairs["extracted"], repairs["unterminated"] = best.extracted, int(best.unterminated)
    repairs["syntax"] = int(best.syntax)
    order: list[int] = []
    seen: set[int] = set()
    for value in best.values:
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
