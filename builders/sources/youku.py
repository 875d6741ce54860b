"""YoukuDenseCaption: Chinese dense event captions of Youku videos, with local video files.

The official release (meta_files/<Category>.csv, benchmark_files/grounding.json, data_files/) is
converted by `mmbench prepare youku --root RELEASE --out youku.jsonl` (`youku_prepare.py`); its
records carry `video_path` (relative to the release root: pass `video_root=RELEASE`).
Accepted layouts (annotation fields as in ActivityNet Captions; Chinese sentences)::

    annotations.json    {"<video_id>": {"duration": 63.2, "timestamps": [[0.0, 12.5], ...],
                                        "sentences": ["一个男人走进厨房", ...]}, ...}
    annotations.jsonl   one record per line: {"video_id": "<id>", "duration": ..., "timestamps": [...],
                                              "sentences": [...]}
    videos/             <video_id>.<ext>, ext one of mp4, mkv, webm, avi, mov, m4v, or the record's
                        optional `video_path` (relative to video_root)

`timestamps` may be null or absent: such a video is segmented by the shot detector.
Queries are Chinese unless the chat rewrite (which translates into English) is enabled.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from mmbench.builders.sources.activitynet import VideoRecord, attach_videos, limit_records, parse_record, read_caption_json
from mmbench.builders.sources.jsonl import read_jsonl


def read_youku(annotations: Path, video_root: Path, max_videos: int | None = None, seed: int = 0) -> list[VideoRecord]:
    annotations = Path(annotations)
    if not annotations.is_file():
        raise FileNotFoundError(f"YoukuDenseCaption annotation file not found: {annotations}")
    records, paths = [], {}
    if annotations.suffix == ".jsonl":
        for where, _, rec in read_jsonl(annotations):
            vid = rec.get("video_id")
            if not vid:
                raise ValueError(f"{where}: missing field 'video_id'")
            rel = rec.get("video_path")
            if rel is not None and not isinstance(rel, str):
                raise ValueError(f"{where}: record {vid!r}: field 'video_path' must be a string or null")
            if rel:
                paths[str(vid)] = rel
            records.append(parse_record(str(vid), rec, where, "zh", "youku"))
    else:
        records = read_caption_json(annotations, "zh", "youku")
    video_root = Path(video_root)
    out = attach_videos(limit_records(records, max_videos, seed), video_root)
    return [replace(r, path=video_root / paths[r.id]) if r.id in paths and (video_root / paths[r.id]).is_file()
            else r for r in out]
