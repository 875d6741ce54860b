"""Procedural images: natural-looking scenes and textures, and synthetic objects drawn on them.

Everything is a pure function of a seed, so builds are reproducible. Scenes use fractal
value noise for skies, ridges, water and ground; textures use noise through colour maps
(marble, wood rings, clouds). Objects are drawn shapes whose colour or count can vary
while everything else stays fixed, which is what look-alike image anchors need.
"""
from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageChops, ImageDraw, ImageFilter

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (214, 40, 40), "blue": (40, 90, 220), "green": (40, 170, 70), "yellow": (240, 205, 40),
    "purple": (140, 60, 190), "orange": (245, 140, 30), "pink": (240, 120, 180), "teal": (30, 160, 160),
    "black": (25, 25, 25), "white": (245, 245, 245),
}
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven")


def fractal_noise(h: int, w: int, rng: np.random.Generator, octaves: int = 5, base: int = 4) -> np.ndarray:
    """Sum of bilinearly upsampled random grids at doubling frequencies, scaled to [0, 1]."""
    out = np.zeros((h, w), dtype=np.float64)
    amp, total = 1.0, 0.0
    for o in range(octaves):
        cells = base * 2 ** o
        grid = rng.random((cells + 1, cells + 1))
        ys = np.linspace(0, cells, h, endpoint=False)
        xs = np.linspace(0, cells, w, endpoint=False)
        y0, x0 = ys.astype(int), xs.astype(int)
        fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
        fy, fx = fy * fy * (3 - 2 * fy), fx * fx * (3 - 2 * fx)  # smoothstep
        a = grid[y0][:, x0]
        b = grid[y0][:, x0 + 1]
        c = grid[y0 + 1][:, x0]
        d = grid[y0 + 1][:, x0 + 1]
        out += amp * ((a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy)
        total += amp
        amp *= 0.5
    out /= total
    lo, hi = out.min(), out.max()
    return (out - lo) / (hi - lo + 1e-12)


def _lerp(c1, c2, t: np.ndarray) -> np.ndarray:
    c1, c2 = np.asarray(c1, float), np.asarray(c2, float)
    return c1 + (c2 - c1) * t[..., None]


def landscape(width: int, height: int, seed: int) -> Image.Image:
    """Sky, sun, two noisy mountain ridges and water or grass in front."""
    rng = np.random.default_rng(seed)
    y = np.linspace(0, 1, height)[:, None] * np.ones((1, width))
    dusk = rng.random() < 0.4
    top, horizon = ((40, 40, 110), (250, 150, 90)) if dusk else ((70, 130, 210), (200, 225, 245))
    img = _lerp(top, horizon, y)
    clouds = fractal_noise(height, width, rng, octaves=5, base=3)
    img = img + (np.clip(clouds - 0.55, 0, 1) * 200)[..., None] * (1 - y[..., None])
    sx, sy, sr = rng.uniform(0.15, 0.85) * width, rng.uniform(0.1, 0.35) * height, rng.uniform(0.04, 0.08) * width
    yy, xx = np.mgrid[0:height, 0:width]
    sun = np.clip(1.2 - np.hypot(xx - sx, yy - sy) / sr, 0, 1)
    img = img * (1 - sun[..., None]) + np.array((255, 240, 200)) * sun[..., None]
    for layer, (lo, hi, col) in enumerate(((0.35, 0.6, (90, 100, 130)), (0.5, 0.75, (50, 80, 60)))):
        ridge = fractal_noise(1, width, rng, octaves=6, base=2)[0]
        line = (lo + (hi - lo) * ridge) * height
        mask = yy >= line[None, :]
        shade = 0.75 + 0.25 * fractal_noise(height, width, rng, octaves=4, base=6)
        img[mask] = (np.array(col)[None, :] * shade[mask][:, None])
    ground = int(height * rng.uniform(0.78, 0.88))
    water = rng.random() < 0.5
    gcol = (60, 110, 170) if water else (70, 140, 60)
    tex = fractal_noise(height - ground, width, rng, octaves=5, base=8)
    img[ground:] = np.array(gcol) * (0.7 + 0.5 * tex[..., None])
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def texture(width: int, height: int, seed: int) -> Image.Image:
    """Marble, wood or cloud texture from fractal noise."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(3)
    n = fractal_noise(height, width, rng, octaves=6, base=4)
    yy, xx = np.mgrid[0:height, 0:width] / max(width, height)
    if kind == 0:  # marble veins
        t = 0.5 + 0.5 * np.sin((xx * 6 + n * 5) * math.pi)
        img = _lerp((235, 230, 220), (90, 85, 95), t ** 3)
    elif kind == 1:  # wood rings
        cx, cy = rng.uniform(-0.5, 1.5, 2)
        r = np.hypot(xx - cx, yy - cy) * 18 + n * 4
        t = (r - np.floor(r)) ** 2
        img = _lerp((200, 150, 90), (120, 70, 35), t)
    else:  # clouds over a random hue
        hue = rng.uniform(60, 220, 3)
        img = _lerp(hue * 0.4, hue, n)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def scene(width: int, height: int, seed: int) -> Image.Image:
    """A background image: a landscape or a texture, chosen by the seed."""
    return landscape(width, height, seed) if seed % 3 else texture(width, height, seed)


def star(cx: float, cy: float, r: float, points: int = 5) -> list[tuple[float, float]]:
    out = []
    for k in range(points * 2):
        rad = r if k % 2 == 0 else r * 0.45
        ang = math.pi * k / points - math.pi / 2
        out.append((cx + rad * math.cos(ang), cy + rad * math.sin(ang)))
    return out


def polygon(cx: float, cy: float, r: float, sides: int, rot: float = 0.0) -> list[tuple[float, float]]:
    return [(cx + r * math.cos(rot + 2 * math.pi * k / sides), cy + r * math.sin(rot + 2 * math.pi * k / sides))
            for k in range(sides)]


def draw_object(base: Image.Image, shape: str, colour: str, count: int, seed: int) -> Image.Image:
    """Draw `count` objects of `shape` in `colour` on a softened copy of `base`."""
    img = base.copy().filter(ImageFilter.GaussianBlur(1.5))
    draw = ImageDraw.Draw(img)
    w, h = img.size
    rgb = COLOURS[colour]
    outline = (20, 20, 20) if colour != "black" else (230, 230, 230)
    r = min(w, h) * (0.32 if count == 1 else 0.5 / (count + 0.6))
    xs = [w * (k + 1) / (count + 1) for k in range(count)]
    rng = np.random.default_rng(seed)
    for x in xs:
        y = h * 0.5 + rng.uniform(-0.05, 0.05) * h
        if shape == "striped star":
            draw.polygon(star(x, y, r), fill=rgb, outline=outline)
            for k in range(-2, 3):
                draw.line([(x - r * 0.5, y + k * r * 0.15), (x + r * 0.5, y + k * r * 0.15)], fill=(250, 250, 250), width=max(1, int(r * 0.05)))
        elif shape == "hexagon":
            draw.polygon(polygon(x, y, r, 6), fill=rgb, outline=outline, width=max(1, int(r * 0.08)))
        elif shape == "three-eyed blob":
            draw.ellipse([x - r, y - r * 0.8, x + r, y + r * 0.8], fill=rgb, outline=outline, width=max(1, int(r * 0.06)))
            for k in (-1, 0, 1):
                ex, ey = x + k * r * 0.45, y - r * 0.25
                draw.ellipse([ex - r * 0.16, ey - r * 0.16, ex + r * 0.16, ey + r * 0.16], fill=(255, 255, 255), outline=outline)
                draw.ellipse([ex - r * 0.07, ey - r * 0.07, ex + r * 0.07, ey + r * 0.07], fill=(10, 10, 10))
        elif shape == "checkered sphere":
            box = [x - r, y - r, x + r, y + r]
            draw.ellipse(box, fill=(245, 245, 245))
            # checker squares clipped to the disc: colour only where square and sphere overlap
            disc = _mask(img.size, lambda d: d.ellipse(box, fill=255))
            n = 4
            squares = _mask(img.size, lambda d: [d.rectangle([x - r + 2 * r * i / n, y - r + 2 * r * j / n,
                                                               x - r + 2 * r * (i + 1) / n, y - r + 2 * r * (j + 1) / n],
                                                              fill=255)
                                                  for i in range(n) for j in range(n) if (i + j) % 2 == 0])
            img.paste(rgb, mask=ImageChops.multiply(disc, squares))
            draw.ellipse(box, outline=outline)
        elif shape == "crescent":
            # a disc minus an offset disc: the bite shows the background, not a colour sampled from the image
            off = r * 0.45
            disc = _mask(img.size, lambda d: d.ellipse([x - r, y - r, x + r, y + r], fill=255))
            bite = _mask(img.size, lambda d: d.ellipse([x - r + off, y - r - off * 0.3, x + r + off, y + r - off * 0.3],
                                                        fill=255))
            img.paste(rgb, mask=ImageChops.subtract(disc, bite))
        else:
            raise ValueError(f"unknown shape {shape!r}")
    return img


def _mask(size: tuple[int, int], paint) -> Image.Image:
    """A greyscale mask of `size`, black except where `paint(draw)` fills it."""
    m = Image.new("L", size, 0)
    paint(ImageDraw.Draw(m))
    return m
