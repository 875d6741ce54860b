"""Calibration image–text pairs: sources, seeded sampling and a manifest of exactly what was drawn.

Sources (``load_source(kind, ...)``):

* ``llava-lcs`` — LLaVA-LCS-558K: a JSON list of ``{"id", "image": "rel/path.jpg", "conversations":
  [{"from": "human", ...}, {"from": "gpt", "value": caption}]}`` plus an image folder.
* ``coco`` — COCO captions JSON (``images`` + ``annotations``); one caption per image, the
  annotation with the smallest id.
* ``karpathy`` — Karpathy-split JSON (``dataset_flickr30k.json`` / ``dataset_coco.json``); the
  first sentence per image (``flickr`` is an alias).
* ``pairs`` — a CSV or JSONL with ``image`` (path, relative to ``image_root`` if given) and
  ``text``/``caption`` columns.
* ``sample`` — offline, procedurally generated images (coloured shapes on a background at named
  positions) with captions that describe them; fully determined by (pool seed, index).

Sampling: ``sample_pairs(pool, n, seed)`` draws ``n`` distinct pool indices with
``numpy.random.default_rng(seed).choice(len(pool), n, replace=False)`` and keeps them in ascending
pool order. The manifest (JSONL; first line a header with source, seed, n, pool size, fingerprint)
records index, id, image and text of every drawn pair.
"""
from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw

DEFAULT_N = 1000
DEFAULT_SEED = 42
SAMPLE_POOL_SIZE = 5000


@dataclass(frozen=True)
class Pair:
    index: int  # position in the source pool
    id: str
    image: str  # file path, or "sample://<pool_seed>/<index>"
    text: str


# ----------------------------------------------------------------------------- sources
def _llava_caption(conversations) -> str:
    for turn in conversations:
        if turn.get("from") in ("gpt", "assistant"):
            return str(turn["value"]).strip()
    raise ValueError("no gpt turn in conversation")


def load_llava_lcs(json_path, image_root) -> list[Pair]:
    items = json.loads(Path(json_path).read_text())
    root = Path(image_root)
    out = []
    for i, it in enumerate(items):
        if "image" not in it:
            continue
        out.append(Pair(i, str(it.get("id", i)), str(root / it["image"]), _llava_caption(it["conversations"])))
    return out


def load_coco(json_path, image_root) -> list[Pair]:
    d = json.loads(Path(json_path).read_text())
    files = {im["id"]: im["file_name"] for im in d["images"]}
    first: dict = {}
    for ann in sorted(d["annotations"], key=lambda a: a["id"]):
        first.setdefault(ann["image_id"], ann["caption"].strip())
    root = Path(image_root)
    return [Pair(i, str(img_id), str(root / files[img_id]), first[img_id])
            for i, img_id in enumerate(sorted(first))]


def load_karpathy(json_path, image_root) -> list[Pair]:
    d = json.loads(Path(json_path).read_text())
    root = Path(image_root)
    out = []
    for i, im in enumerate(d["images"]):
        rel = Path(im.get("filepath", "")) / im["filename"]
        out.append(Pair(i, str(im.get("imgid", i)), str(root / rel), im["sentences"][0]["raw"].strip()))
    return out


def load_pairs_file(path, image_root=None) -> list[Pair]:
    path = Path(path)
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    else:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    root = Path(image_root) if image_root else path.parent
    out = []
    for i, r in enumerate(rows):
        text = r.get("text", r.get("caption"))
        if text is None or "image" not in r:
            raise ValueError(f"{path}: each row needs 'image' and 'text' (or 'caption')")
        img = Path(r["image"])
        out.append(Pair(i, str(r.get("id", i)), str(img if img.is_absolute() else root / img), str(text)))
    return out


# ----------------------------------------------------------------------------- offline sample source
COLORS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 80, 220), "yellow": (235, 210, 40),
          "purple": (140, 60, 180), "orange": (240, 140, 30), "black": (20, 20, 20), "white": (245, 245, 245)}
SHAPES = ("circle", "square", "triangle")
POSITIONS = {"top left": (0.25, 0.25), "top right": (0.75, 0.25), "bottom left": (0.25, 0.75),
             "bottom right": (0.75, 0.75), "center": (0.5, 0.5)}
NUMBER = {1: "one", 2: "two", 3: "three"}


def _sample_spec(pool_seed: int, index: int) -> dict:
    rng = np.random.default_rng([pool_seed, index])
    names = list(COLORS)
    bg = names[rng.integers(len(names))]
    n_obj = int(rng.integers(1, 4))
    pos = list(rng.permutation(list(POSITIONS))[:n_obj])
    objs = []
    for p in pos:
        col = names[rng.integers(len(names))]
        while col == bg:
            col = names[rng.integers(len(names))]
        objs.append({"shape": SHAPES[rng.integers(len(SHAPES))], "color": col, "position": str(p),
                     "size": float(rng.uniform(0.12, 0.22))})
    return {"background": bg, "objects": objs}


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def sample_caption(spec: dict) -> str:
    parts = [f"{_article(o['color'])} {o['color']} {o['shape']} at the {o['position']}" for o in spec["objects"]]
    n = len(parts)
    listing = parts[0] if n == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{NUMBER[n].capitalize()} shape{'s' if n > 1 else ''} on a {spec['background']} background: {listing}."


def render_sample(spec: dict, size: int = 224) -> Image.Image:
    img = Image.new("RGB", (size, size), COLORS[spec["background"]])
    draw = ImageDraw.Draw(img)
    for o in spec["objects"]:
        cx, cy = (v * size for v in POSITIONS[o["position"]])
        r = o["size"] * size
        col = COLORS[o["color"]]
        if o["shape"] == "circle":
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=col)
        elif o["shape"] == "square":
            draw.rectangle([cx - r, cy - r, cx + r, cy + r], fill=col)
        else:
            draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=col)
    return img


def load_sample(pool_size: int = SAMPLE_POOL_SIZE, pool_seed: int = 0) -> list[Pair]:
    return [Pair(i, f"sample-{pool_seed}-{i}", f"sample://{pool_seed}/{i}", sample_caption(_sample_spec(pool_seed, i)))
            for i in range(pool_size)]


def load_image(pair_or_path, size: int = 224) -> Image.Image:
    ref = pair_or_path.image if isinstance(pair_or_path, Pair) else str(pair_or_path)
    if ref.startswith("sample://"):
        seed, idx = ref[len("sample://"):].split("/")
        return render_sample(_sample_spec(int(seed), int(idx)), size)
    with Image.open(ref) as im:
        return im.convert("RGB")


SOURCES = ("llava-lcs", "coco", "karpathy", "flickr", "pairs", "sample")


def load_source(kind: str, *, json_path=None, image_root=None, pairs_file=None,
                pool_size: int = SAMPLE_POOL_SIZE, pool_seed: int = 0) -> list[Pair]:
    if kind == "sample":
        return load_sample(pool_size, pool_seed)
    if kind == "pairs":
        if not pairs_file:
            raise ValueError("source 'pairs' needs --pairs FILE")
        return load_pairs_file(pairs_file, image_root)
    if not json_path or not image_root:
        raise ValueError(f"source {kind!r} needs --json and --image-root")
    if kind == "llava-lcs":
        return load_llava_lcs(json_path, image_root)
    if kind == "coco":
        return load_coco(json_path, image_root)
    if kind in ("karpathy", "flickr"):
        return load_karpathy(json_path, image_root)
    raise ValueError(f"unknown calibration source {kind!r}; choose from {SOURCES}")


# ----------------------------------------------------------------------------- sampling + manifest
@dataclass
class Calibration:
    pairs: list[Pair]
    source: str
    seed: int
    pool_size: int

    @property
    def texts(self) -> list[str]:
        return [p.text for p in self.pairs]

    def __len__(self) -> int:
        return len(self.pairs)

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for p in self.pairs:
            h.update(json.dumps([p.index, p.id, p.image, p.text], ensure_ascii=False).encode())
            h.update(b"\n")
        return h.hexdigest()[:20]

    def subset(self, n: int) -> "Calibration":
        return Calibration(self.pairs[:n], self.source, self.seed, self.pool_size)

    def write_manifest(self, path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        with tmp.open("w") as f:
            f.write(json.dumps({"source": self.source, "seed": self.seed, "n": len(self.pairs),
                                "pool_size": self.pool_size, "fingerprint": self.fingerprint()}) + "\n")
            for p in self.pairs:
                f.write(json.dumps(asdict(p), ensure_ascii=False) + "\n")
        tmp.replace(path)
        return path

    @classmethod
    def read_manifest(cls, path) -> "Calibration":
        lines = Path(path).read_text().splitlines()
        head = json.loads(lines[0])
        pairs = [Pair(**json.loads(line)) for line in lines[1:] if line.strip()]
        cal = cls(pairs, head["source"], head["seed"], head["pool_size"])
        if head.get("fingerprint") and head["fingerprint"] != cal.fingerprint():
            raise ValueError(f"{path}: manifest fingerprint mismatch (edited?)")
        return cal


def sample_pairs(pool: Sequence[Pair], n: int = DEFAULT_N, seed: int = DEFAULT_SEED, source: str = "") -> Calibration:
    if n > len(pool):
        raise ValueError(f"cannot draw {n} pairs from a pool of {len(pool)}")
    idx = np.sort(np.random.default_rng(seed).choice(len(pool), size=n, replace=False))
    return Calibration([pool[int(i)] for i in idx], source, seed, len(pool))
