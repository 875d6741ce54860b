"""The offline `sample` source of the Flickr30k task: drawn scenes with five captions each.

Each image shows 1–4 drawn objects of one shape and colour above a terrain (lake, meadow,
desert, snowfield) at a time of day (morning, midday, dusk, night). Five captions describe
it in five styles, like five annotators: different words, different detail (one leaves the
time of day out), so caption-space neighbours share some attributes and differ in others,
which is what makes hard negatives hard. Everything is a pure function of the seed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image as PILImage

from mmbench.builders.sources.articles import article_for
from mmbench.data.media import encode_image

from mmbench.builders.sources.flickr30k import CaptionedImage
from mmbench.builders.sources.procedural import COLOURS, draw_object, fractal_noise

SHAPES: dict[str, tuple[tuple[str, str], ...]] = {  # (singular, plural) wordings
    "hexagon": (("hexagon", "hexagons"), ("six-sided shape", "six-sided shapes"), ("hexagonal tile", "hexagonal tiles")),
    "striped star": (("striped star", "striped stars"), ("star with white stripes", "stars with white stripes"),
                     ("banded star", "banded stars")),
    "three-eyed blob": (("three-eyed blob", "three-eyed blobs"), ("blob creature with three eyes",
                        "blob creatures with three eyes"), ("googly-eyed blob", "googly-eyed blobs")),
    "checkered sphere": (("checkered ball", "checkered balls"), ("chequered sphere", "chequered spheres"),
                         ("ball with a checkerboard pattern", "balls with a checkerboard pattern")),
    "crescent": (("crescent", "crescents"), ("crescent moon shape", "crescent moon shapes"),
                 ("sickle-shaped moon", "sickle-shaped moons")),
}
SAMPLE_COLOURS = ("red", "blue", "green", "yellow", "purple", "orange", "pink", "white")
COUNT_WORDS = {1: ("a", "one", "a single"), 2: ("two", "a pair of"), 3: ("three", "a trio of"), 4: ("four", "four")}
TIMES: dict[str, tuple[str, ...]] = {
    "morning": ("in the morning", "at sunrise", "in early morning light"),
    "midday": ("at midday", "on a bright day", "under a clear blue sky"),
    "dusk": ("at dusk", "at sunset", "in the evening light"),
    "night": ("at night", "under a dark night sky", "after dark"),
}
TERRAINS: dict[str, tuple[str, ...]] = {
    "lake": ("above a lake", "over calm water", "over a still lake"),
    "meadow": ("above a green meadow", "over a grassy field", "over grassland"),
    "desert": ("above a desert", "over sand dunes", "over a sandy plain"),
    "snowfield": ("above a snowfield", "over snowy ground", "over a field of snow"),
}
SKY = {"morning": ((150, 180, 230), (250, 220, 160)), "midday": ((60, 120, 215), (190, 220, 250)),
       "dusk": ((50, 40, 110), (250, 140, 80)), "night": ((8, 10, 35), (30, 40, 90))}
GROUND = {"lake": (50, 100, 170), "meadow": (70, 150, 60), "desert": (220, 190, 120), "snowfield": (235, 240, 248)}
IMAGE_SIDE = 96


@dataclass(frozen=True)
class SampleScene:
    """The attributes of one sample image; its captions and pixels follow from them and the seed."""

    image_id: str
    shape: str
    colour: str
    count: int
    time: str
    terrain: str
    seed: int


def sample_scenes(n: int = 100, seed: int = 0) -> list[SampleScene]:
    """`n` scenes with distinct attribute combinations, drawn with a seeded generator."""
    rng = np.random.default_rng(seed)
    combos = [(s, c, k, t, g) for s in SHAPES for c in SAMPLE_COLOURS for k in (1, 2, 3, 4) for t in TIMES
              for g in TERRAINS]
    if n > len(combos):
        raise ValueError(f"the sample has at most {len(combos)} distinct scenes, asked for {n}")
    picks = rng.choice(len(combos), size=n, replace=False)
    return [SampleScene(f"sample{i:04d}", *combos[j], seed=seed * 100_003 + i) for i, j in enumerate(picks)]


def captions(scene: SampleScene) -> tuple[str, ...]:
    """Five captions in five styles; wording choices are seeded by the scene."""
    rng = np.random.default_rng(scene.seed)
    pick = lambda options: options[int(rng.integers(len(options)))]  # noqa: E731
    plural = scene.count > 1
    noun = lambda: pick(SHAPES[scene.shape])[1 if plural else 0]  # noqa: E731
    count = lambda: pick(COUNT_WORDS[scene.count])  # noqa: E731
    fit = lambda w, nxt: article_for(nxt) if w == "a" else w  # "a" becomes "an" where the next word asks  # noqa: E731
    time, terrain = (lambda: pick(TIMES[scene.time])), (lambda: pick(TERRAINS[scene.terrain]))
    verb = "float" if plural else "floats"
    colour = scene.colour
    c0 = f"{fit(count(), colour)} {colour} {noun()} {verb} {terrain()} {time()}."
    c1 = f"{time()}, {fit(count(), colour)} {colour} {noun()} {'hang' if plural else 'hangs'} {terrain()}."
    w, n = count(), noun()   # drawn in this order, as before
    c2 = f"{fit(w, n)} {n} coloured {colour} {'are' if plural else 'is'} seen {terrain()}, {time()}."
    c3 = f"A picture taken {time()} showing {fit(count(), colour)} {colour} {noun()} {terrain()}."
    c4 = f"{fit(count(), colour)} {colour} {noun()} {terrain()}"  # terse, lower case, no time of day
    return tuple(c[0].upper() + c[1:] for c in (c0, c1, c2, c3)) + (c4.lower(),)


def render(scene: SampleScene, side: int = IMAGE_SIDE) -> PILImage.Image:
    """Sky gradient for the time of day, a textured terrain band, then the drawn objects."""
    rng = np.random.default_rng(scene.seed)
    y = np.linspace(0, 1, side)[:, None, None]
    top, horizon = (np.array(c, float) for c in SKY[scene.time])
    img = top + (horizon - top) * y * np.ones((1, side, 1))
    clouds = fractal_noise(side, side, rng, octaves=4, base=3)[..., None]
    img = img + np.clip(clouds - 0.6, 0, 1) * (60 if scene.time == "night" else 160)
    if scene.time == "night":
        stars = rng.random((side, side)) > 0.985
        img[stars] = 235
    ground = int(side * 0.68)
    tex = fractal_noise(side - ground, side, rng, octaves=4, base=6)[..., None]
    img[ground:] = np.array(GROUND[scene.terrain], float) * (0.75 + 0.4 * tex)
    base = PILImage.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    return draw_object(base, scene.shape, scene.colour, scene.count, scene.seed)


def _jpeg(scene: SampleScene) -> bytes:
    return encode_image(render(scene), "JPEG")[0]


def sample_flickr(n: int = 100, seed: int = 0) -> list[CaptionedImage]:
    """The sample source as captioned images (rendered lazily, JPEG like Flickr)."""
    assert set(SAMPLE_COLOURS) <= set(COLOURS)
    return [CaptionedImage(s.image_id, captions(s), (lambda s=s: _jpeg(s)), f"sample scene {s.image_id}")
            for s in sample_scenes(n, seed)]
