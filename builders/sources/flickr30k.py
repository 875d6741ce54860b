"""Flickr30k readers: images with their five captions, from the official release or its common re-packagings.

Each reader follows one published layout (the README's Flickr section cites the document for each).
Images are loaded lazily, only for the pool the builder samples. ``image_root`` is the folder of
images or the release's image archive (``flickr30k-images.zip`` of the Hugging Face release, an
uncompressed ``.tar``), read in place. Images that are missing are counted in a `DropLog` when the
builder passes one (else they are an error).

* ``token``: the original release's ``results_20130124.token`` (Young et al. 2014): one caption per
  line, ``<file name>#<k><TAB><caption>`` with k = 0..4, plus ``image_root`` (``flickr30k-images/``).
* ``karpathy``: ``dataset_flickr30k.json`` (``{"images": [{"filename", "split",
  "sentences": [{"raw": ...}, ...]}]}``) plus ``image_root``, the folder holding the JPEGs.
* ``csv``: an annotations CSV plus ``image_root``. Either ``results.csv`` (pipe-separated
  ``image_name| comment_number| comment``, one row per caption), ``flickr_annotations_30k.csv``
  (``raw`` = JSON list of the five captions, ``filename``, ``split``), or a ``captions.txt``-style
  ``image,caption`` file with one row per caption (caption order = row order; a caption holding a
  comma must be quoted).
* ``hf``: a `datasets` release with an image column and a captions column, e.g. the
  parquet files of `nlphuji/flickr30k` (columns ``image``, ``caption`` (list of 5), ``img_id``,
  ``filename``, ``split``). ``dataset`` is a local parquet file, a folder of parquet files, or a
  dataset name `datasets.load_dataset` can open (offline: its local cache).

An image's id is its file name without the extension (e.g. ``1000092795``). Every error about a
source file is one line naming the file, the line or record, and the field.
"""
from __future__ import annotations

import csv
import io
import json
import re
import tarfile
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from PIL import Image as PILImage, UnidentifiedImageError

if TYPE_CHECKING:
    from mmbench.data.drops import DropLog
from mmbench.builders.sources.jsonl import read_json, read_text
from mmbench.builders.sources import hub

N_CAPTIONS = 5
_FUSED = re.compile(r"^(\d+)\s+(\S.*)$")  # "4 A dog runs ..." : comment_number and comment run together
_TOKEN_KEY = re.compile(r"^(?P<name>[^#\t]+)#(?P<k>\d+)$")
SUFFIXES = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp", "GIF": ".gif"}
MISSING_IMAGE = "image file missing under image_root"


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


def _read_text(path: Path) -> str:
    """The file as UTF-8 text (a BOM is dropped); undecodable bytes are an error naming the line (the shared
    reader's message, as this source's error type)."""
    try:
        return read_text(path, encoding="utf-8-sig")
    except ValueError as exc:
        raise FlickrSourceError(str(exc)) from None


def _archive_index(path: Path) -> dict[str, Callable[[], bytes]]:
    """File name -> loader for the members of a .zip or uncompressed .tar (read in place, not unpacked)."""
    members: list[tuple[str, Callable[[], bytes]]] = []
    if zipfile.is_zipfile(path):
        zf = zipfile.ZipFile(path)
        members = [(i.filename, (lambda i=i: zf.read(i))) for i in zf.infolist() if not i.is_dir()]
    elif tarfile.is_tarfile(path):
        try:
            tf = tarfile.open(path, "r:")
        except tarfile.ReadError:
            raise FlickrSourceError(f"image_root {path} is a compressed tar archive; unpack it first (reading "
                                    "single images from it would decompress it again each time)") from None
        members = [(m.name, (lambda m=m: tf.extractfile(m).read())) for m in tf.getmembers() if m.isfile()]
    else:
        raise FlickrSourceError(f"image_root {path} is a file but neither a .zip nor a .tar archive; give the folder "
                                "of images or the release's archive")
    index: dict[str, Callable[[], bytes]] = {}
    seen: dict[str, str] = {}
    for member, load in members:
        base = Path(member).name
        if base.startswith("._"):          # macOS resource forks some archives carry
            continue
        if base in index:
            raise FlickrSourceError(f"image_root {path}: two members are named {base} ({seen[base]}, {member})")
        index[base], seen[base] = _archive_loader(load, f"{path}!{member}"), member
    return index


def _archive_loader(load: Callable[[], bytes], where: str) -> Callable[[], bytes]:
    def read() -> bytes:
        try:
            return load()
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error) as exc:
            raise OSError(f"damaged archive member {where}: {exc}") from None
    return read


class _ImageFiles:
    """Resolves image file names in `root`, a folder or the release's image archive (.zip/.tar, read in
    place); a missing image is dropped (with a DropLog) or an error."""

    def __init__(self, root: Path, drops: "DropLog | None") -> None:
        self.root, self.drops = root, drops
        self.members = _archive_index(root) if root.is_file() else None

    def image(self, name: str, captions: tuple[str, ...], where: str, fld: str) -> CaptionedImage | None:
        if self.members is None:
            path = self.root / name
            found, origin = (_file_loader(path) if path.is_file() else None), str(path)
        else:
            found, origin = self.members.get(Path(name).name), f"{self.root}!{Path(name).name}"
        if found is not None:
            return CaptionedImage(_stem(name), captions, found, origin)
        if self.drops is None:
            raise FlickrSourceError(f"{where}: field {fld!r}: image file {origin} does not exist")
        self.drops.drop(MISSING_IMAGE, f"{where} ({name})")
        return None


def read_token(annotations: str | None, image_root: str | None, split: str | None = None,
               drops: "DropLog | None" = None) -> list[CaptionedImage]:
    """The original ``results_20130124.token``: ``name.jpg#k<TAB>caption`` per line, k = 0..4."""
    path, root = _require(annotations, "annotations"), _require(image_root, "image_root")
    if split:
        raise FlickrSourceError(f"{path}: the .token release has no splits; use source karpathy for Karpathy's "
                                "train/val/test split")
    captions: dict[str, dict[int, str]] = {}
    first_line: dict[str, int] = {}
    for n, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        key, tab, caption = line.partition("\t")
        if not tab:
            raise FlickrSourceError(f"{path}: line {n}: no TAB between the caption id and the caption "
                                    "(expected 'name.jpg#k<TAB>caption')")
        m = _TOKEN_KEY.match(key.strip())
        if m is None:
            raise FlickrSourceError(f"{path}: line {n}: field 'caption id' is {key!r}, expected 'name.jpg#k' "
                                    "with k a caption number")
        name, k, caption = m["name"], int(m["k"]), caption.strip()  # an empty caption is kept: the build drops
        caps = captions.setdefault(name, {})
        if k in caps:
            raise FlickrSourceError(f"{path}: line {n}: field 'caption id': {key} appears twice")
        caps[k] = caption
        first_line.setdefault(name, n)
    files = _ImageFiles(root, drops)
    out = []
    for name, caps in captions.items():
        rec = files.image(name, tuple(caps[k] for k in sorted(caps)), f"{path}: line {first_line[name]}", "caption id")
        if rec is not None:
            out.append(rec)
    return out


def read_karpathy(annotations: str | None, image_root: str | None, split: str | None = None,
                  drops: "DropLog | None" = None) -> list[CaptionedImage]:
    """Karpathy's ``dataset_flickr30k.json``; `split` keeps only train, val or test images."""
    path, root = _require(annotations, "annotations"), _require(image_root, "image_root")
    try:
        data = read_json(path)  # errors name the file and the line
        images = data["images"]
    except (ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, FlickrSourceError):
            raise
        raise FlickrSourceError(f"{path}: not a Karpathy split file (expected {{'images': [...]}}; {exc})") from None
    if not isinstance(images, list):
        raise FlickrSourceError(f"{path}: field 'images' is a JSON {type(images).__name__}, not a list")
    files = _ImageFiles(root, drops)
    out = []
    for i, rec in enumerate(images):
        try:
            filename = rec["filename"]
            sentences = rec["sentences"]
        except (KeyError, TypeError) as exc:
            missing = exc if isinstance(exc, KeyError) else "(the record is not an object)"
            raise FlickrSourceError(f"{path}: images[{i}] lacks field {missing} (needs 'filename' and "
                                    "'sentences' with 'raw')") from None
        if not isinstance(filename, str) or not filename:
            raise FlickrSourceError(f"{path}: images[{i}]: field 'filename' is {filename!r}, not a file name")
        if not isinstance(sentences, list) or not all(isinstance(x, dict) and "raw" in x for x in sentences):
            raise FlickrSourceError(f"{path}: images[{i}]: field 'sentences' is not a list of objects with 'raw'")
        captions = tuple(str(x["raw"]).strip() for x in sentences)
        if split and rec.get("split") != split:
            continue
        image = files.image(filename, captions, f"{path}: images[{i}]", "filename")
        if image is not None:
            out.append(image)
    return out


def _csv_rows(path: Path, text: str, delimiter: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and (line number, fields) rows; a row with more fields than the header is an error."""
    reader = csv.reader(io.StringIO(text), delimiter=delimiter,
                        quoting=csv.QUOTE_NONE if delimiter == "|" else csv.QUOTE_MINIMAL)
    try:
        rows = [(reader.line_num, [c.strip() for c in r]) for r in reader]
    except csv.Error as exc:
        raise FlickrSourceError(f"{path}: line {reader.line_num}: malformed CSV ({exc})") from None
    if not rows:
        raise FlickrSourceError(f"{path}: empty annotations file")
    header = rows[0][1]
    body = []
    for n, r in rows[1:]:
        if not any(r):
            continue
        if len(r) > len(header):
            last = header[-1]
            raise FlickrSourceError(f"{path}: line {n}: {len(r)} fields where the header has {len(header)} "
                                    f"(an unquoted {delimiter!r} inside field {last!r}?); quote that field")
        body.append((n, r))
    return header, body


def read_annotations_csv(annotations: str | None, image_root: str | None, split: str | None = None,
                         drops: "DropLog | None" = None) -> list[CaptionedImage]:
    """``results.csv``, ``flickr_annotations_30k.csv`` or an ``image,caption`` file (see module doc)."""
    path, root = _require(annotations, "annotations"), _require(image_root, "image_root")
    text = _read_text(path)
    first = text.splitlines()[0] if text else ""
    cols, rows = _csv_rows(path, text, "|" if "|" in first else ",")
    captions: dict[str, list[tuple[float, str]]] = {}
    first_line: dict[str, int] = {}
    name_field = "filename"
    for n, fields in rows:
        r = dict(zip(cols, fields))
        if "raw" in cols and "filename" in cols:
            if split and r.get("split") != split:
                continue
            try:
                caps = json.loads(r.get("raw") or "")
                if not isinstance(caps, list):
                    raise ValueError(f"a JSON {type(caps).__name__}")
            except (ValueError, TypeError) as exc:
                raise FlickrSourceError(f"{path}: line {n}: field 'raw' is not a JSON list of captions ({exc})") from None
            name = r.get("filename") or ""
            if not name:
                raise FlickrSourceError(f"{path}: line {n}: field 'filename' is empty")
            captions[name] = [(k, str(c).strip()) for k, c in enumerate(caps)]
        else:
            name_col = "image_name" if "image_name" in cols else "image" if "image" in cols else None
            cap_col = "comment" if "comment" in cols else "caption" if "caption" in cols else None
            if name_col is None or cap_col is None:
                raise FlickrSourceError(f"{path}: unknown CSV layout (columns {cols}); expected image_name|comment_number|"
                                        "comment, filename+raw, or image,caption")
            name_field = name_col
            name, cap = r.get(name_col), r.get(cap_col)
            if cap is None and name_col == "image_name" and _FUSED.match(r.get("comment_number") or ""):
                # results.csv as published has a line whose '|' between number and caption is missing
                number, cap = _FUSED.match(r["comment_number"]).groups()
                r = {**r, "comment_number": number}
                warnings.warn(f"{path}: line {n}: no '|' between comment_number and comment; read as "
                              f"comment_number {number} and the rest as the caption", stacklevel=2)
            if not name:
                raise FlickrSourceError(f"{path}: line {n}: field {name_col!r} is empty")
            if cap is None:
                raise FlickrSourceError(f"{path}: line {n}: field {cap_col!r} is missing")
            # an empty caption is kept; the builder drops (and counts) images with fewer than five non-empty ones
            order = r.get("comment_number")
            try:
                key = float(order) if order not in (None, "") else float(len(captions.get(name, [])))
            except ValueError:
                raise FlickrSourceError(f"{path}: line {n}: field 'comment_number' is {order!r}, not a number") from None
            captions.setdefault(name, []).append((key, cap))
        first_line.setdefault(name, n)
    files = _ImageFiles(root, drops)
    out = []
    for name, caps in captions.items():
        rec = files.image(name, tuple(c for _, c in sorted(caps, key=lambda t: t[0])),
                          f"{path}: line {first_line[name]}", name_field)
        if rec is not None:
            out.append(rec)
    return out
def read_hf(dataset: str | None, hf_split: str = "test", split: str | None = None, image_column: str = "image",
            caption_column: str | None = None, id_column: str | None = None) -> list[CaptionedImage]:
    """A `datasets` release with an image column and a list-of-captions column."""
    if not dataset:
        raise FlickrSourceError("source 'hf' needs the parameter dataset (parquet file/folder or dataset name)")
    import datasets

    path = Path(dataset)
    try:
        if hub.is_hub(dataset):   # hf:<id>@<revision>: loaded with the revision pinned (builders/sources/hub.py)
            ds = hub.dataset(dataset, "dataset", split=hf_split)
        elif path.is_file() or (path.is_dir() and any(path.rglob("*.parquet"))):
            files = [str(path)] if path.is_file() else sorted(str(p) for p in path.rglob("*.parquet"))
            ds = datasets.load_dataset("parquet", data_files={hf_split: files}, split=hf_split)
        else:
            ds = datasets.load_dataset(dataset, split=hf_split)
    except (OSError, ValueError, RuntimeError) as exc:  # hub unreachable, unknown name, unreadable parquet
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise FlickrSourceError(f"dataset {dataset!r} [{hf_split}] cannot be loaded ({first[:160]}); give a local "
                                "parquet file or folder, or use --source csv with flickr_annotations_30k.csv and "
                                "--param image_root=flickr30k-images.zip") from None
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
