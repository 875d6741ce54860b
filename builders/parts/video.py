"""1-FPS video decoding and frame sizing for video candidates.

Frames are chosen by timestamp, not by index arithmetic: for each sample time t_k = k / fps
(k = 0, 1, … while t_k < duration) the frame *on screen* at t_k is taken, i.e. the last frame
whose presentation time is ≤ t_k. Times are measured from the first frame. decord is the
primary reader and PyAV the fallback; both apply the same rule, so they pick the same frames.

Frame sizes. By default (length control by duration) every video of a build is rendered at one
standard frame size (sides multiples of 32), letterboxed so its aspect ratio is kept, and its
length is its 1-FPS frame count times that size's unified tokens (`letterbox_frame`). The optional
length control by resolution renders a video of n sampled frames for a target unified length L
with a grid of a×b visual tokens per frame (frame = 32b × 32a pixels) so that n·a·b is within a
tolerance of L, inside a per-frame pixel budget, and close to the source's aspect ratio
(`fit_frame_size`). Any file that cannot be opened or decoded raises `VideoReadError` naming it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
from PIL import Image as PILImage
from PIL import ImageOps

TIME_EPS = 1e-6                        # seconds: a frame exactly at t_k counts as on screen at t_k
MIN_FRAME_PIXELS = 4 * 32 * 32         # 4 unified tokens per frame at least
MAX_FRAME_PIXELS = 768 * 32 * 32       # Qwen3-VL's per-frame video ceiling (768 tokens)
MAX_ASPECT_DISTORTION = 1.34           # a grid's aspect may differ from the source's by this factor
READERS = ("auto", "decord", "pyav")
_DECORD_BATCH = 16


class VideoReadError(RuntimeError):
    """A video file is missing, corrupt or undecodable; the message names the file."""


def sample_times(duration: float, fps: float = 1.0) -> list[float]:
    """Sample times k/fps for k = 0, 1, … with k/fps < duration (at least one if duration > 0)."""
    if duration <= 0:
        return []
    n = max(1, math.ceil(duration * fps - TIME_EPS))
    return [k / fps for k in range(n)]


def pick_indices(frame_starts: Sequence[float], times: Sequence[float]) -> list[int]:
    """For each time, the index of the last frame whose start time is ≤ that time (first frame if none)."""
    starts = np.asarray(frame_starts, dtype=np.float64)
    idx = np.searchsorted(starts, np.asarray(times, dtype=np.float64) + TIME_EPS, side="right") - 1
    return [int(i) for i in np.clip(idx, 0, len(starts) - 1)]


@dataclass
class SampledVideo:
    """A video opened for 1-FPS sampling; `frames()` decodes the chosen frames in order."""

    path: Path
    reader: str
    duration: float
    width: int
    height: int
    native_fps: float
    times: list[float]
    _iter: Callable[[], Iterator[np.ndarray]] = field(repr=False, default=None)  # type: ignore[assignment]

    @property
    def n_frames(self) -> int:
        return len(self.times)

    def frames(self) -> Iterator[np.ndarray]:
        """Yield the sampled frames as (H, W, 3) uint8 arrays; raises `VideoReadError` on decode failure."""
        count = 0
        try:
            for frame in self._iter():
                count += 1
                yield frame
        except VideoReadError:
            raise
        except Exception as exc:  # decoders raise many types (DECORDError, av.error.*, OSError)
            raise VideoReadError(f"cannot decode video {self.path} ({self.reader}): {type(exc).__name__}: {exc}") from exc
        if count != len(self.times):
            raise VideoReadError(f"video {self.path} ({self.reader}): decoded {count} of {len(self.times)} sampled frames")


def open_video(path: Path | str, fps: float = 1.0, reader: str = "auto") -> SampledVideo:
    """Open `path` for sampling at `fps` with decord, falling back to PyAV when `reader="auto"`."""
    path = Path(path)
    if reader not in READERS:
        raise ValueError(f"unknown video reader {reader!r}; use one of {READERS}")
    if not path.is_file():
        raise VideoReadError(f"video file not found: {path}")
    if path.stat().st_size == 0:
        raise VideoReadError(f"video file is empty: {path}")
    errors = []
    for name in (("decord", "pyav") if reader == "auto" else (reader,)):
        try:
            return _OPENERS[name](path, fps)
        except Exception as exc:  # noqa: BLE001 - any failure of one reader moves on to the next
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
    raise VideoReadError(f"cannot read video {path}: " + "; ".join(errors))


def _open_decord(path: Path, fps: float) -> SampledVideo:
    import decord

    vr = decord.VideoReader(str(path), ctx=decord.cpu(0), num_threads=1)
    n = len(vr)
    if n == 0:
        raise ValueError("no video frames")
    stamps = np.asarray(vr.get_frame_timestamp(list(range(n))), dtype=np.float64)
    origin = stamps[0, 0]
    starts = stamps[:, 0] - origin
    duration = float(stamps[-1, 1] - origin)
    times = sample_times(duration, fps)
    indices = pick_indices(starts, times)
    first = vr[0].asnumpy()

    def iterate() -> Iterator[np.ndarray]:
        for lo in range(0, len(indices), _DECORD_BATCH):
            batch = vr.get_batch(indices[lo:lo + _DECORD_BATCH]).asnumpy()
            yield from batch

    return SampledVideo(path, "decord", duration, int(first.shape[1]), int(first.shape[0]),
                        float(vr.get_avg_fps()), times, iterate)


def _open_pyav(path: Path, fps: float) -> SampledVideo:
    import av

    with av.open(str(path)) as container:
        if not container.streams.video:
            raise ValueError("no video stream")
        stream = container.streams.video[0]
        base = stream.time_base
        pts, last_duration, max_pts = [], 0, None
        for packet in container.demux(stream):
            if packet.pts is None:
                continue
            pts.append(packet.pts)
            if max_pts is None or packet.pts >= max_pts:
                max_pts, last_duration = packet.pts, packet.duration or 0
        if not pts:
            raise ValueError("no video packets")
        width, height = stream.codec_context.width, stream.codec_context.height
        rate = float(stream.average_rate or 0) or 0.0
    origin = min(pts)
    frame_len = float(last_duration * base) if last_duration else (1.0 / rate if rate else 0.0)
    duration = float((max(pts) - origin) * base) + frame_len
    times = sample_times(duration, fps)

    def iterate() -> Iterator[np.ndarray]:
        with av.open(str(path)) as cont:
            st = cont.streams.video[0]
            k, held, first_time = 0, None, None
            for frame in cont.decode(st):
                if frame.pts is None:
                    continue
                t = float(frame.pts * st.time_base)
                first_time = t if first_time is None else first_time
                t -= first_time
                while k < len(times) and t > times[k] + TIME_EPS:   # this frame starts after t_k: show `held`
                    yield (held or frame).to_ndarray(format="rgb24")
                    k += 1
                if k >= len(times):
                    return
                held = frame
            while k < len(times) and held is not None:
                yield held.to_ndarray(format="rgb24")
                k += 1

    return SampledVideo(path, "pyav", duration, int(width), int(height), rate, times, iterate)


_OPENERS = {"decord": _open_decord, "pyav": _open_pyav}


# --- frame sizing --------------------------------------------------------------------------------

def fit_frame_size(n_frames: int, target_tokens: int, width: int, height: int, tolerance: float,
                   min_pixels: int = MIN_FRAME_PIXELS, max_pixels: int = MAX_FRAME_PIXELS) -> tuple[int, int] | None:
    """(width, height), multiples of 32, making n_frames·⌈H/32⌉·⌈W/32⌉ within ±tolerance of target, or None.

    Among grids inside the pixel budget whose aspect is within MAX_ASPECT_DISTORTION of the source's,
    the one closest to the target length wins; ties go to the smaller aspect distortion.
    """
    if n_frames <= 0 or width <= 0 or height <= 0:
        return None
    aspect = width / height
    best: tuple[float, float, int, int] | None = None
    max_cells = max_pixels // 1024
    for rows in range(1, max_cells + 1):
        for cols in {max(1, math.floor(rows * aspect)), max(1, math.ceil(rows * aspect))} | {
                max(1, round(rows * aspect)) + d for d in (-1, 1)}:
            cells = rows * cols
            if cols < 1 or cells * 1024 > max_pixels or cells * 1024 < min_pixels:
                continue
            distortion = abs(math.log((cols / rows) / aspect))
            if distortion > math.log(MAX_ASPECT_DISTORTION):
                continue
            err = abs(n_frames * cells - target_tokens) / target_tokens
            key = (round(err, 9), distortion, rows, cols)
            if best is None or key < best:
                best = key
    if best is None or best[0] > tolerance:
        return None
    return best[3] * 32, best[2] * 32


def resize_frame(frame: np.ndarray, size: tuple[int, int]) -> PILImage.Image:
    """An (H, W, 3) frame as a PIL image of `size` = (width, height), bicubic."""
    img = PILImage.fromarray(np.ascontiguousarray(frame[..., :3]), "RGB")
    return img if img.size == size else img.resize(size, PILImage.Resampling.BICUBIC)


def letterbox_frame(frame: np.ndarray, size: tuple[int, int]) -> PILImage.Image:
    """An (H, W, 3) frame scaled (bicubic) to fit inside `size` = (width, height), aspect kept, centred on black."""
    img = PILImage.fromarray(np.ascontiguousarray(frame[..., :3]), "RGB")
    if img.size == size:
        return img
    return ImageOps.pad(img, size, method=PILImage.Resampling.BICUBIC, color=(0, 0, 0), centering=(0.5, 0.5))


def colour_histogram(frame: np.ndarray, bins: int = 8) -> np.ndarray:
    """Normalised joint RGB histogram (bins³ cells) of a frame, on a ≤64-px thumbnail for speed."""
    step = max(1, max(frame.shape[0], frame.shape[1]) // 64)
    small = frame[::step, ::step, :3].reshape(-1, 3).astype(np.int64) * bins // 256
    codes = (small[:, 0] * bins + small[:, 1]) * bins + small[:, 2]
    hist = np.bincount(codes, minlength=bins ** 3).astype(np.float64)
    return hist / hist.sum()
