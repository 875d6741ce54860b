"""The offline `sample` source: synthetic H.264 videos of chosen durations with distinct, describable events.

The builder asks for videos of given whole-second durations (spread over its length bins, see
`spread_durations`). Each video strings together 3–4 scenes drawn from a small vocabulary (a red
ball rolling left to right, a blue square growing, a yellow star spinning on green, …); the scene
lengths are a seeded integer split of the duration, each at least MIN_SCENE_S seconds, so scene
changes fall on whole seconds. No two videos of one call show the same scene sequence (their
queries would be the same question). Videos are written at 128×128 px and 4 fps with PyAV's
bundled libx264 (no system ffmpeg). Captions describe each scene. To exercise the whole
pipeline, annotations are jittered by up to ±0.25 s (neighbouring events may overlap a little,
which the 0.5 s filter keeps), every third video carries an extra whole-video caption that the
filter drops, and every fifth video has no timestamps at all, so the shot detector segments it.
Everything is a pure function of the seed and the durations.
"""
from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from PIL import Image, ImageDraw

from mmbench.builders.sources.records import Event
from mmbench.builders.sources.activitynet import VideoRecord

SIZE = 128
FPS = 4
MIN_SCENE_S = 5         # seconds: every scene (event) lasts at least this long

Draw = Callable[[ImageDraw.ImageDraw, float, np.random.Generator], None]


def _ball(d: ImageDraw.ImageDraw, p: float, rng) -> None:
    x = 12 + p * (SIZE - 24)
    d.rectangle([0, 96, SIZE, SIZE], fill=(90, 90, 90))
    d.ellipse([x - 12, 72, x + 12, 96], fill=(214, 40, 40))


def _square(d, p, rng) -> None:
    r = 6 + p * 50
    d.rectangle([64 - r, 64 - r, 64 + r, 64 + r], fill=(40, 90, 220))


def _star(d, p, rng) -> None:
    angle = p * 6 * math.pi
    pts = [(64 + (40 if i % 2 == 0 else 16) * math.cos(angle + i * math.pi / 5),
            64 + (40 if i % 2 == 0 else 16) * math.sin(angle + i * math.pi / 5)) for i in range(10)]
    d.polygon(pts, fill=(240, 205, 40))


def _bounce(d, p, rng) -> None:
    y = 100 - 76 * abs(math.sin(p * 5 * math.pi))
    d.ellipse([52, y - 24, 76, y], fill=(140, 60, 190))


def _stripes(d, p, rng) -> None:
    off = int(p * 160) % 32
    for y in range(-32 + off, SIZE, 32):
        d.rectangle([0, y, SIZE, y + 15], fill=(245, 140, 30))


def _triangle(d, p, rng) -> None:
    r = 50 * (1 - p) + 2
    d.polygon([(64, 64 - r), (64 - r, 64 + r * 0.8), (64 + r, 64 + r * 0.8)], fill=(240, 120, 180))


def _dots(d, p, rng) -> None:
    dx = 50 * (1 - p)
    for x in (64 - dx, 64 + dx):
        d.ellipse([x - 10, 54, x + 10, 74], fill=(30, 160, 160))


def _snow(d, p, rng) -> None:
    flakes = np.random.default_rng(7).random((40, 2))
    for fx, fy in flakes:
        y = (fy + p * 3) % 1.0 * SIZE
        d.ellipse([fx * SIZE - 2, y - 2, fx * SIZE + 2, y + 2], fill=(250, 250, 250))


# (background, drawer, caption)
SCENES: tuple[tuple[tuple[int, int, int], Draw, str], ...] = (
    ((200, 200, 200), _ball, "A red ball rolls from the left side to the right side over a grey floor"),
    ((250, 250, 250), _square, "A blue square grows larger in the middle of a white screen"),
    ((40, 150, 60), _star, "The scene cuts to a green background where a yellow star spins in the centre"),
    ((20, 20, 20), _bounce, "A purple ball bounces up and down on a black background"),
    ((255, 255, 255), _stripes, "Orange and white stripes scroll slowly downwards"),
    ((160, 210, 240), _triangle, "A pink triangle shrinks until it almost disappears on a light blue background"),
    ((225, 200, 150), _dots, "Two teal dots move towards each other and meet on a sand-coloured background"),
    ((15, 25, 80), _snow, "White snow falls across a dark blue night sky"),
)
WHOLE_VIDEO_CAPTION = "Coloured shapes appear on the screen one after another"


def write_video(path: Path, frames, fps: int = FPS) -> None:
    """Write RGB uint8 frames as an H.264 MP4 with PyAV (single-threaded: byte-identical output)."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=Fraction(fps))
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": "20", "preset": "veryfast", "threads": "1"}
        first = True
        for arr in frames:
            if first:
                stream.height, stream.width = arr.shape[:2]
                first = False
            for packet in stream.encode(av.VideoFrame.from_ndarray(arr, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def spread_durations(lo: int, hi: int, n: int) -> list[int]:
    """`n` whole-second durations spread evenly inside [lo, hi] (interior points, increasing)."""
    if hi < lo:
        raise ValueError(f"empty duration range [{lo}, {hi}] s")
    return [int(round(lo + (hi - lo) * (j + 1) / (n + 1))) for j in range(n)]


def _plan(rng: np.random.Generator, duration: int, used: set[tuple[int, ...]]) -> list[tuple[int, int]]:
    """(scene index, whole seconds) for one video of `duration` s; a scene sequence not in `used`."""
    n = 4 if duration >= 4 * MIN_SCENE_S and rng.random() < 0.5 else 3
    if duration < n * MIN_SCENE_S:
        raise ValueError(f"a sample video of {duration} s cannot hold {n} scenes of >= {MIN_SCENE_S} s")
    while True:
        scenes = tuple(rng.choice(len(SCENES), size=n, replace=False).tolist())
        if scenes not in used:
            used.add(scenes)
            break
    extra = duration - n * MIN_SCENE_S
    cuts = sorted(rng.integers(0, extra + 1, size=n - 1).tolist())
    lengths = [MIN_SCENE_S + b - a for a, b in zip([0, *cuts], [*cuts, extra])]
    return list(zip(scenes, lengths))


def _render(plan: list[tuple[int, int]], rng: np.random.Generator):
    for scene, seconds in plan:
        bg, draw, _ = SCENES[scene]
        for f in range(seconds * FPS):
            img = Image.new("RGB", (SIZE, SIZE), bg)
            draw(ImageDraw.Draw(img), f / (seconds * FPS - 1), rng)
            yield np.asarray(img)


def make_sample_videos(folder: Path, durations: Sequence[int], seed: int = 0) -> list[VideoRecord]:
    """Write one sample video per entry of `durations` (whole seconds) into `folder`; their annotation records."""
    folder = Path(folder)
    records, used = [], set()
    for i, total in enumerate(durations):
        rng = np.random.default_rng([seed, i])
        plan = _plan(rng, int(total), used)
        vid = f"sample_{i:02d}"
        path = folder / f"{vid}.mp4"
        write_video(path, _render(plan, rng))
        duration = float(sum(s for _, s in plan))
        captions = [SCENES[s][2] for s, _ in plan]
        events = None
        if i % 5 != 4:
            t, events = 0.0, []
            for (scene, seconds), caption in zip(plan, captions):
                jitter = rng.uniform(-0.25, 0.25, size=2)
                events.append(Event(max(0.0, t + jitter[0]), min(duration, t + seconds + jitter[1]), caption))
                t += seconds
            if i % 3 == 2:
                events.append(Event(0.0, duration, WHOLE_VIDEO_CAPTION))
                captions.append(WHOLE_VIDEO_CAPTION)
            events = tuple(events)
        records.append(VideoRecord(vid, path, duration, tuple(captions), events, "en", "sample"))
    return records


def scene_starts(durations: Sequence[int], seed: int = 0) -> list[list[int]]:
    """The true scene-change times (whole seconds, first scene at 0) of `make_sample_videos(_, durations, seed)`."""
    used: set[tuple[int, ...]] = set()
    out = []
    for i, total in enumerate(durations):
        plan = _plan(np.random.default_rng([seed, i]), int(total), used)
        out.append([int(x) for x in np.cumsum([0] + [s for _, s in plan[:-1]])])
    return out
