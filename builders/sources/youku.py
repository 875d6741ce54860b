"""YoukuDenseCaption: Chinese dense event captions of Youku videos, with local video files.

Accepted layouts (annotation fields as in ActivityNet Captions; Chinese sentences)::

    annotations.json    {"<video_id>": {"duration": 63.2, "timestamps": [[0.0, 12.5], ...],
                                        "sentences": ["一个男人走进厨房", ...]}, ...}
    annotations.jsonl   one record per line: {"video_id": "<id>", "duration": ..., "timestamps": [...],
                                              "sentences": [...]}
    videos/             <video_id>.<ext>, ext one of mp4, mkv, webm, avi, mov, m4v

`timestamps` may be null or absent: such a video is segmented by the shot detector.
Queries are Chinese unless the chat rewrite (which translates into English) is enabled.
"""
from __future__ import annotations

from pathlib import Path

from .activitynet import VideoRecord, attach_videos, limit_records, parse_record, read_caption_json
from .jsonl import read_jsonl


def read_youku(annotations: Path, video_root: Path, max_videos: int | None = None, seed: int = 0) -> list[VideoRecord]:
    annotations = Path(annotations)
    if not annotations.is_file():
        raise FileNotFoundError(f"YoukuDenseCaption annotation file not found: {annotations}")
    records = []
    if annotations.suffix == ".jsonl":
        for where, _, rec in read_jsonl(annotations):
            vid = rec.get("video_id")
            if not vid:
                raise ValueError(f"{where}: missing field 'video_id'")
            records.append(parse_record(str(vid), rec, where, "zh", "youku"))
    else:
        records = read_caption_json(annotations, "zh", "youku")
    return attach_videos(limit_records(records, max_videos, seed), Path(video_root))
