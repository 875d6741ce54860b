"""RAVEL's offline calibration source: procedurally drawn images (coloured shapes on a background at named
positions) with captions that describe them, fully determined by (pool seed, index)."""
from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from mmbench.data.calibration import Pair

SAMPLE_POOL_SIZE = 5000
SCHEME = "sample://"
COLORS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 80, 220), "yellow": (235, 210, 40),
          "purple": (140, 60, 180), "orange": (240, 140, 30), "black": (20, 20, 20), "white": (245, 245, 245)}
SHAPES = ("circle", "square", "triangle")
POSITIONS = {"top left": (0.25, 0.25), "top right": (0.75, 0.25), "bottom left": (0.25, 0.75),
             "bottom right": (0.75, 0.75), "center": (0.5, 0.5)}
NUMBER = {1: "one", 2: "two", 3: "three"}


def sample_spec(pool_seed: int, index: int) -> dict[str, Any]:
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


def sample_caption(spec: dict[str, Any]) -> str:
    parts = [f"{_article(o['color'])} {o['color']} {o['shape']} at the {o['position']}" for o in spec["objects"]]
    n = len(parts)
    listing = parts[0] if n == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{NUMBER[n].capitalize()} shape{'s' if n > 1 else ''} on a {spec['background']} background: {listing}."


def render_sample(spec: dict[str, Any], size: int = 224) -> Image.Image:
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
    return [Pair(i, f"sample-{pool_seed}-{i}", f"{SCHEME}{pool_seed}/{i}", sample_caption(sample_spec(pool_seed, i)))
            for i in range(pool_size)]


def parse_ref(ref: str) -> tuple[int, int] | None:
    """(pool seed, index) of a `sample://SEED/INDEX` reference, None for another reference (a file)."""
    if not ref.startswith(SCHEME):
        return None
    seed, _, idx = ref[len(SCHEME):].partition("/")
    if not (seed.isdigit() and idx.isdigit()):
        raise ValueError(f"image {ref!r} is not a sample reference ({SCHEME}SEED/INDEX)")
    return int(seed), int(idx)
