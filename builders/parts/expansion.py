"""Growing a context to a target length, and swapping spans for length-matched text.

A context is a list of `Unit`s, one segment each, so unified token counts add up exactly
(the counter sums per segment). Expansion interleaves unrelated filler after every unit in
proportion to its length, which keeps the relative start position of every unit (and so of
the key evidence). Padding appends filler at the end. Replacements are exactly as long, in
unified tokens, as the span they replace, so length gives nothing away.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from mmbench.data.documents import Image, Text
from mmbench.data.tokens import TextTokenizer, image_tokens

from mmbench.builders.sources.backgrounds import Background
from mmbench.builders.sources.records import Unit, image_unit, text_unit  # noqa: F401 - the units expansion works on

MIN_FILLER_CHUNK = 24   # smaller filler gaps are carried over to the next unit (no 2-token fragments)
ROUNDTRIP_TRIES = 6     # attempts to find a token cut whose decoded text re-encodes to the wanted count


def total_tokens(units: Sequence[Unit]) -> int:
    return sum(u.tokens for u in units)


def start_positions(units: Sequence[Unit]) -> list[float]:
    """Relative start of every unit: tokens before it over all tokens."""
    total = total_tokens(units) or 1
    out, pos = [], 0
    for u in units:
        out.append(pos / total)
        pos += u.tokens
    return out


# ---- exact-length text --------------------------------------------------------------------

def exact_text(tokenizer: TextTokenizer, ids: Sequence[int], n: int) -> tuple[str, int]:
    """Decode a prefix of `ids` whose text re-encodes to `n` tokens (BPE can merge across a cut).

    Returns the text and its real count, which equals `n` unless `ids` is too short or no
    prefix length near `n` round-trips (then the closest is returned).
    """
    if n <= 0:
        return "", 0
    best = ("", 0)
    for m in [n] + [n + d for k in range(1, ROUNDTRIP_TRIES) for d in (-k, k)]:
        if m <= 0 or m > len(ids):
            continue
        text = tokenizer.decode(ids[:m])
        count = len(tokenizer.encode(text))
        if count == n:
            return text, count
        if abs(count - n) < abs(best[1] - n) or not best[0]:
            best = (text, count)
    return best


def length_matched_text(tokenizer: TextTokenizer, paragraphs: Sequence[str], n: int, sep: str = " ") -> tuple[str, int]:
    """Coherent text of exactly `n` tokens: whole paragraphs joined, the last one cut short."""
    ids: list[int] = []
    for p in paragraphs:
        ids.extend(tokenizer.encode((sep if ids else "") + p))
        if len(ids) >= n + ROUNDTRIP_TRIES:
            break
    return exact_text(tokenizer, ids, n)


def boundary_matched_text(tokenizer: TextTokenizer, sentences: Sequence[str], n: int) -> tuple[str, str] | None:
    """Whole sentences of exactly `n` tokens, else whole sentences and whole words of the next one.

    Returns (text, "sentence" | "word"), or None when no cut at a word boundary gives exactly `n`
    tokens (the caller tries other text). Unlike `length_matched_text`, the text never ends mid-word.
    """
    done: list[str] = []
    for sent in sentences:
        sent = " ".join(sent.split())
        if not sent:
            continue
        whole = " ".join(done + [sent])
        count = len(tokenizer.encode(whole))
        if count == n:
            return whole, "sentence"
        if count > n:
            words = sent.split(" ")
            lo, hi = 1, len(words) - 1          # the longest prefix that is not too long, then its neighbours
            while lo <= hi:
                mid = (lo + hi) // 2
                if len(tokenizer.encode(" ".join(done + words[:mid]))) <= n:
                    lo = mid + 1
                else:
                    hi = mid - 1
            for w in (hi, hi - 1, hi + 1):
                if 1 <= w < len(words):
                    text = " ".join(done + words[:w])
                    if len(tokenizer.encode(text)) == n:
                        return text, "word"
            return None
        done.append(sent)
    return None


class Filler:
    """Unrelated natural text cut into exact-length pieces at word boundaries."""

    def __init__(self, text_ids: list[int], tokenizer: TextTokenizer, name: str) -> None:
        self.name = name
        self.tokenizer = tokenizer
        self._bg = Background(text_ids, tokenizer, make_image=_no_images, media=None)  # type: ignore[arg-type]

    @classmethod
    def from_text(cls, text: str, tokenizer: TextTokenizer, name: str) -> "Filler":
        ids = tokenizer.encode(text)
        if len(ids) < 1000:
            raise ValueError(f"filler corpus {name!r} is too small ({len(ids)} tokens; need at least 1000)")
        return cls(ids, tokenizer, name)

    @property
    def n_tokens(self) -> int:
        """Length of the filler corpus in tokens."""
        return len(self._bg.text_ids)

    def head_text(self, n_tokens: int) -> str:
        """The corpus's first `n_tokens` tokens as text (page-image filler renders it)."""
        return self.tokenizer.decode(self._bg.text_ids[:n_tokens])

    def piece(self, rng: np.random.Generator, n: int, role: str = "filler") -> Unit:
        """A filler unit of exactly `n` unified tokens (within the round-trip fallback)."""
        starts = self._bg.word_starts()
        start = int(starts[rng.integers(len(starts))]) if len(starts) else 0
        ids = self._bg.text_ids
        window: list[int] = []
        pos = start
        while len(window) < n + ROUNDTRIP_TRIES:
            window.extend(ids[pos:pos + n + ROUNDTRIP_TRIES - len(window)])
            pos = 0
        text, count = exact_text(self.tokenizer, window, n)
        return Unit(Text(text), count, role, f"filler:{self.name}@{start}")


def _no_images(index: int, side: int):
    raise RuntimeError("text filler has no images")


# ---- expansion and padding ----------------------------------------------------------------

def expand(units: Sequence[Unit], target: int, filler: Filler, rng: np.random.Generator) -> list[Unit]:
    """Insert filler after each unit, proportional to its length, to reach `target` tokens.

    Unit i then starts at (its original start) × target / original length, up to the
    carried-over rounding of small gaps, so evidence keeps its relative position.
    """
    base = total_tokens(units)
    if base > target:
        raise ValueError(f"context of {base} tokens does not fit the {target}-token target")
    extra = target - base
    out: list[Unit] = []
    owed = 0.0
    for u in units:
        out.append(u)
        owed += extra * u.tokens / base if base else 0.0
        if owed >= MIN_FILLER_CHUNK:
            n = int(owed)
            piece = filler.piece(rng, n)
            out.append(piece)
            owed -= piece.tokens
    return _settle(out, target, filler, rng)


def pad(units: Sequence[Unit], target: int, filler: Filler, rng: np.random.Generator) -> list[Unit]:
    """Append unrelated filler after the context to reach `target` tokens."""
    base = total_tokens(units)
    if base > target:
        raise ValueError(f"document of {base} tokens does not fit the {target}-token target")
    out = list(units)
    if target - base > 0:
        out.append(filler.piece(rng, target - base, role="padding"))
    return _settle(out, target, filler, rng)


def _settle(units: list[Unit], target: int, filler: Filler, rng: np.random.Generator) -> list[Unit]:
    """Absorb round-trip drift: redo the last filler piece so the total lands on `target`."""
    for _ in range(3):
        diff = target - total_tokens(units)
        if diff == 0:
            break
        idx = next((i for i in range(len(units) - 1, -1, -1) if units[i].role in ("filler", "padding")), None)
        if idx is None:
            if diff > 0:
                units.append(filler.piece(rng, diff, role="padding"))
            continue
        want = units[idx].tokens + diff
        if want <= 0:
            del units[idx]
        else:
            units[idx] = filler.piece(rng, want, role=units[idx].role)
    return units


def pad_pages(units: Sequence[Unit], target: int, make_page: Callable[[int, int, int], Image],
              page_size: tuple[int, int], rng: np.random.Generator) -> list[Unit]:
    """Append filler pages (full pages, then one cropped to the remaining rows) to reach `target`.

    `make_page(index, width, height)` returns a stored filler page image. The result is at most
    one visual-token row (width/32 tokens) short of `target`.
    """
    w, h = page_size
    per_page = image_tokens(w, h)
    out = list(units)
    remaining = target - total_tokens(out)
    if remaining < 0:
        raise ValueError(f"document of {total_tokens(out)} tokens does not fit the {target}-token target")
    order = rng.permutation(1 << 16)
    k = 0
    while remaining >= per_page:
        out.append(image_unit(make_page(int(order[k]), w, h), role="padding", source=f"filler-page:{int(order[k])}"))
        remaining -= per_page
        k += 1
    row = -(-w // 32)
    rows = remaining // row
    if rows > 0:
        out.append(image_unit(make_page(int(order[k]), w, rows * 32), role="padding",
                              source=f"filler-page:{int(order[k])}:rows={rows}"))
    return out


# ---- replacement ---------------------------------------------------------------------------

def replace_units(units: Sequence[Unit], start: int, stop: int, replacement: Sequence[Unit]) -> list[Unit]:
    """`units` with [start, stop) swapped for `replacement`, which must be exactly as long."""
    removed = total_tokens(units[start:stop])
    added = total_tokens(replacement)
    if removed != added:
        raise ValueError(f"replacement of {added} tokens does not match the removed span of {removed} tokens")
    return list(units[:start]) + [replace(u, role="replacement") if u.role != "replacement" else u
                                  for u in replacement] + list(units[stop:])
