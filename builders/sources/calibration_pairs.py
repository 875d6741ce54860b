"""Readers of RAVEL's calibration sources: image-text pairs from a JSON or CSV/JSONL file and an image folder.

Sources (`load_source(kind, ...)`):

* `llava-lcs`: LLaVA-LCS-558K, a JSON list of `{"id", "image": "rel/path.jpg", "conversations":
  [{"from": "human", ...}, {"from": "gpt", "value": caption}]}` plus an image folder; items without an image
  are skipped and counted in the `DropLog`.
* `coco`: COCO captions JSON (`images` + `annotations`); one caption per image, the annotation with the
  smallest id.
* `karpathy`: a Karpathy-split JSON (`dataset_flickr30k.json` / `dataset_coco.json`); the first sentence per
  image (`flickr` is an alias).
* `pairs`: a CSV or JSONL with `image` (a path, relative to `image_root` if given, else to the file) and
  `text`/`caption` columns.
* `sample`: offline generated shapes (`shapes_sample.py`).

A pair's `index` is its position in the source file. Every error is a `CalibrationError` (one line, exit 2)
naming the file, the record and the field; `load_image` names the pair and the image file.
"""
from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

from mmbench.builders.sources.jsonl import read_json, read_jsonl, read_text
from mmbench.builders.sources.shapes_sample import SAMPLE_POOL_SIZE, load_sample, parse_ref, render_sample, sample_spec
from mmbench.data.calibration import Calibration, CalibrationError, Pair
from mmbench.data.drops import DropLog

SOURCES = ("llava-lcs", "coco", "karpathy", "flickr", "pairs", "sample")


def _json(path: Path) -> Any:
    if not path.is_file():
        raise CalibrationError(f"{path}: no such file")
    try:
        return read_json(path)  # errors name the file, line and column
    except ValueError as exc:
        raise CalibrationError(str(exc)) from None


def _field(rec: Any, name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(rec, dict):
        raise CalibrationError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    if name not in rec:
        raise CalibrationError(f"{where}: field {name!r} missing")
    value = rec[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise CalibrationError(f"{where}: field {name!r} is {value!r:.60}, expected {_kind_name(kind)}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "a string", int: "a number", list: "a list", dict: "an object"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _llava_caption(conversations: list[Any], where: str) -> str:
    for j, turn in enumerate(conversations):
        if isinstance(turn, dict) and turn.get("from") in ("gpt", "assistant"):
            return str(_field(turn, "value", str, f"{where}: conversations[{j}]")).strip()
    raise CalibrationError(f"{where}: field 'conversations' has no gpt turn (the caption)")


def load_llava_lcs(json_path: str | Path, image_root: str | Path, drops: DropLog | None = None) -> list[Pair]:
    path = Path(json_path)
    items = _json(path)
    if not isinstance(items, list):
        raise CalibrationError(f"{path}: expected a JSON list of items, got {type(items).__name__}")
    root = Path(image_root)
    out = []
    for i, it in enumerate(items):
        where = f"{path}: item {i}"
        if isinstance(it, dict) and "image" not in it:
            if drops is not None:
                drops.drop("item without an image", where)
            continue
        image = _field(it, "image", str, where)
        caption = _llava_caption(_field(it, "conversations", list, where), where)
        out.append(Pair(i, str(it.get("id", i)), str(root / image), caption))
        if drops is not None:
            drops.keep()
    return out


def load_coco(json_path: str | Path, image_root: str | Path) -> list[Pair]:
    path = Path(json_path)
    d = _json(path)
    images = _field(d, "images", list, str(path))
    annotations = _field(d, "annotations", list, str(path))
    files = {}
    for i, im in enumerate(images):
        files[_field(im, "id", (int, str), f"{path}: images[{i}]")] = _field(im, "file_name", str,
                                                                           f"{path}: images[{i}]")
    keyed = []
    for i, ann in enumerate(annotations):
        where = f"{path}: annotations[{i}]"
        keyed.append((_field(ann, "id", (int, str), where), _field(ann, "image_id", (int, str), where),
                      _field(ann, "caption", str, where), where))
    first: dict[Any, str] = {}
    try:
        ordered = sorted(keyed, key=lambda a: a[0])
    except TypeError:
        raise CalibrationError(f"{path}: annotations: field 'id' mixes numbers and strings") from None
    for _, image_id, caption, where in ordered:
        if image_id not in files:
            raise CalibrationError(f"{where}: field 'image_id' {image_id!r} is not in 'images'")
        first.setdefault(image_id, caption.strip())
    root = Path(image_root)
    return [Pair(i, str(img_id), str(root / files[img_id]), first[img_id]) for i, img_id in enumerate(sorted(first))]


def load_karpathy(json_path: str | Path, image_root: str | Path) -> list[Pair]:
    path = Path(json_path)
    images = _field(_json(path), "images", list, str(path))
    root = Path(image_root)
    out = []
    for i, im in enumerate(images):
        where = f"{path}: images[{i}]"
        filename = _field(im, "filename", str, where)
        sentences = _field(im, "sentences", list, where)
        if not sentences:
            raise CalibrationError(f"{where}: field 'sentences' is empty")
        raw = _field(sentences[0], "raw", str, f"{where}: sentences[0]")
        filepath = im.get("filepath", "")
        if not isinstance(filepath, str):
            raise CalibrationError(f"{where}: field 'filepath' is {filepath!r:.60}, expected a string")
        out.append(Pair(i, str(im.get("imgid", i)), str(root / Path(filepath) / filename), raw.strip()))
    return out


def _pair_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    if not path.is_file():
        raise CalibrationError(f"{path}: no such file")
    try:
        if path.suffix == ".jsonl":
            return [(where, rec) for where, _, rec in read_jsonl(path)]
        reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
        return [(f"{path}:{n}", row) for n, row in enumerate(reader, start=2)]
    except (ValueError, csv.Error) as exc:
        raise CalibrationError(f"{path}: {exc}" if str(path) not in str(exc) else str(exc)) from None


def load_pairs_file(path: str | Path, image_root: str | Path | None = None) -> list[Pair]:
    path = Path(path)
    root = Path(image_root) if image_root else path.parent
    out = []
    for i, (where, r) in enumerate(_pair_rows(path)):
        text = r.get("text", r.get("caption"))
        if text is None or r.get("image") is None:
            missing = "image" if r.get("image") is None else "text"
            raise CalibrationError(f"{where}: field {missing!r} missing (each row needs 'image' and 'text' or "
                                   "'caption')")
        img = Path(str(r["image"]))
        out.append(Pair(i, str(r.get("id", i)), str(img if img.is_absolute() else root / img), str(text)))
    return out


def load_source(kind: str, *, json_path: str | Path | None = None, image_root: str | Path | None = None,
                pairs_file: str | Path | None = None, pool_size: int = SAMPLE_POOL_SIZE, pool_seed: int = 0,
                drops: DropLog | None = None) -> list[Pair]:
    if kind == "sample":
        return load_sample(pool_size, pool_seed)
    if kind == "pairs":
        if not pairs_file:
            raise CalibrationError("source 'pairs' needs --pairs FILE")
        return load_pairs_file(pairs_file, image_root)
    if kind not in SOURCES:
        raise CalibrationError(f"unknown calibration source {kind!r}; choose from {', '.join(SOURCES)}")
    if not json_path or not image_root:
        raise CalibrationError(f"source {kind!r} needs --json and --image-root")
    if not Path(image_root).is_dir():
        raise CalibrationError(f"--image-root {image_root}: no such folder")
    if kind == "llava-lcs":
        return load_llava_lcs(json_path, image_root, drops)
    if kind == "coco":
        return load_coco(json_path, image_root)
    return load_karpathy(json_path, image_root)


def _where(pair: Pair) -> str:
    return f"pair {pair.index} (id {pair.id!r})"


def check_images(cal: Calibration) -> None:
    """Every drawn pair's image file exists (generated sample images always do)."""
    for pair in cal.pairs:
        if parse_ref(pair.image) is None and not Path(pair.image).is_file():
            raise CalibrationError(f"{_where(pair)}: field 'image': image file {pair.image} does not exist")


def image_digest(pair: Pair) -> str:
    """SHA-256 of what the pair's image is: the file's bytes, or the sample reference that draws it."""
    if parse_ref(pair.image) is not None:
        return hashlib.sha256(pair.image.encode()).hexdigest()
    return hashlib.sha256(_read(pair)).hexdigest()


def _read(pair: Pair) -> bytes:
    try:
        return Path(pair.image).read_bytes()
    except FileNotFoundError:
        raise CalibrationError(f"{_where(pair)}: image file {pair.image} does not exist") from None
    except OSError as exc:
        raise CalibrationError(f"{_where(pair)}: cannot read image file {pair.image} ({exc.strerror or exc})") from None


def load_image(pair: Pair, size: int = 224) -> Image.Image:
    """The pair's image as RGB; a missing or unreadable file is one line naming the pair and the file."""
    try:
        ref = parse_ref(pair.image)
    except ValueError as exc:
        raise CalibrationError(f"{_where(pair)}: {exc}") from None
    if ref is not None:
        return render_sample(sample_spec(*ref), size)
    data = _read(pair)
    try:
        with Image.open(io.BytesIO(data)) as im:
            return im.convert("RGB")
    except UnidentifiedImageError:
        raise CalibrationError(f"{_where(pair)}: {pair.image} is not a readable image (unknown format)") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise CalibrationError(f"{_where(pair)}: {pair.image} is not a readable image ({exc})") from None

