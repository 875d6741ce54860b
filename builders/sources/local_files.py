"""A user's own documents and queries, read from local files in one of two documented layouts.

**JSONL** (`format: jsonl`): a documents file, one JSON object a line::

    {"id": "r1", "text": "The whole report ..."}
    {"id": "r2", "segments": [{"text": "A caption"}, {"image": "img/r2.png"}, {"video": ["f0.png", "f1.png"], "fps": 1}]}

and a queries file, one object a line, naming the relevant documents by id::

    {"id": "q1", "text": "What does the report say about ...?", "relevant": ["r1"]}

(a query may hold `segments` too). Media paths are relative to `media_root` (default: the documents file's folder).

**mteb** (`format: mteb`): mteb's retrieval layout as `mmbench export --format mteb` writes it, a folder with
`corpus/`, `queries/` and `qrels/` parquet files (columns `id`, `text`, optional `media`, a JSON list of image
paths relative to the folder; qrels `query-id`, `corpus-id`, `score`), `<subset>-corpus/` etc. for another mteb
subset; or the BEIR files mteb also reads: `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl` (`_id`,
`text`) and `qrels/<split>.tsv`. A qrels score above 0 marks a relevant document. A corpus row's text comes
first, then its media, in the order listed.

Every problem is a `SourceError` naming the file, the record (line or row) and the field. Records come back in
id order, so the same data in either layout reads the same.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from mmbench.builders.sources.jsonl import read_jsonl

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp")


class SourceError(ValueError):
    """A source file, record or field that cannot be read; the message names all three."""


@dataclass(frozen=True)
class MediaFile:
    """An image file a record names: its bytes, pixel size and the suffix to store it under."""

    data: bytes
    width: int
    height: int
    suffix: str


@dataclass(frozen=True)
class SourceSegment:
    """One segment of a source record: text, an image, or a video's frames at `fps`."""

    kind: str                                  # text | image | video
    text: str = ""
    media: tuple[MediaFile, ...] = ()
    fps: float = 0.0


@dataclass
class SourceRecord:
    """A document or a query as the source states it."""

    id: str
    segments: list[SourceSegment]
    where: str                                 # file:line or file:row N, for messages
    relevant: list[str] = field(default_factory=list)   # queries: the relevant document ids

    @property
    def text(self) -> str:
        return "\n".join(s.text for s in self.segments if s.kind == "text")


@dataclass
class LocalSource:
    documents: list[SourceRecord]
    queries: list[SourceRecord]
    files: list[Path]                          # what was read, for the manifest's fingerprints


def read_local_source(spec: dict[str, Any], base: Path) -> LocalSource:
    """The documents and queries `spec` (a task file's `sources`) names; relative paths are under `base`."""
    if spec["format"] == "jsonl":
        docs_path, queries_path = base / spec["documents"], base / spec["queries"]
        root = base / spec["media_root"] if spec.get("media_root") else docs_path.parent
        for path, name in ((docs_path, "documents"), (queries_path, "queries")):
            if not path.is_file():
                raise SourceError(f"{path}: sources.{name}: no such file")
        docs = [_jsonl_record(where, rec, root, query=False) for where, _, rec in read_jsonl(docs_path)]
        queries = [_jsonl_record(where, rec, root, query=True) for where, _, rec in read_jsonl(queries_path)]
        files = [docs_path, queries_path]
    else:
        folder = base / spec["folder"]
        if not folder.is_dir():
            raise SourceError(f"{folder}: sources.folder: no such folder")
        docs, queries, files = _mteb(folder, spec.get("subset", "default"), spec.get("split", "test"))
    _check_ids(docs, "document")
    _check_ids(queries, "query")
    known = {d.id for d in docs}
    for q in queries:
        for rid in q.relevant:
            if rid not in known:
                raise SourceError(f"{q.where}: field 'relevant': document {rid!r} is not in the documents")
    return LocalSource(sorted(docs, key=lambda d: d.id), sorted(queries, key=lambda q: q.id), files)


def _check_ids(records: list[SourceRecord], what: str) -> None:
    seen: dict[str, str] = {}
    for r in records:
        if r.id in seen:
            raise SourceError(f"{r.where}: field 'id': {what} id {r.id!r} already used at {seen[r.id]}")
        seen[r.id] = r.where
    if not records:
        raise SourceError(f"no {what} records in the source")

# ---- JSONL -------------------------------------------------------------------------------

def _jsonl_record(where: str, rec: dict[str, Any], root: Path, query: bool) -> SourceRecord:
    allowed = {"id", "text", "segments", *(("relevant",) if query else ())}
    extra = sorted(set(rec) - allowed)
    if extra:
        raise SourceError(f"{where}: field {extra[0]!r}: not a field of a {'query' if query else 'document'} "
                          f"record (fields: {', '.join(sorted(allowed))})")
    rid = rec.get("id")
    if not isinstance(rid, str) or not rid.strip():
        raise SourceError(f"{where}: field 'id': expected a non-empty text id, got {json.dumps(rid)}")
    if ("text" in rec) == ("segments" in rec):
        raise SourceError(f"{where}: field 'text'/'segments': give exactly one of them")
    if "text" in rec:
        segments = [_text(rec["text"], where, "text")]
    else:
        items = rec["segments"]
        if not isinstance(items, list) or not items:
            raise SourceError(f"{where}: field 'segments': expected a non-empty list of segments")
        segments = [_segment(s, where, f"segments[{i}]", root) for i, s in enumerate(items)]
    relevant: list[str] = []
    if query:
        relevant = rec.get("relevant")  # type: ignore[assignment]
        if (not isinstance(relevant, list) or not relevant
                or not all(isinstance(r, str) and r for r in relevant)):
            raise SourceError(f"{where}: field 'relevant': expected a non-empty list of document ids")
        if len(set(relevant)) != len(relevant):
            raise SourceError(f"{where}: field 'relevant': a document id is listed twice")
    return SourceRecord(rid, segments, where, sorted(relevant))


def _text(value: Any, where: str, name: str) -> SourceSegment:
    if not isinstance(value, str) or not value.strip():
        raise SourceError(f"{where}: field {name!r}: expected non-empty text")
    return SourceSegment("text", text=value)


def _segment(item: Any, where: str, name: str, root: Path) -> SourceSegment:
    if not isinstance(item, dict):
        raise SourceError(f"{where}: field {name!r}: expected an object with text, image or video")
    kinds = [k for k in ("text", "image", "video") if k in item]
    extra = sorted(set(item) - {"text", "image", "video", "fps"})
    if len(kinds) != 1 or extra:
        bad = extra[0] if extra else "/".join(kinds) or "text"
        raise SourceError(f"{where}: field '{name}.{bad}': a segment holds exactly one of text, image, video "
                          "(and fps for a video)")
    kind = kinds[0]
    if kind == "text":
        return _text(item["text"], where, f"{name}.text")
    if kind == "image":
        return SourceSegment("image", media=(_media(item["image"], where, f"{name}.image", root),))
    frames, fps = item["video"], item.get("fps", 1.0)
    if not isinstance(frames, list) or not frames:
        raise SourceError(f"{where}: field '{name}.video': expected a non-empty list of frame image paths")
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0:
        raise SourceError(f"{where}: field '{name}.fps': expected a positive number")
    media = tuple(_media(f, where, f"{name}.video[{i}]", root) for i, f in enumerate(frames))
    if len({(m.width, m.height) for m in media}) != 1:
        raise SourceError(f"{where}: field '{name}.video': frames of different sizes")
    return SourceSegment("video", media=media, fps=float(fps))


def _media(ref: Any, where: str, name: str, root: Path) -> MediaFile:
    if not isinstance(ref, str) or not ref:
        raise SourceError(f"{where}: field {name!r}: expected a file path")
    path = root / ref
    if not path.is_file():
        raise SourceError(f"{where}: field {name!r}: no such file {path}")
    return image_file(path.read_bytes(), path.suffix, f"{where}: field {name!r}: {path}")


def image_file(data: bytes, suffix: str, where: str) -> MediaFile:
    """The image `data` as a `MediaFile`, or a SourceError at `where` when it is no image."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            img.verify()
        with Image.open(io.BytesIO(data)) as img:
            width, height, fmt = img.width, img.height, (img.format or "").lower()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise SourceError(f"{where}: not a readable image ({type(exc).__name__})") from None
    suffix = suffix.lower() if suffix.lower() in IMAGE_SUFFIXES else f".{fmt or 'img'}"
    return MediaFile(data, width, height, suffix)

# ---- mteb's layout -----------------------------------------------------------------------

def _mteb(folder: Path, subset: str, split: str) -> tuple[list[SourceRecord], list[SourceRecord], list[Path]]:
    if (folder / "corpus.jsonl").is_file():
        return _beir(folder, split)
    prefix = "" if subset == "default" else f"{subset}-"
    parts = {}
    for part in ("corpus", "queries", "qrels"):
        sub = folder / f"{prefix}{part}"
        files = sorted(p for p in sub.glob("*.parquet") if p.name.split("-")[0] == split or p.stem == split)
        if not files:
            raise SourceError(f"{sub}: sources.folder: no {split} parquet file of mteb's {part} "
                              f"(corpus/, queries/, qrels/ as `mmbench export --format mteb` writes them, "
                              "or corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
        parts[part] = files
    docs = [_mteb_row(where, row, folder) for where, row in _parquet_rows(parts["corpus"], ("id",))]
    qrows = [_mteb_row(where, row, folder) for where, row in _parquet_rows(parts["queries"], ("id",))]
    qrels = [(where, str(r["query-id"]), str(r["corpus-id"]), r["score"])
             for where, r in _parquet_rows(parts["qrels"], ("query-id", "corpus-id", "score"))]
    return docs, _with_qrels(qrows, qrels), [p for files in parts.values() for p in files]


def _parquet_rows(files: list[Path], required: tuple[str, ...]) -> Iterator[tuple[str, dict[str, Any]]]:
    import pyarrow.parquet as pq

    for path in files:
        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several types for a file that is no parquet
            raise SourceError(f"{path}: not a readable parquet file ({type(exc).__name__})") from None
        missing = [c for c in required if c not in table.column_names]
        if missing:
            raise SourceError(f"{path}: field {missing[0]!r}: column missing (columns: {', '.join(table.column_names)})")
        for i, row in enumerate(table.to_pylist()):
            yield f"{path}:row {i}", row


def _mteb_row(where: str, row: dict[str, Any], folder: Path) -> SourceRecord:
    rid = row.get("id")
    if rid is None or not str(rid).strip():
        raise SourceError(f"{where}: field 'id': empty")
    segments = []
    if row.get("title"):
        segments.append(SourceSegment("text", text=str(row["title"])))
    if row.get("text"):
        segments.append(_text(row["text"], where, "text"))
    media = row.get("media")
    if media:
        try:
            paths = json.loads(media) if isinstance(media, str) else list(media)
        except ValueError:
            raise SourceError(f"{where}: field 'media': expected a JSON list of paths") from None
        segments += [SourceSegment("image", media=(_media(p, where, f"media[{i}]", folder),))
                     for i, p in enumerate(paths)]
    elif isinstance(row.get("image"), dict) and row["image"].get("bytes"):
        segments.append(SourceSegment("image", media=(image_file(row["image"]["bytes"], "", f"{where}: field 'image'"),)))
    if not segments:
        raise SourceError(f"{where}: field 'text': the row holds no text and no media")
    return SourceRecord(str(rid), segments, where)


def _with_qrels(queries: list[SourceRecord], qrels: Iterable[tuple[str, str, str, Any]]) -> list[SourceRecord]:
    by_id = {q.id: q for q in queries}
    for where, qid, cid, score in qrels:
        if qid not in by_id:
            raise SourceError(f"{where}: field 'query-id': query {qid!r} is not in the queries")
        try:
            relevant = float(score) > 0
        except (TypeError, ValueError):
            raise SourceError(f"{where}: field 'score': expected a number, got {score!r}") from None
        if relevant and cid not in by_id[qid].relevant:
            by_id[qid].relevant.append(cid)
    for q in queries:
        q.relevant.sort()
    return [q for q in queries if q.relevant]   # a query with no relevant document has nothing to find


def _beir(folder: Path, split: str) -> tuple[list[SourceRecord], list[SourceRecord], list[Path]]:
    qrels_path = folder / "qrels" / f"{split}.tsv"
    for path in (folder / "queries.jsonl", qrels_path):
        if not path.is_file():
            raise SourceError(f"{path}: sources.folder: no such file (BEIR layout: corpus.jsonl, queries.jsonl, "
                              "qrels/<split>.tsv)")

    def record(where: str, rec: dict[str, Any]) -> SourceRecord:
        return _mteb_row(where, {"id": rec.get("_id"), "title": rec.get("title"), "text": rec.get("text")}, folder)

    docs = [record(where, rec) for where, _, rec in read_jsonl(folder / "corpus.jsonl")]
    queries = [record(where, rec) for where, _, rec in read_jsonl(folder / "queries.jsonl")]
    rows = list(csv.reader(io.StringIO(qrels_path.read_text(encoding="utf-8")), delimiter="\t"))
    qrels = []
    for i, r in enumerate(rows):
        if i == 0 and r[:1] == ["query-id"]:
            continue
        if len(r) != 3:
            raise SourceError(f"{qrels_path}:{i + 1}: field 'score': expected query-id, corpus-id, score")
        qrels.append((f"{qrels_path}:{i + 1}", r[0], r[1], r[2]))
    return docs, _with_qrels(queries, qrels), [folder / "corpus.jsonl", folder / "queries.jsonl", qrels_path]
