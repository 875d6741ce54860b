"""Temporal Summarization builder: whole videos at 1 FPS, retrieved by an ordered event description.

Each video is decoded once at 1 FPS; for every length bin L it is rendered at the frame size
that puts its unified length n·⌈H/32⌉·⌈W/32⌉ within ±LENGTH_TOLERANCE of L (`video.fit_frame_size`),
so a video appears in every bin its frame count allows. Its events (annotation timestamps, or
detected shots) cut the frame sequence into segments (`events.py`).

For each (video, bin) there are two pools with the same query and the same number of candidates:
Easy = the video + `distractors` other videos of the same dataset and bin; Hard = the video +
`distractors` event-level permutations of itself (whole reversal first, then block permutations),
which hold exactly the same frames and so exactly the same length. A video is a query only where
both pools can be filled; everything left out, and every unreadable video, is recorded in the
manifest's builder record.
"""
from __future__ import annotations

import hashlib
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from tqdm.auto import tqdm

from mmbench.documents import Document, Text, Video
from mmbench.media import MediaStore
from mmbench.models.http_client import APIError
from mmbench.builders.validity import write_valid_poolset
from mmbench.poolset import build_scratch, PoolItem, PoolSet, source_fingerprint
from mmbench.tokens import UnifiedTokenCounter

from .captions import PROMPT_VERSION, RULE_VERSION, SYSTEM_PROMPT, ChatRewriter, Rewrite, rule_rewrite
from .events import ANTI_OVERLAP_S, SHOT_THRESHOLD, Dropped, Event, apply_order, detect_shots, \
    distractor_permutations, segment_events
from .sources.activitynet import VideoRecord, read_activitynet
from .sources.sample_videos import make_sample_videos
from .sources.youku import read_youku
from .video import MAX_FRAME_PIXELS, MIN_FRAME_PIXELS, VideoReadError, colour_histogram, fit_frame_size, \
    open_video, resize_frame

TASK_NAME = "temporal_summarization"
TASK_VERSION = "1.0"
LENGTHS = (8192, 16384, 32768)
LENGTH_TOLERANCE = 0.10     # a candidate's unified length lies within ±10 % of its bin's nominal length
FPS = 1.0
SOURCES = ("sample", "activitynet", "youku")
DIFFICULTIES = ("easy", "hard")


def length_label(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 else str(n)


@dataclass(frozen=True)
class TSParams:
    lengths: tuple[int, ...] = LENGTHS
    distractors: int = 3
    videos: int = 10                    # sample source only
    max_videos: int | None = None       # real sources: a seeded sample of this many annotated videos
    segmentation: str = "auto"          # "auto": annotation timestamps where present, shots otherwise; "shots"
    shot_threshold: float = SHOT_THRESHOLD
    rewrite: str = "rule"               # "rule" or "llm"
    rewrite_model: str | None = None
    frame_format: str = "JPEG"
    reader: str = "auto"
    min_frame_pixels: int = MIN_FRAME_PIXELS
    max_frame_pixels: int = MAX_FRAME_PIXELS


@dataclass
class ProcessedVideo:
    """A decoded video: its frames per bin (original order) and its event segments (frame indices)."""

    record: VideoRecord
    renders: dict[int, Video]
    events: list[Event]
    segments: list[list[int]]
    dropped: list[Dropped]
    segmentation: str
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def captions(self) -> list[str]:
        """Captions of the kept events in time order; all captions when events came from shots."""
        if self.segmentation == "shots":
            return list(self.record.captions)
        return [e.caption for e in self.events]


def build(source: str, out: Path, seed: int = 0, lengths: Sequence[int] = LENGTHS, distractors: int = 3,
          videos: int = 10, annotations: str | None = None, video_root: str | None = None,
          max_videos: int | None = None, segmentation: str = "auto", shot_threshold: float = SHOT_THRESHOLD,
          rewrite: str = "rule", rewrite_model: str | None = None, rewrite_base_url: str | None = None,
          rewrite_api_key_env: str = "OPENAI_API_KEY", rewrite_cache: str | None = None,
          frame_format: str = "JPEG", reader: str = "auto", min_frame_pixels: int = MIN_FRAME_PIXELS,
          max_frame_pixels: int = MAX_FRAME_PIXELS, tokenizer_json: str | None = None,
          progress: bool = True) -> PoolSet:
    """Build the task from `source` ("sample", "activitynet" or "youku") into `out`."""
    params = TSParams(tuple(int(x) for x in lengths), int(distractors), int(videos),
                      None if max_videos is None else int(max_videos), segmentation, float(shot_threshold),
                      rewrite, rewrite_model, frame_format, reader, int(min_frame_pixels), int(max_frame_pixels))
    _check_params(params, source, rewrite_base_url)
    rewriter = ChatRewriter(rewrite_base_url, rewrite_model, rewrite_api_key_env, rewrite_cache) \
        if rewrite == "llm" else None
    counter = UnifiedTokenCounter.default(tokenizer_json)
    out = Path(out)
    with build_scratch(out) as scratch:
        media = MediaStore(scratch / "media")
        records, sources = _load_records(source, scratch, seed, params, annotations, video_root)
        processed, failures = [], []
        for rec in tqdm(records, desc="decode videos", disable=not progress):
            try:
                if rec.path is None:
                    raise VideoReadError(f"no video file for {rec.id!r} under {video_root} "
                                         f"(tried {rec.id}.mp4/.mkv/.webm/.avi/.mov/.m4v)")
                processed.append(process_video(rec, media, params))
            except VideoReadError as exc:
                failures.append({"video_id": rec.id, "file": str(rec.path) if rec.path else None, "error": str(exc)})
                print(f"warning: skipped video {rec.id}: {exc}", file=sys.stderr)
        ps, excluded = assemble(processed, counter, params, seed, rewriter, failures)
        ps.sources = sources
        ps.builder = {
            "name": "mmbench.builders.temporal_summarization", "source": source, "params": _jsonable(asdict(params)),
            "length_tolerance": LENGTH_TOLERANCE, "fps": FPS, "anti_overlap_s": ANTI_OVERLAP_S,
            "frame_rule": "frame on screen at t_k = k/fps (last frame with pts <= t_k), times from the first frame",
            "rewrite": _rewrite_record(rewriter),
            "token_counter": getattr(counter.tokenizer, "name", "qwen3"),
            "videos": {p.record.id: p.info for p in processed},
            "failures": failures, "excluded": excluded,
        }
        write_valid_poolset(ps, out, media_from=scratch / "media")
    return ps


def _check_params(p: TSParams, source: str, base_url: str | None) -> None:
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r} for {TASK_NAME}; use one of {SOURCES}")
    if p.distractors < 1:
        raise ValueError("distractors must be at least 1")
    if not p.lengths or min(p.lengths) < 64:
        raise ValueError(f"lengths must be a non-empty list of token counts >= 64, got {list(p.lengths)}")
    if p.segmentation not in ("auto", "shots"):
        raise ValueError(f"segmentation must be 'auto' or 'shots', got {p.segmentation!r}")
    if p.rewrite not in ("rule", "llm"):
        raise ValueError(f"rewrite must be 'rule' or 'llm', got {p.rewrite!r}")
    if p.rewrite == "llm" and (not base_url or not p.rewrite_model):
        raise ValueError("rewrite='llm' needs rewrite_base_url (an OpenAI-compatible API) and rewrite_model")
    if p.frame_format not in ("JPEG", "PNG"):
        raise ValueError(f"frame_format must be 'JPEG' or 'PNG', got {p.frame_format!r}")


def _load_records(source: str, scratch: Path, seed: int, p: TSParams, annotations: str | None,
                  video_root: str | None) -> tuple[list[VideoRecord], dict[str, str]]:
    if source == "sample":
        records = make_sample_videos(scratch / "videos", p.videos, seed)
        return records, {"videos": f"mmbench synthetic sample videos (n={p.videos}, seed={seed}, 128x128, 4 fps, H.264)"}
    if annotations is None or video_root is None:
        raise ValueError(f"source {source!r} needs parameters annotations=<file> and video_root=<folder>")
    reader = read_activitynet if source == "activitynet" else read_youku
    records = reader(Path(annotations), Path(video_root), p.max_videos, seed)
    return records, {"annotations": source_fingerprint(Path(annotations)),
                     "video_root": f"{Path(video_root).name} ({len(records)} annotated videos used)"}


def process_video(rec: VideoRecord, media: MediaStore, p: TSParams) -> ProcessedVideo:
    """Decode at 1 FPS, store the frames once per bin at the bin's frame size, and segment into events."""
    try:
        sv, sizes, refs, hists = _decode(rec.path, media, p, p.reader)
    except VideoReadError:
        if p.reader != "auto":
            raise
        sv, sizes, refs, hists = _decode(rec.path, media, p, "pyav")  # decord opened it but failed to decode
    if rec.events is not None and p.segmentation == "auto":
        events, method = list(rec.events), "annotations"
    else:
        events, method = detect_shots(hists, sv.times, sv.duration, p.shot_threshold), "shots"
    kept, segments, dropped = segment_events(events, sv.duration, sv.times)
    renders = {L: Video(tuple(r), FPS, sizes[L][0], sizes[L][1]) for L, r in refs.items()}
    info = {"file": rec.path.name, "reader": sv.reader, "duration": round(sv.duration, 3), "frames": sv.n_frames,
            "source_size": [sv.width, sv.height], "segmentation": method, "events_kept": len(kept),
            "events_dropped": [{"start": d.event.start, "end": d.event.end, "reason": d.reason} for d in dropped],
            "frame_sizes": {length_label(L): (list(s) if s else None) for L, s in sizes.items()}}
    return ProcessedVideo(rec, renders, kept, segments, dropped, method, info)


def _decode(path: Path, media: MediaStore, p: TSParams, reader: str):
    """One decoding pass: per-bin frame sizes, stored frame refs per bin, and 1-FPS colour histograms."""
    sv = open_video(path, FPS, reader)
    sizes = {L: fit_frame_size(sv.n_frames, L, sv.width, sv.height, LENGTH_TOLERANCE, p.min_frame_pixels,
                               p.max_frame_pixels) for L in p.lengths}
    refs: dict[int, list[str]] = {L: [] for L, s in sizes.items() if s}
    hists = []
    for frame in sv.frames():
        hists.append(colour_histogram(frame))
        for L in refs:
            refs[L].append(media.put_image(resize_frame(frame, sizes[L]), format=p.frame_format).ref)
    return sv, sizes, refs, hists


def _rng(seed: int, *parts: Any) -> np.random.Generator:
    digest = hashlib.sha256(":".join(map(str, (seed, *parts))).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def assemble(processed: Sequence[ProcessedVideo], counter: UnifiedTokenCounter, p: TSParams, seed: int,
             rewriter: ChatRewriter | None, failures: list[dict]) -> tuple[PoolSet, list[dict]]:
    """Queries, candidates and Easy/Hard pools from decoded videos; returns the pool set and the exclusions."""
    excluded: list[dict] = []
    queries: dict[str, Document] = {}
    perms = {}
    for pv in processed:
        vid = pv.record.id
        found = distractor_permutations(frame_keys(pv), p.distractors, _rng(seed, vid))
        if len(found) < p.distractors:
            excluded.append({"video_id": vid, "reason": f"{len(pv.segments)} event segment(s) allow only "
                             f"{len(found)} distinct non-identity permutations (< {p.distractors})"})
            continue
        captions = [c for c in pv.captions if c.strip()]
        try:
            rw = rewriter.rewrite(captions, item=vid) if rewriter else \
                Rewrite(rule_rewrite(captions, pv.record.lang), "rule", RULE_VERSION)
        except (APIError, ValueError) as exc:
            failures.append({"video_id": vid, "file": None, "error": f"query rewrite failed: {exc}"})
            continue
        perms[vid] = found
        queries[vid] = Document(id=f"q-{vid}", segments=[Text(rw.text)], tokens=counter.text(rw.text),
                                meta={"video_id": vid, "dataset": pv.record.dataset, "lang": pv.record.lang,
                                      "captions": captions, "rewrite": rw.record(), "segmentation": pv.segmentation})
    candidates: dict[str, Document] = {}
    pools: list[PoolItem] = []
    for L in p.lengths:
        label = length_label(L)
        in_bin = [pv for pv in processed if L in pv.renders]
        excluded += [{"video_id": pv.record.id, "bin": label, "reason": f"{pv.info['frames']} frames cannot reach "
                      f"{L} tokens within ±{LENGTH_TOLERANCE:.0%} inside the frame pixel budget"}
                     for pv in processed if L not in pv.renders]
        originals = {pv.record.id: _candidate(pv, L, counter) for pv in in_bin}
        for pv in in_bin:
            vid, dataset = pv.record.id, pv.record.dataset
            if vid not in queries:
                continue
            others = sorted(o.record.id for o in in_bin if o.record.id != vid and o.record.dataset == dataset)
            if len(others) < p.distractors:
                excluded.append({"video_id": vid, "bin": label, "reason": f"only {len(others)} other videos fit "
                                 f"this bin (< {p.distractors} Easy distractors)"})
                continue
            target = originals[vid]
            candidates[target.id] = target
            easy = sorted(_rng(seed, "easy", vid, L).choice(others, size=p.distractors, replace=False).tolist())
            for o in easy:
                candidates[originals[o].id] = originals[o]
            hard = [_permuted(pv, L, target, perm, j, counter) for j, perm in enumerate(perms[vid])]
            for doc in hard:
                candidates[doc.id] = doc
            groups = {"easy": [target.id] + [originals[o].id for o in easy], "hard": [target.id] + [d.id for d in hard]}
            for diff, ids in groups.items():
                order = _rng(seed, "order", diff, vid, L).permutation(len(ids)).tolist()
                pools.append(PoolItem(
                    id=f"{dataset}/{diff}/{label}/{vid}", query_id=f"q-{vid}", subset=f"{dataset}/{diff}/{label}",
                    candidate_ids=[ids[i] for i in order], relevant_ids=[target.id],
                    meta={"length_bin": label, "length_tokens": L, "difficulty": diff, "dataset": dataset,
                          "video_id": vid, "n_events": len(pv.segments)}))
    if not pools:
        raise ValueError(f"no pool could be built: {len(processed)} videos decoded, {len(failures)} failed, "
                         f"{len(excluded)} exclusions (first: {(failures + excluded)[:2]})")
    used = {p.query_id for p in pools}
    ps = PoolSet(task=TASK_NAME, task_version=TASK_VERSION, queries=[q for q in queries.values() if q.id in used],
                 candidates=list(candidates.values()), pools=pools, seed=seed)
    return ps, excluded


def frame_keys(pv: ProcessedVideo) -> list[list[Any]]:
    """Each segment's frames as their stored content (refs in every bin), so a permutation that
    reproduces the original frame sequence (events with identical frames) is recognised and rejected."""
    bins = sorted(pv.renders)
    return [[tuple(pv.renders[L].frames[i] for L in bins) if bins else i for i in seg] for seg in pv.segments]


def _candidate(pv: ProcessedVideo, L: int, counter: UnifiedTokenCounter) -> Document:
    video = pv.renders[L]
    return Document(id=f"ts-{length_label(L)}-{pv.record.id}", segments=[video], tokens=counter.segment(video),
                    meta={"length_bin": length_label(L), "length_tokens": L, "video_id": pv.record.id,
                          "dataset": pv.record.dataset, "perturbation": "none",
                          "event_order": list(range(len(pv.segments))),
                          "event_frames": [len(seg) for seg in pv.segments]})


def _permuted(pv: ProcessedVideo, L: int, target: Document, perm, j: int, counter: UnifiedTokenCounter) -> Document:
    video = pv.renders[L]
    blocks = [[video.frames[i] for i in seg] for seg in pv.segments]
    permuted = Video(tuple(apply_order(blocks, perm.order)), video.fps, video.width, video.height)
    return Document(id=f"{target.id}-p{j}", segments=[permuted], tokens=counter.segment(permuted),
                    meta={**target.meta, "perturbation": perm.kind, "event_order": list(perm.order),
                          "blocks": list(perm.blocks)})


def _rewrite_record(rewriter: ChatRewriter | None) -> dict[str, Any]:
    if rewriter is None:
        return {"method": "rule", "version": RULE_VERSION}
    return {"method": "llm", "version": PROMPT_VERSION, "model": rewriter.model, "system_prompt": SYSTEM_PROMPT,
            "cache": str(rewriter.cache_path) if rewriter.cache_path else None}


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}
