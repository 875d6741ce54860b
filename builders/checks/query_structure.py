"""What a query states about structure, against what each candidate's structure is: the query-aware probe's reading.

A ranker that counts can solve a pool without understanding it when the query states a number that only the
relevant candidate's structure has ("... over 37 paragraphs" and one candidate with 37 text segments). `numbers`
reads every number a query states (digits, with thousands separators, and the number words zero to twenty);
`counts` measures a candidate's structure in every unit a query could name: text segments, paragraphs (blank-line
separated), lines, sentences, words, characters, unified tokens, images (a page document's pages), video frames and
videos. `structural_rows` gives, per candidate of a pool, for each unit: whether some stated number equals the
count, and the smallest relative distance |count - n| / max(1, n) to a stated number (capped at `FAR`; `FAR` when
the query states none), plus the log ratio of the candidate's tokens to the query's. The probe
(`mmbench.builders.checks.probe`) turns them pool-relative and learns from them; the Logical Summarization test
uses `unique_picks` to show its sample states no count that picks one candidate.
"""
from __future__ import annotations

import math
import re
from typing import Iterable

from mmbench.data.documents import Document, Image, Text, Video

UNITS = ("text_segments", "paragraphs", "lines", "sentences", "words", "chars", "tokens", "images",
         "video_frames", "videos")
FAR = 10.0
_DIGITS = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?![\w])|(?<![\w.])\d+(?![\w])")
_NUMBER_WORDS = {w: k for k, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_WORD = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"[.!?。！？]+(?=\s|$)")


def numbers(text: str) -> list[int]:
    """Every number the text states, in order: digit runs (1,234 read as 1234) and the words zero to twenty."""
    found = [int(m.group().replace(",", "")) for m in _DIGITS.finditer(text)]
    found += [_NUMBER_WORDS[w] for w in _WORD.findall(text.casefold()) if w in _NUMBER_WORDS]
    return found


def counts(doc: Document) -> dict[str, int]:
    """The candidate's structure in every unit of UNITS."""
    texts = [s.text for s in doc.segments if isinstance(s, Text)]
    return {"text_segments": len(texts),
            "paragraphs": sum(sum(1 for p in re.split(r"\n\s*\n", t) if p.strip()) for t in texts),
            "lines": sum(sum(1 for ln in t.splitlines() if ln.strip()) for t in texts),
            "sentences": sum(len(_SENTENCE_END.findall(t)) or int(bool(t.strip())) for t in texts),
            "words": sum(len(_WORD.findall(t)) for t in texts),
            "chars": sum(len(t) for t in texts),
            "tokens": int(doc.tokens),
            "images": sum(isinstance(s, Image) for s in doc.segments),
            "video_frames": sum(len(s.frames) for s in doc.segments if isinstance(s, Video)),
            "videos": sum(isinstance(s, Video) for s in doc.segments)}


def feature_names() -> list[str]:
    return [f"{u}:{k}" for u in UNITS for k in ("stated", "distance")] + ["token_ratio"]


def structural_rows(query: Document, cands: Iterable[Document], cache: dict[str, dict[str, int]]) -> list[list[float]]:
    """One raw row per candidate (feature_names order): per unit, 1.0 when a stated number equals the count, and
    the smallest relative distance to a stated number; then log((tokens + 1) / (query tokens + 1))."""
    stated = sorted(set(numbers(query.text)))
    rows = []
    for c in cands:
        got = cache.get(c.id)
        if got is None:
            got = cache[c.id] = counts(c)
        row: list[float] = []
        for u in UNITS:
            v = got[u]
            row.append(float(v in stated))
            row.append(min((min(FAR, abs(v - n) / max(1, n)) for n in stated), default=FAR))
        row.append(math.log((got["tokens"] + 1) / (int(query.tokens) + 1)))
        rows.append(row)
    return rows


def unique_picks(query: Document, cands: list[Document]) -> list[tuple[int, str, int]]:
    """(stated number, unit, candidate index) for each stated number that equals exactly one candidate's count."""
    table = [counts(c) for c in cands]
    out = []
    for n in sorted(set(numbers(query.text))):
        for u in UNITS:
            hit = [k for k, t in enumerate(table) if t[u] == n]
            if len(hit) == 1:
                out.append((n, u, hit[0]))
    return out
