"""ActivityNet Captions: dense event captions of YouTube videos, with local video files.

Expected layout::

    annotations.json   {"v_QOlSCBRmfWY": {"duration": 82.73,
                                           "timestamps": [[0.83, 19.86], [17.37, 60.81], ...],
                                           "sentences": ["A young woman is seen ...", ...]}, ...}
    videos/            one file per video: <id>.<ext> or, without the "v_" prefix, <id[2:]>.<ext>,
                       ext one of mp4, mkv, webm, avi, mov, m4v (searched in that order)

(the official `train.json`, `val_1.json`, `val_2.json` have this shape). The parser here is shared
by every dense-caption source (`youku.py`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mmbench.builders.sources.records import Event
from mmbench.builders.sources.jsonl import read_json

VIDEO_EXTENSIONS = ("mp4", "mkv", "webm", "avi", "mov", "m4v")


@dataclass(frozen=True)
class VideoRecord:
    """One annotated video: events with captions (or captions only, when timestamps are absent)."""

    id: str
    path: Path | None
    duration: float | None
    captions: tuple[str, ...]
    events: tuple[Event, ...] | None       # None: no timestamps, segment with the shot detector
    lang: str = "en"
    dataset: str = "activitynet"


def parse_record(vid: str, rec: Any, where: str, lang: str, dataset: str) -> VideoRecord:
    """One dense-caption record ({duration, timestamps, sentences}); errors name file, record and field."""
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: record {vid!r} is not an object")
    sentences = rec.get("sentences")
    if not isinstance(sentences, list) or not sentences or not all(isinstance(s, str) for s in sentences):
        raise ValueError(f"{where}: record {vid!r}: field 'sentences' must be a non-empty list of strings")
    duration = rec.get("duration")
    if duration is not None:
        try:
            duration = float(duration)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: record {vid!r}: field 'duration' is not a number: {duration!r}") from None
    stamps = rec.get("timestamps")
    events = None
    if stamps is not None:
        if not isinstance(stamps, list) or len(stamps) != len(sentences):
            raise ValueError(f"{where}: record {vid!r}: field 'timestamps' must be a list with one [start, end] "
                             f"per sentence ({len(sentences)})")
        try:
            events = tuple(Event(float(s), float(e), c) for (s, e), c in zip(stamps, sentences))
        except (TypeError, ValueError):
            raise ValueError(f"{where}: record {vid!r}: field 'timestamps' must hold [start, end] number pairs") \
                from None
    return VideoRecord(str(vid), None, duration, tuple(sentences), events, lang, dataset)


def find_video(root: Path, vid: str) -> Path | None:
    names = [vid] + ([vid[2:]] if vid.startswith("v_") else [])
    for name in names:
        for ext in VIDEO_EXTENSIONS:
            p = root / f"{name}.{ext}"
            if p.is_file():
                return p
    return None


def attach_videos(records: list[VideoRecord], video_root: Path) -> list[VideoRecord]:
    """Records with their video path set (None when no file is found: the builder reports it)."""
    if not video_root.is_dir():
        raise FileNotFoundError(f"video folder not found: {video_root}")
    return [VideoRecord(r.id, find_video(video_root, r.id), r.duration, r.captions, r.events, r.lang, r.dataset)
            for r in records]


def limit_records(records: list[VideoRecord], max_videos: int | None, seed: int) -> list[VideoRecord]:
    """All records sorted by id, or a seeded sample of `max_videos` of them (still sorted)."""
    records = sorted(records, key=lambda r: r.id)
    if max_videos is None or max_videos >= len(records):
        return records
    rng = np.random.default_rng(seed)
    keep = sorted(rng.choice(len(records), size=int(max_videos), replace=False).tolist())
    return [records[i] for i in keep]


def read_activitynet(annotations: Path, video_root: Path, max_videos: int | None = None,
                     seed: int = 0) -> list[VideoRecord]:
    annotations = Path(annotations)
    if not annotations.is_file():
        raise FileNotFoundError(f"ActivityNet Captions annotation file not found: {annotations}")
    records = read_caption_json(annotations, "en", "activitynet")
    return attach_videos(limit_records(records, max_videos, seed), Path(video_root))


def read_caption_json(annotations: Path, language: str, dataset: str) -> list[VideoRecord]:
    """An ActivityNet-style JSON object mapping video ids to {duration, timestamps, sentences}."""
    data = read_json(annotations)  # errors name the file and the line
    if not isinstance(data, dict):
        raise ValueError(f"{annotations}: expected an object mapping video ids to records")
    return [parse_record(vid, rec, str(annotations), language, dataset) for vid, rec in data.items()]
