"""Haystack material: a long text and a stream of images, from the sample or from OBELICS.

A `Background` exposes the text as Qwen3 token ids (so windows of an exact size can be cut)
and images at a requested square size, stored content-addressed in the build's media folder.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from PIL import Image as PILImage, UnidentifiedImageError

from mmbench.data.drops import DropLog
from mmbench.data.documents import Image
from mmbench.data.media import MediaStore
from mmbench.data.tokens import TextTokenizer, length_label

from mmbench.builders.sources import procedural


@dataclass
class Background:
    """Token ids of a long text plus a fixed-size pool of images per square side."""

    text_ids: list[int]
    tokenizer: TextTokenizer
    make_image: Callable[[int, int], PILImage.Image]  # (index, side) -> image
    media: MediaStore
    pool_size: int = 48
    _stored: dict[tuple[int, int], Image] = field(default_factory=dict)
    _word_starts: np.ndarray | None = None

    def word_starts(self) -> np.ndarray:
        """Positions of tokens that begin with whitespace: safe places to cut the text."""
        if self._word_starts is None:
            vocab: dict[int, bool] = {}
            flags = np.zeros(len(self.text_ids), dtype=bool)
            for i, t in enumerate(self.text_ids):
                if t not in vocab:
                    piece = self.tokenizer.decode([t])
                    vocab[t] = bool(piece) and piece[0].isspace()
                flags[i] = vocab[t]
            self._word_starts = np.flatnonzero(flags)
        return self._word_starts

    def text_window(self, rng: np.random.Generator, n_tokens: int) -> list[int]:
        """`n_tokens` consecutive ids starting at a word boundary (wrapping around the text)."""
        if n_tokens <= 0:
            return []
        starts = self.word_starts()
        start = int(starts[rng.integers(len(starts))]) if len(starts) else 0
        ids = self.text_ids
        out: list[int] = []
        while len(out) < n_tokens:
            out.extend(ids[start:start + n_tokens - len(out)])
            start = 0
        return out

    def image(self, index: int, side: int) -> Image:
        key = (index % self.pool_size, side)
        if key not in self._stored:
            img = self.make_image(key[0], side)
            self._stored[key] = self.media.put_image(img, format="JPEG")
        return self._stored[key]


def text_reach(n_tokens: int, lengths: Sequence[int], what: str) -> DropLog | None:
    """When a requested bin is longer than a text corpus of `n_tokens` (a haystack, a filler), a document of
    that bin built from it wraps around and repeats part of it: the corpus counted per bin as long enough
    or too short, under the name `what` (None when every bin fits)."""
    if all(L <= n_tokens for L in lengths):
        return None
    log = DropLog(what)
    log.keep()
    for L in sorted(lengths):
        log.measure(length_label(L), n_tokens >= L)
        log.note_bin(length_label(L), built=True)
    return log


def sample_background(tokenizer: TextTokenizer, media: MediaStore, seed: int, pool_size: int = 48) -> Background:
    """Python's Language Reference as text; procedural scenes and textures as images."""
    from mmbench.builders.sources.needles import sample_background_text

    def make(index: int, side: int) -> PILImage.Image:
        return procedural.scene(side, side, seed * 1_000_003 + index)

    return Background(tokenizer.encode(sample_background_text()), tokenizer, make, media, pool_size)


def obelics_background(path: Path, tokenizer: TextTokenizer, media: MediaStore, max_docs: int | None = None,
                       pool_size: int = 48, drops: DropLog | None = None,
                       leave_out: Callable[[str], bool] | None = None,
                       left_out: DropLog | None = None) -> Background:
    """An OBELICS-format parquet: `texts` and `images` lists aligned per document.

    Each `images` entry is None, a file path (absolute or relative to the parquet), raw
    bytes, or a `{"bytes": ..., "path": ...}` dict (the `datasets` Image encoding). OBELICS
    itself ships URLs: `mmbench prepare obelics` maps them to local files first. Images are
    decoded in order until `pool_size` are readable; with `drops`, an unusable one is counted
    with its reason and skipped, without it the first one stops the read. Text paragraphs for
    which `leave_out` is true (they name what a query asks about) are not used, and counted in
    `left_out`.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"OBELICS parquet {path} not found")
    table = pq.read_table(path)
    for col in ("texts", "images"):
        if col not in table.column_names:
            raise ValueError(f"{path}: column {col!r} missing (OBELICS format has `texts` and `images`)")
    texts: list[str] = []
    images: list[tuple[int, object]] = []
    for row, (t_list, i_list) in enumerate(zip(table.column("texts").to_pylist(), table.column("images").to_pylist())):
        if max_docs is not None and row >= max_docs:
            break
        if t_list is None or i_list is None or len(t_list) != len(i_list):
            raise ValueError(f"{path}: row {row}: `texts` and `images` must be lists of equal length")
        for t in t_list:
            if not t:
                continue
            if leave_out is not None and leave_out(t):
                if left_out is not None:
                    left_out.drop("names a query's entity or holds an anchor sentence", f"{path.name}: row {row}")
                continue
            if left_out is not None:
                left_out.keep()
            texts.append(t)
        images.extend((row, im) for im in i_list if im is not None)
    if not texts:
        raise ValueError(f"{path}: no text found")
    if not images:
        raise ValueError(f"{path}: no images found")
    decoded: list[PILImage.Image] = []
    for row, im in images:
        if len(decoded) == pool_size:
            break
        try:
            decoded.append(_decode_obelics_image(path, row, im))
        except ImageEntryError as exc:
            if drops is None:
                raise
            drops.drop(exc.reason, f"{path.name}: row {row}")
            continue
        if drops is not None:
            drops.keep()
    if not decoded:
        top = ", ".join(f"{r} ×{n}" for r, n in drops.reasons.most_common(2)) if drops else ""
        raise ValueError(f"{path}: none of its {len(images)} images is readable ({top}); OBELICS ships URLs: "
                         "run `mmbench prepare obelics` to map them to local files")

    def make(index: int, side: int) -> PILImage.Image:
        return _square(decoded[index % len(decoded)], side)

    return Background(tokenizer.encode("\n\n".join(texts)), tokenizer, make, media, min(pool_size, len(decoded)))


class ImageEntryError(ValueError):
    """An OBELICS image entry that cannot be used; `reason` is its kind, for the drop counts."""

    def __init__(self, where: str, reason: str, detail: str = "") -> None:
        super().__init__(f"{where}: {reason}{f' ({detail})' if detail else ''}")
        self.reason = reason


def _decode_obelics_image(parquet: Path, row: int, entry: object) -> PILImage.Image:
    where = f"{parquet}: row {row}"
    data: bytes | None = None
    ref: str | None = None
    if isinstance(entry, dict):
        data, ref = entry.get("bytes"), entry.get("path")
    elif isinstance(entry, (bytes, bytearray)):
        data = bytes(entry)
    elif isinstance(entry, str):
        ref = entry
    if data is None and ref:
        if ref.startswith(("http://", "https://")):
            raise ImageEntryError(where, "image is a URL", f"{ref}; run `mmbench prepare obelics` to map URLs to files")
        p = Path(ref) if Path(ref).is_absolute() else parquet.parent / ref
        if not p.is_file():
            raise ImageEntryError(where, "image file not found", str(p))
        data = p.read_bytes()
    if data is None:
        raise ImageEntryError(where, "unreadable image entry", f"of type {type(entry).__name__}")
    try:
        with PILImage.open(io.BytesIO(data)) as im:
            return im.convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise ImageEntryError(where, "corrupt image", str(exc)) from exc


def _square(img: PILImage.Image, side: int) -> PILImage.Image:
    w, h = img.size
    s = min(w, h)
    box = ((w - s) // 2, (h - s) // 2, (w - s) // 2 + s, (h - s) // 2 + s)
    return img.crop(box).resize((side, side), PILImage.BICUBIC)


