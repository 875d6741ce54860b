"""The document model: every query and candidate is an ordered list of segments.

Segments are `Text`, `Image` (a reference into a pool set's media folder) and `Video`
(an ordered list of frame references sampled at `fps`). Reading order matters: needles
have a depth. Documents serialise to plain JSON so pool sets stay readable without mmbench.
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Union


@dataclass(frozen=True)
class Text:
    """A run of text, read in order with the document's other segments."""

    text: str
    kind: str = field(default="text", init=False)


@dataclass(frozen=True)
class Image:
    """An image stored in the pool set's media folder; `ref` is its relative path."""

    ref: str
    width: int
    height: int
    kind: str = field(default="image", init=False)


@dataclass(frozen=True)
class Video:
    """A video as frames already sampled at `fps` (each frame is an image ref)."""

    frames: tuple[str, ...]
    fps: float
    width: int
    height: int
    kind: str = field(default="video", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "frames", tuple(self.frames))


Segment = Union[Text, Image, Video]


@dataclass
class Document:
    """One query or candidate: ordered segments plus metadata written by the builder."""

    id: str
    segments: list[Segment]
    tokens: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def modalities(self) -> set[str]:
        return {s.kind for s in self.segments}

    @property
    def text(self) -> str:
        """All text segments joined in reading order (what a text-only model sees)."""
        return "\n".join(s.text for s in self.segments if isinstance(s, Text))

    def media_refs(self) -> list[str]:
        """The media files the document refers to, in reading order (an image's ref, each video frame's)."""
        refs: list[str] = []
        for s in self.segments:
            if isinstance(s, Image):
                refs.append(s.ref)
            elif isinstance(s, Video):
                refs.extend(s.frames)
        return refs

    def content_hash(self) -> str:
        """Hash of the segments only (not the id or metadata): keys the embedding cache.

        Remembered for the segments it was computed from (segments are immutable; the list is compared
        element by element, by identity first), so an edited list is hashed again."""
        segments = tuple(self.segments)
        memo = self.__dict__.get("_hash_memo")
        if memo is not None and memo[0] == segments:
            return memo[1]
        payload = json.dumps(segments_to_json(self.segments), sort_keys=True, ensure_ascii=False)
        digest = hashlib.sha256(payload.encode("utf-8")).hexdigest()
        self.__dict__["_hash_memo"] = (segments, digest)
        return digest

    def known_content_hash(self, digest: str) -> None:
        """Take `digest` as the content hash of the current segments (one computed earlier from the very
        same record, see mmbench.data.hash_memo); an edit of the segments afterwards is hashed again."""
        self.__dict__["_hash_memo"] = (tuple(self.segments), digest)

    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "segments": json.dumps(segments_to_json(self.segments), ensure_ascii=False),
            "tokens": int(self.tokens),
            "meta": json.dumps(self.meta, sort_keys=True, ensure_ascii=False),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "Document":
        where = f"document {record.get('id', '?')!r}"
        try:
            segments = segments_from_json(json.loads(record["segments"]))
            meta = json.loads(record.get("meta") or "{}")
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{where}: malformed record ({exc})") from exc
        return cls(id=str(record["id"]), segments=segments, tokens=int(record.get("tokens") or 0), meta=meta)


_RAW = object()  # a content-hash memo made for a record's segments before they were decoded
_DECODING = threading.Lock()  # a document's segments are decoded once, even when ranker threads ask together


class DeferredText:
    """One cell of a table's text column, read from the table's bytes only when first asked for (`source` is
    shared by the column's cells: `source.value(index)`); a warm run that needs no segments never reads them.
    Pickled, it is the text itself, so a document sent to a worker never carries its whole table."""

    __slots__ = ("_source", "_index")

    def __init__(self, source: Any, index: int) -> None:
        self._source, self._index = source, index

    def text(self) -> str:
        value = self._source.value(self._index)
        if not isinstance(value, str):
            raise TypeError(f"segments must be JSON text, got {type(value).__name__}")
        return value

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (str, (self.text(),))


class RecordDocument(Document):
    """A document of a pool set table whose bytes verified against its manifest (see `load_poolset`): its
    segments, most of a document's size, are decoded from the record's JSON on first use, so a warm run
    that only needs ids and content hashes never decodes them. Otherwise it is a `Document`."""

    @classmethod
    def sealed(cls, doc_id: str, tokens: int, meta: dict[str, Any], raw: str | DeferredText) -> "RecordDocument":
        """A document of a sealed table: its id, token count and meta as read, its segments' JSON text `raw`."""
        doc = cls.__new__(cls)
        doc.__dict__.update(id=doc_id, tokens=tokens, meta=meta, _raw=raw)
        return doc

    @property
    def segments(self) -> list[Segment]:
        if "_raw" in self.__dict__:
            with _DECODING:
                self._decode()
        return self.__dict__["_segments"]

    @segments.setter
    def segments(self, value: list[Segment]) -> None:
        self.__dict__.pop("_raw", None)
        self.__dict__.pop("_hash_memo", None)
        self.__dict__["_segments"] = value

    def _decode(self) -> None:
        raw = self.__dict__.get("_raw")
        if raw is not None:  # None once another thread has decoded them
            try:
                segments = segments_from_json(json.loads(raw if isinstance(raw, str) else raw.text()))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"document {self.id!r}: malformed record ({exc})") from exc
            self.__dict__["_segments"] = segments
            del self.__dict__["_raw"]
            memo = self.__dict__.get("_hash_memo")
            if memo is not None and memo[0] is _RAW:  # made for exactly these segments
                self.__dict__["_hash_memo"] = (tuple(segments), memo[1])

    def __eq__(self, other: object) -> bool:  # equal to the plain Document of the same record
        if not isinstance(other, Document):
            return NotImplemented
        return (self.id, self.segments, self.tokens, self.meta) == (other.id, other.segments, other.tokens, other.meta)

    __hash__ = None  # type: ignore[assignment]  # mutable, like Document

    def content_hash(self) -> str:
        memo = self.__dict__.get("_hash_memo")
        if "_raw" in self.__dict__ and memo is not None and memo[0] is _RAW:
            return memo[1]
        return super().content_hash()

    def known_content_hash(self, digest: str) -> None:
        if "_raw" in self.__dict__:
            self.__dict__["_hash_memo"] = (_RAW, digest)
        else:
            super().known_content_hash(digest)


def segments_to_json(segments: list[Segment]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in segments:
        if isinstance(s, Text):
            out.append({"kind": "text", "text": s.text})
        elif isinstance(s, Image):
            out.append({"kind": "image", "ref": s.ref, "width": s.width, "height": s.height})
        elif isinstance(s, Video):
            out.append({"kind": "video", "frames": list(s.frames), "fps": s.fps,
                        "width": s.width, "height": s.height})
        else:
            raise TypeError(f"not a segment: {s!r}")
    return out


def segments_from_json(items: list[dict[str, Any]]) -> list[Segment]:
    out: list[Segment] = []
    if not isinstance(items, list):
        raise ValueError(f"segments must be a list, got {type(items).__name__}")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"segment {i} must be an object, got {type(item).__name__}")
        kind = item.get("kind")
        try:
            if kind == "text":
                out.append(Text(item["text"]))
            elif kind == "image":
                out.append(Image(item["ref"], int(item["width"]), int(item["height"])))
            elif kind == "video":
                out.append(Video(tuple(item["frames"]), float(item["fps"]), int(item["width"]), int(item["height"])))
            else:
                raise ValueError(f"unknown segment kind {kind!r}")
        except KeyError as exc:
            raise ValueError(f"segment {i} ({kind}): missing field {exc}") from exc
    return out
