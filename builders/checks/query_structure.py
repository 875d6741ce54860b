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

import numpy as np

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


def text_counts(text: str) -> tuple[int, int, int, int]:
    """One text segment's paragraphs, non-blank lines, sentences and words (`counts` adds them up)."""
    return (sum(1 for p in re.split(r"\n\s*\n", text) if p.strip()),
            sum(1 for ln in text.splitlines() if ln.strip()),
            len(_SENTENCE_END.findall(text)) or int(bool(text.strip())),
            len(_WORD.findall(text)))


def counts(doc: Document, memo: dict[str, tuple[int, int, int, int]] | None = None) -> dict[str, int]:
    """The candidate's structure in every unit of UNITS. `memo` (text -> `text_counts`) counts a text segment that
    many candidates share once: every unit but tokens, images and frames is a sum over the text segments."""
    texts = [s.text for s in doc.segments if isinstance(s, Text)]
    per = [text_counts(t) if memo is None else memo[t] if t in memo else memo.setdefault(t, text_counts(t))
           for t in texts]
    return {"text_segments": len(texts),
            "paragraphs": sum(c[0] for c in per),
            "lines": sum(c[1] for c in per),
            "sentences": sum(c[2] for c in per),
            "words": sum(c[3] for c in per),
            "chars": sum(len(t) for t in texts),
            "tokens": int(doc.tokens),
            "images": sum(isinstance(s, Image) for s in doc.segments),
            "video_frames": sum(len(s.frames) for s in doc.segments if isinstance(s, Video)),
            "videos": sum(isinstance(s, Video) for s in doc.segments)}


def feature_names() -> list[str]:
    return [f"{u}:{k}" for u in UNITS for k in ("stated", "distance")] + ["token_ratio"]


class CountTable:
    """Each candidate's `counts` (by id) as a row of UNITS, each text segment counted once."""

    def __init__(self) -> None:
        self.by_id: dict[str, np.ndarray] = {}
        self.texts: dict[str, tuple[int, int, int, int]] = {}

    def __call__(self, doc: Document) -> np.ndarray:
        got = self.by_id.get(doc.id)
        if got is None:
            c = counts(doc, self.texts)
            got = self.by_id[doc.id] = np.array([c[u] for u in UNITS], dtype=np.int64)
        return got


def structural_rows(query: Document, cands: Iterable[Document], counter: CountTable) -> np.ndarray:
    """One raw row per candidate (feature_names order): per unit, 1.0 when a stated number equals the count, and
    the smallest relative distance |count - n| / max(1, n) to a stated number (capped at FAR; FAR when none is
    stated); then log((tokens + 1) / (query tokens + 1)). Integer counts and numbers exact in a float make numpy's
    float quotient the correctly rounded one Python's int / int gives (both below 2^52, so is the difference)."""
    cands = list(cands)
    stated = sorted(set(numbers(query.text)))
    table = np.vstack([counter(c) for c in cands]) if cands else np.zeros((0, len(UNITS)), dtype=np.int64)
    out = np.empty((len(cands), 2 * len(UNITS) + 1))
    if len(stated) == 0:
        out[:, 0:-1:2], out[:, 1:-1:2] = 0.0, FAR
    elif max(stated) < 2 ** 52 and (len(table) == 0 or table.max() < 2 ** 52):
        n = np.array(stated, dtype=np.int64)
        out[:, 0:-1:2] = np.isin(table, n)
        out[:, 1:-1:2] = np.minimum(FAR, np.abs(table[:, :, None] - n) / np.maximum(1, n)).min(axis=2)
    else:    # a number past int64 (a stated 30-digit figure): Python's exact integers
        for k, row in enumerate(table.tolist()):
            out[k, 0:-1:2] = [float(v in stated) for v in row]
            out[k, 1:-1:2] = [min(min(FAR, abs(v - m) / max(1, m)) for m in stated) for v in row]
    q = int(query.tokens) + 1
    out[:, -1] = [math.log((int(t) + 1) / q) for t in table[:, UNITS.index("tokens")]]
    return out


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
