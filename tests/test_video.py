"""1-FPS video sampling (decord and PyAV agree), frame sizing under the unified count, unreadable files."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from mmbench.builders.sources.sample_videos import write_video
from mmbench.builders.parts.video import (MAX_ASPECT_DISTORTION, VideoReadError, colour_histogram, fit_frame_size,
                                    open_video, pick_indices, resize_frame, sample_times)

BANDS = 8  # frame index written in binary as 8 vertical black/white bands of 16 px


def _index_frames(n: int, width: int = 128, height: int = 64):
    for i in range(n):
        a = np.zeros((height, width, 3), np.uint8)
        for b in range(BANDS):
            if (i >> b) & 1:
                a[:, b * 16:(b + 1) * 16] = 255
        yield a


def _read_index(frame: np.ndarray) -> int:
    return sum(int(frame[:, b * 16 + 4:b * 16 + 12].mean() > 127) << b for b in range(BANDS))


@pytest.fixture(scope="module", params=[Fraction(30000, 1001), Fraction(15, 2)], ids=["29.97fps", "7.5fps"])
def clip(request, tmp_path_factory):
    rate = request.param
    n = int(4.5 * rate)  # a little over 4.5 s: samples at t = 0, 1, 2, 3, 4
    path = tmp_path_factory.mktemp("clip") / "index.mp4"
    write_video(path, _index_frames(n), fps=rate)
    return path, rate, n


def test_one_fps_picks_the_frame_on_screen(clip):
    path, rate, n = clip
    # independent reference: frame i is on screen during [i/rate, (i+1)/rate), so at t it is floor(t*rate)
    expected = [math.floor(k * rate) for k in range(5)]
    decoded = {}
    for reader in ("decord", "pyav"):
        video = open_video(path, fps=1.0, reader=reader)
        assert video.reader == reader
        assert video.times == [0.0, 1.0, 2.0, 3.0, 4.0]
        assert video.duration == pytest.approx(n / rate, abs=1e-3)
        frames = list(video.frames())
        assert [_read_index(f) for f in frames] == expected, reader
        assert (video.width, video.height) == (128, 64)
        decoded[reader] = np.stack(frames).astype(np.int16)
    assert decoded["decord"].shape == decoded["pyav"].shape
    assert np.abs(decoded["decord"] - decoded["pyav"]).mean() < 2.0  # same frames, same colour conversion


def test_auto_reader_prefers_decord(clip):
    assert open_video(clip[0]).reader == "decord"


def test_sample_times_and_pick_indices():
    assert sample_times(3.0) == [0.0, 1.0, 2.0]
    assert sample_times(3.0001) == [0.0, 1.0, 2.0, 3.0]
    assert sample_times(0.4) == [0.0]
    assert sample_times(0.0) == []
    assert sample_times(2.0, fps=2.0) == [0.0, 0.5, 1.0, 1.5]
    starts = [0.0, 0.4, 0.8, 1.2, 1.6, 2.0]
    # a frame starting exactly at t is on screen at t; between starts the earlier frame is
    assert pick_indices(starts, [0.0, 1.0, 1.2, 2.5]) == [0, 2, 3, 5]


@pytest.mark.parametrize("n,target,w,h", [(48, 8192, 128, 128), (48, 32768, 128, 128), (120, 16384, 1280, 720),
                                          (700, 8192, 1280, 720), (55, 2048, 320, 240)])
def test_fit_frame_size_hits_the_bin(n, target, w, h):
    fw, fh = fit_frame_size(n, target, w, h, tolerance=0.10)
    assert fw % 32 == 0 and fh % 32 == 0
    tokens = n * math.ceil(fh / 32) * math.ceil(fw / 32)
    assert abs(tokens - target) <= 0.10 * target
    assert fw * fh <= 768 * 32 * 32
    assert abs(math.log((fw / fh) / (w / h))) <= math.log(MAX_ASPECT_DISTORTION) + 1e-9


def test_fit_frame_size_refuses_what_cannot_fit():
    assert fit_frame_size(10, 32768, 128, 128, 0.10) is None      # 10 frames would need > 768 tokens each
    assert fit_frame_size(3000, 8192, 128, 128, 0.10) is None     # 3000 frames exceed 8K even at 4 tokens each
    assert fit_frame_size(48, 8192, 128, 128, 0.10, max_pixels=64 * 32 * 32) is None  # pixel budget too small


def test_resize_and_histogram():
    frame = np.zeros((64, 128, 3), np.uint8)
    frame[:, 64:] = 255
    img = resize_frame(frame, (96, 32))
    assert img.size == (96, 32)
    h = colour_histogram(frame)
    assert h.sum() == pytest.approx(1.0) and sorted(h[h > 0]) == pytest.approx([0.5, 0.5])


def test_unreadable_files_name_the_file(tmp_path):
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(b"not a video at all " * 64)
    with pytest.raises(VideoReadError, match="garbage.mp4") as err:
        open_video(garbage)
    assert "decord" in str(err.value) and "pyav" in str(err.value)   # both readers were tried
    with pytest.raises(VideoReadError, match="garbage.mp4"):
        open_video(garbage, reader="pyav")
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(VideoReadError, match="empty.mp4"):
        open_video(empty)
    with pytest.raises(VideoReadError, match="not found: .*missing.mp4"):
        open_video(tmp_path / "missing.mp4")
    with pytest.raises(ValueError, match="unknown video reader"):
        open_video(garbage, reader="opencv")


def test_letterbox_keeps_the_aspect_inside_the_standard_frame():
    from mmbench.builders.parts.video import letterbox_frame

    frame = np.full((90, 160, 3), 200, np.uint8)            # 16:9 into a square frame: bars above and below
    img = np.asarray(letterbox_frame(frame, (64, 64)))
    assert img.shape == (64, 64, 3)
    assert img[:8].max() == 0 and img[-8:].max() == 0       # black bars
    assert abs(int(img[32, 32, 0]) - 200) <= 2 and abs(int(img[32, 0, 0]) - 200) <= 2   # content spans the width
    same = np.zeros((64, 64, 3), np.uint8)
    assert np.array_equal(np.asarray(letterbox_frame(same, (64, 64))), same)
