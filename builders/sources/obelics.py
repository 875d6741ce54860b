"""`mmbench prepare obelics`: point an OBELICS parquet's image URLs at local files.

OBELICS (HuggingFaceM4/OBELICS dataset card, "Data Fields") has four columns: `images` and
`texts`, two lists of one length per web document where exactly one of the two is set at each
index, plus `metadata` and `general_metadata` JSON strings. Its images are URLs, to be downloaded
by the user (the card suggests img2dataset). This step reads the download and rewrites `images`
to local paths (relative to the output parquet), leaving every other column as it was; a URL
with no local file becomes None and is counted. The Visual Grounding builder reads the result
(`--param haystack=OUT.parquet`).

Where the files come from:
- `--images DIR`: an img2dataset output folder, where each image has a JSON sidecar of the same
  stem holding its `url` (and `status`; only "success" is used);
- `--url-map FILE`: a JSON object {url: path} or a two-column TSV `url<TAB>path`; relative paths
  are relative to the map file.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from mmbench.data.drops import DropLog, summary_lines

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp")


def url_map_from_img2dataset(folder: Path) -> dict[str, Path]:
    """{url: image file} from an img2dataset output folder's JSON sidecars."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"image folder {folder} not found")
    out: dict[str, Path] = {}
    for side in sorted(folder.rglob("*.json")):
        try:
            rec = json.loads(side.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ValueError(f"{side}: invalid JSON ({exc})") from exc
        if not isinstance(rec, dict) or not isinstance(rec.get("url"), str):
            continue   # img2dataset also writes shard-level JSON stats; only per-image sidecars have a url
        if rec.get("status", "success") != "success":
            continue
        image = next((side.with_suffix(s) for s in IMAGE_SUFFIXES if side.with_suffix(s).is_file()), None)
        if image is not None:
            out.setdefault(rec["url"], image)
    return out


def url_map_from_file(path: Path) -> dict[str, Path]:
    """{url: path} from a JSON object or a `url<TAB>path` TSV; relative paths resolve against the map's folder."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"URL map {path} not found")
    text = path.read_text(encoding="utf-8")
    pairs: list[tuple[str, str]] = []
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{path}: invalid JSON ({exc})") from exc
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ValueError(f"{path}: expected a JSON object mapping each URL to a file path")
        pairs = list(data.items())
        for url, p in pairs:
            _refuse_climbing(p, f"{path}: entry {url!r}")
    else:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 2 or not cols[0] or not cols[1]:
                raise ValueError(f"{path}:{lineno}: expected `url<TAB>path`, got {len(cols)} column(s)")
            _refuse_climbing(cols[1], f"{path}:{lineno}")
            pairs.append((cols[0], cols[1]))
    return {u: (Path(p) if Path(p).is_absolute() else path.parent / p) for u, p in pairs}


def _refuse_climbing(p: str, where: str) -> None:
    """A relative path in a URL map stays inside the map's folder: one with a `..` part would send readers of the
    prepared parquet anywhere on the disk."""
    if not Path(p).is_absolute() and ".." in Path(p).parts:
        raise ValueError(f"{where}: path {p!r} leaves the map's folder with '..'; give a path inside it, or an "
                         "absolute one")


def map_images(src: Path, dst: Path, url_map: dict[str, Path], max_docs: int | None = None,
               overwrite: bool = False) -> DropLog:
    """Write `dst`: `src` with each image URL replaced by its local file (or None); returns the counts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    src, dst = Path(src), Path(dst)
    if not src.is_file():
        raise FileNotFoundError(f"OBELICS parquet {src} not found")
    if dst.resolve() == src.resolve():
        raise ValueError(f"{dst}: the output must not overwrite the input parquet")
    if dst.exists() and not overwrite:
        raise ValueError(f"{dst} exists; choose another --out or pass --overwrite")
    table = pq.read_table(src)
    for col in ("texts", "images"):
        if col not in table.column_names:
            raise ValueError(f"{src}: column {col!r} missing (OBELICS has `images`, `texts`, `metadata`, "
                             "`general_metadata`)")
    if max_docs is not None:
        table = table.slice(0, max_docs)
    log = DropLog("OBELICS image URLs")
    images_out = []
    for row, (imgs, texts) in enumerate(zip(table.column("images").to_pylist(), table.column("texts").to_pylist())):
        if not isinstance(imgs, list) or not isinstance(texts, list) or len(imgs) != len(texts):
            raise ValueError(f"{src}: row {row}: field 'images' and 'texts' must be lists of one length")
        mapped = []
        for url in imgs:
            if url is None:
                mapped.append(None)
                continue
            local = url_map.get(url)
            if local is None or not Path(local).is_file():
                log.drop("no local file for the URL" if local is None else "mapped file does not exist",
                         f"row {row}: {url}")
                mapped.append(None)
                continue
            log.keep()
            mapped.append(os.path.relpath(Path(local).resolve(), dst.resolve().parent))
        images_out.append(mapped)
    if log.read and not log.kept:
        raise ValueError(f"{src}: none of its {log.read} image URLs has a local file; check --images/--url-map")
    table = table.set_column(table.column_names.index("images"), "images", pa.array(images_out, pa.list_(pa.string())))
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return log


def prepare(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="mmbench prepare obelics",
                                description="Rewrite an OBELICS parquet's image URLs to local files.")
    p.add_argument("parquet", type=Path, help="an OBELICS parquet shard (images as URLs)")
    p.add_argument("--out", type=Path, required=True, help="the parquet to write (images as local paths)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--images", type=Path, help="img2dataset output folder (JSON sidecars with `url`)")
    src.add_argument("--url-map", type=Path, help="JSON {url: path} or TSV url<TAB>path")
    p.add_argument("--max-docs", type=int, default=None, help="keep only the first N documents")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    args = p.parse_args(argv)
    from mmbench.common.errors import CLIError

    if args.max_docs is not None and args.max_docs < 1:  # -1 or 0 kept nothing and wrote an empty parquet
        raise CLIError(f"--max-docs {args.max_docs}: give at least 1 (or leave it out to keep every document)")
    try:
        url_map = url_map_from_img2dataset(args.images) if args.images else url_map_from_file(args.url_map)
        log = map_images(args.parquet, args.out, url_map, args.max_docs, args.overwrite)
    except (ValueError, FileNotFoundError) as exc:
        raise CLIError(f"cannot prepare obelics: {exc}") from None
    print(f"wrote {args.out}")
    for line in summary_lines({"images": log.to_dict()}):
        print(line)
    return 0
