"""Flickr30k readers: images with their five captions, from a `datasets` release or local files.

Three layouts are read (images are loaded lazily, only for the pool the builder samples):

* ``hf``: a `datasets` release with an image column and a captions column, e.g. the
  parquet files of `nlphuji/flickr30k` (columns ``image``, ``caption`` (list of 5), ``img_id``,
  ``filename``, ``split``). ``dataset`` is a local parquet file, a folder of parquet files, or a
  dataset name `datasets.load_dataset` can open (offline: its local cache).
* ``karpathy``: ``dataset_flickr30k.json`` (``{"images": [{"filename", "split",
  "sentences": [{"raw": ...}, ...]}]}``) plus ``image_root``, the folder holding the JPEGs.
* ``csv``: an annotations CSV plus ``image_root``. Either ``results.csv`` (pipe-separated
  ``image_name| comment_number| comment``, one row per caption), ``flickr_annotations_30k.csv``
  (``raw`` = JSON list of the five captions, ``filename``, ``split``), or a ``captions.txt``-style
  ``image,caption`` file with one row per caption (caption order = row order).

An image's id is its file name without the extension (e.g. ``1000092795``).
"""
from __future__ import annotations

import csv
import io
import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from PIL import Image as PILImage, UnidentifiedImageError

from . import hub

N_CAPTIONS = 5
_FUSED = re.compile(r"^(\d+)\s+(\S.*)$")  # "4 A dog runs ..." : comment_number and comment run together
SUFFIXES = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp", "GIF": ".gif"}


class FlickrSourceError(ValueError):
    """A Flickr30k source file is missing or malformed; the message names the file and record."""


@dataclass(frozen=True)
class CaptionedImage:
    """One image and its captions; `loader` returns the encoded file bytes (stored as-is)."""

    image_id: str
    captions: tuple[str, ...]
    loader: Callable[[], bytes] = field(repr=False, compare=False)
    origin: str = ""          # file path or dataset row, for error messages

    def read(self) -> tuple[bytes, str, int, int]:
        """Bytes, file suffix, width and height; a clear error naming the origin if unreadable."""
        try:
            data = self.loader()
        except OSError as exc:
            raise FlickrSourceError(f"image {self.image_id!r}: cannot read {self.origin} ({exc})") from None
        try:
            with PILImage.open(io.BytesIO(data)) as img:
                img.load()
                fmt, (w, h) = img.format, img.size
        except (UnidentifiedImageError, OSError, SyntaxError) as exc:
            raise FlickrSourceError(f"image {self.image_id!r}: {self.origin} is not a readable image ({exc})") from None
        return data, SUFFIXES.get(fmt or "", ".png"), w, h


def _stem(name: str) -> str:
    return Path(str(name)).stem


def _file_loader(path: Path) -> Callable[[], bytes]:
    return lambda: path.read_bytes()


def _require(path: str | None, what: str) -> Path:
    if not path:
        raise FlickrSourceError(f"this Flickr30k source needs the parameter {what}")
    p = Path(path)
    if not p.exists():
        raise FlickrSourceError(f"{what} {p} does not exist")
    return p


def read_karpathy(annotations: str | None, image_root: str | None, split: str | None = None) -> list[CaptionedImage]:
    """Karpathy's ``dataset_flickr30k.json``; `split` keeps only train, val or test images."""
    path, root = _require(annotations, "annotations"), _require(image_root, "image_root")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        images = data["images"]
    except (ValueError, KeyError, TypeError) as exc:
        raise FlickrSourceError(f"{path}: not a Karpathy split file (expected {{'images': [...]}}; {exc})") from None
    out = []
    for i, rec in enumerate(images):
        try:
            filename = rec["filename"]
            captions = tuple(str(s["raw"]).strip() for s in rec["sentences"])
        except (KeyError, TypeError) as exc:
            raise FlickrSourceError(f"{path}: images[{i}] lacks field {exc} (needs 'filename' and "
                                    "'sentences' with 'raw')") from None
        if split and rec.get("split") != split:
            continue
        out.append(CaptionedImage(_stem(filename), captions, _file_loader(root / filename), str(root / filename)))
    return out


def read_annotations_csv(annotations: str | None, image_root: str | None, split: str | None = None) -> list[CaptionedImage]:
    """``results.csv``, ``flickr_annotations_30k.csv`` or an ``image,caption`` file (see module doc)."""
    path, root = _require(annotations, "annotations"), _require(image_root, "image_root")
    text = path.read_text(encoding="utf-8-sig")
    header = text.splitlines()[0] if text else ""
    if "|" in header:
        rows = [[c.strip() for c in r] for r in csv.reader(io.StringIO(text), delimiter="|")]
        cols = rows[0]
        records = [dict(zip(cols, r)) for r in rows[1:] if any(r)]
    else:
        records = list(csv.DictReader(io.StringIO(text)))
        cols = list(records[0].keys()) if records else header.split(",")
    captions: dict[str, list[tuple[float, str]]] = {}
    files: dict[str, str] = {}
    for i, r in enumerate(records, start=2):
        if "raw" in cols and "filename" in cols:
            if split and r.get("split") != split:
                continue
            try:
                caps = json.loads(r["raw"])
            except (ValueError, TypeError) as exc:
                raise FlickrSourceError(f"{path}: line {i}: field 'raw' is not a JSON list of captions ({exc})") from None
            name = r["filename"]
            captions[name] = [(k, str(c).strip()) for k, c in enumerate(caps)]
        else:
            name_col = "image_name" if "image_name" in cols else "image" if "image" in cols else None
            cap_col = "comment" if "comment" in cols else "caption" if "caption" in cols else None
            if name_col is None or cap_col is None:
                raise FlickrSourceError(f"{path}: unknown CSV layout (columns {cols}); expected image_name|comment_number|"
                                        "comment, filename+raw, or image,caption")
            name, cap = r.get(name_col), r.get(cap_col)
            if cap is None and name_col == "image_name" and _FUSED.match(r.get("comment_number") or ""):
                # results.csv as published has a line whose '|' between number and caption is missing
                number, cap = _FUSED.match(r["comment_number"]).groups()
                r = {**r, "comment_number": number}
                warnings.warn(f"{path}: line {i}: no '|' between comment_number and comment; read as "
                              f"comment_number {number} and the rest as the caption", stacklevel=2)
            if not name or cap is None:
                raise FlickrSourceError(f"{path}: line {i}: empty {name_col!r} or {cap_col!r}")
            order = r.get("comment_number")
            try:
                key = float(order) if order not in (None, "") else float(len(captions.get(name, [])))
            except ValueError:
                raise FlickrSourceError(f"{path}: line {i}: comment_number {order!r} is not a number") from None
            captions.setdefault(name, []).append((key, cap.strip()))
        files[name] = name
    return [CaptionedImage(_stem(name), tuple(c for _, c in sorted(caps, key=lambda t: t[0])),
                           _file_loader(root / files[name]), str(root / files[name]))
            for name, caps in captions.items()]


def read_hf(dataset: str | None, hf_split: str = "test", split: str | None = None, image_column: str = "image",
            caption_column: str | None = None, id_column: str | None = None) -> list[CaptionedImage]:
    """A `datasets` release with an image column and a list-of-captions column."""
    if not dataset:
        raise FlickrSourceError("source 'hf' needs the parameter dataset (parquet file/folder or dataset name)")
    import datasets

    path = Path(dataset)
    if hub.is_hub(dataset):   # hf:<id>@<revision>: loaded with the revision pinned (builders/sources/hub.py)
        ds = hub.dataset(dataset, "dataset", split=hf_split)
    elif path.is_file() or (path.is_dir() and any(path.rglob("*.parquet"))):
        files = [str(path)] if path.is_file() else sorted(str(p) for p in path.rglob("*.parquet"))
        ds = datasets.load_dataset("parquet", data_files={hf_split: files}, split=hf_split)
    else:
        ds = datasets.load_dataset(dataset, split=hf_split)
    cols = ds.column_names
    if image_column not in cols:
        raise FlickrSourceError(f"{dataset}: no image column {image_column!r} (columns: {cols})")
    caption_column = caption_column or next((c for c in ("caption", "captions", "sentences", "raw") if c in cols), None)
    if caption_column is None:
        raise FlickrSourceError(f"{dataset}: no captions column (looked for caption, captions, sentences, raw; got {cols})")
    id_column = id_column or next((c for c in ("filename", "img_id", "image_id", "id") if c in cols), None)
    ds = ds.cast_column(image_column, datasets.Image(decode=False))
    meta = ds.remove_columns([image_column])  # cheap columns, read once
    out = []
    for i, row in enumerate(meta):
        if split and "split" in row and row["split"] != split:
            continue
        caps = _caption_list(row[caption_column], f"{dataset} row {i} column {caption_column!r}")
        image_id = _stem(str(row[id_column])) if id_column else f"{i:06d}"
        out.append(CaptionedImage(image_id, caps, _row_loader(ds, i, image_column), f"{dataset} row {i}"))
    return out


def _caption_list(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = [value]
    if not isinstance(value, (list, tuple)):
        raise FlickrSourceError(f"{where}: expected a list of captions, got {type(value).__name__}")
    return tuple(str(v["raw"] if isinstance(v, dict) and "raw" in v else v).strip() for v in value)


def _row_loader(ds: Any, index: int, column: str) -> Callable[[], bytes]:
    def load() -> bytes:
        cell = ds[index][column]
        if cell.get("bytes"):
            return cell["bytes"]
        if cell.get("path"):
            return Path(cell["path"]).read_bytes()
        raise OSError(f"row {index}: image column {column!r} has neither bytes nor path")
    return load
