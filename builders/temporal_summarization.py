"""Temporal Summarization builder: whole videos at 1 FPS, retrieved by an ordered event description.

Length control by duration (the default): every video is decoded once at 1 FPS and rendered at
one standard frame size (`frame_size`, sides multiples of 32, letterboxed), so a video's unified
length is n_frames·⌈H/32⌉·⌈W/32⌉ and grows with its duration alone. Each length bin is a stated
range of unified tokens around its nominal length (`bin_ranges`: edges at the geometric midpoints
between neighbouring bins); a video goes into the one bin its own length falls in, and a video
that fits no bin is counted as dropped, never stretched. `length_control="resolution"` keeps the
earlier rule: every video in every bin it can reach, with a per-bin frame size that puts its length
within ±LENGTH_TOLERANCE of the nominal length (`video.fit_frame_size`).

Its events (annotation timestamps, or detected shots) cut the frame sequence into segments
(`events.py`). For each (video, bin) there are two pools with the same query and the same number of
candidates: Easy = the video + `distractors` other videos of the same dataset and bin that tell a
different event sequence; Hard = the video + `distractors` event-level permutations of itself
(whole reversal first, then block permutations), which hold exactly the same frames and so exactly
the same length. A video is a query only where both pools can be filled. Every annotated video
that is missing, unreadable or left out is counted with its reason (`DropLog`, printed at the end
of the build and stored in the manifest); a build that loses more than MAX_MISSING_SHARE of its
annotated videos to missing or unreadable files fails unless `allow_missing=True`.
"""
from __future__ import annotations

import hashlib
import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from tqdm.auto import tqdm

from mmbench.builders.checks import temporal_summarization as checks
from mmbench.data.documents import Document, Text, Video
from mmbench.data.media import MediaStore
from mmbench.common.http_client import APIError
from mmbench.data.drops import DropLog, bin_counts_text
from mmbench.builders.parts.validity import write_valid_poolset
from mmbench.data.poolset import build_scratch, PoolItem, PoolSet, source_fingerprint
from mmbench.data.tokens import UnifiedTokenCounter, image_tokens, length_label

from mmbench.builders.parts.captions import PROMPT_VERSION, RULE_VERSION, SYSTEM_PROMPT, ChatRewriter, Rewrite, rule_rewrite, \
    story_key
from mmbench.builders.parts.events import ANTI_OVERLAP_S, SHOT_THRESHOLD, Dropped, Event, apply_order, detect_shots, \
    distractor_permutations, segment_events
from mmbench.builders.sources.activitynet import VideoRecord, read_activitynet
from mmbench.builders.sources.sample_videos import MIN_SCENE_S, make_sample_videos, spread_durations
from mmbench.builders.sources.youku import read_youku
from mmbench.builders.parts.video_bins import bin_of, bin_ranges, frame_range
from mmbench.builders.parts.video_drops import count_drops, measure_lengths
from mmbench.builders.parts.video import MAX_FRAME_PIXELS, MIN_FRAME_PIXELS, VideoReadError, colour_histogram, fit_frame_size, \
    letterbox_frame, open_video, resize_frame
from mmbench.builders.designs.temporal_summarization import LENGTHS, SOURCES, TASK_NAME, TASK_VERSION

LENGTH_TOLERANCE = 0.10     # length_control="resolution": within ±10 % of the bin's nominal length
LENGTH_CONTROLS = ("duration", "resolution")
SAMPLE_FRAME_SIZE = (512, 512)  # 256 unified tokens per frame: 8K ≈ 32 s, 16K ≈ 64 s, 32K ≈ 128 s at 1 FPS
REAL_FRAME_SIZE = (448, 256)    # 112 unified tokens per frame (≈16:9): 8K ≈ 73 s, 16K ≈ 146 s, 32K ≈ 293 s
MAX_MISSING_SHARE = 0.10    # more missing or unreadable annotated videos than this fails the build
MAX_WARNINGS = 10           # skipped videos named one by one on stderr; the rest are counted
FPS = 1.0


@dataclass(frozen=True)
class TSParams:
    lengths: tuple[int, ...] = LENGTHS
    distractors: int = 3
    videos: int = 15                    # sample source only: spread evenly over the bins
    max_videos: int | None = None       # real sources: a seeded sample of this many annotated videos
    segmentation: str = "auto"          # "auto": annotation timestamps where present, shots otherwise; "shots"
    shot_threshold: float = SHOT_THRESHOLD
    rewrite: str = "rule"               # "rule" or "llm"
    rewrite_model: str | None = None
    frame_format: str = "JPEG"
    reader: str = "auto"
    min_frame_pixels: int = MIN_FRAME_PIXELS
    max_frame_pixels: int = MAX_FRAME_PIXELS
    length_control: str = "duration"    # "duration" (one frame size, bin by own length) or "resolution"
    frame_size: tuple[int, int] = REAL_FRAME_SIZE   # duration control: the standard (width, height)
    allow_missing: bool = False

    @property
    def tokens_per_frame(self) -> int:
        return image_tokens(*self.frame_size)

    @property
    def ranges(self) -> dict[int, tuple[int, int]]:
        return bin_ranges(self.lengths)


@dataclass
class ProcessedVideo:
    """A decoded video: its frames per bin (original order) and its event segments (frame indices).

    `renders` is empty for a video whose length fits no bin (it was not decoded further)."""

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
          videos: int = 15, annotations: str | None = None, video_root: str | None = None,
          max_videos: int | None = None, segmentation: str = "auto", shot_threshold: float = SHOT_THRESHOLD,
          rewrite: str = "rule", rewrite_model: str | None = None, rewrite_base_url: str | None = None,
          rewrite_api_key_env: str = "OPENAI_API_KEY", rewrite_cache: str | None = None,
          frame_format: str = "JPEG", reader: str = "auto", min_frame_pixels: int = MIN_FRAME_PIXELS,
          max_frame_pixels: int = MAX_FRAME_PIXELS, length_control: str = "duration",
          frame_size: Sequence[int] | None = None, allow_missing: bool = False,
          tokenizer_json: str | None = None, progress: bool = True) -> PoolSet:
    """Build the task from `source` ("sample", "activitynet" or "youku") into `out`."""
    size = tuple(int(x) for x in frame_size) if frame_size is not None else \
        (SAMPLE_FRAME_SIZE if source == "sample" else REAL_FRAME_SIZE)
    params = TSParams(tuple(int(x) for x in lengths), int(distractors), int(videos),
                      None if max_videos is None else int(max_videos), segmentation, float(shot_threshold),
                      rewrite, rewrite_model, frame_format, reader, int(min_frame_pixels), int(max_frame_pixels),
                      length_control, size, _boolean(allow_missing, "allow_missing"))
    _check_params(params, source, rewrite_base_url)
    rewriter = ChatRewriter(rewrite_base_url, rewrite_model, rewrite_api_key_env, rewrite_cache) \
        if rewrite == "llm" else None
    counter = UnifiedTokenCounter.default(tokenizer_json)
    out = Path(out)
    with build_scratch(out) as scratch:
        media = MediaStore(scratch / "media")
        records, sources = _load_records(source, scratch, seed, params, annotations, video_root)
        files = DropLog("annotated videos (files)")
        where = f"{source} videos under {video_root}" if video_root else f"{source} videos"
        missing = [r for r in records if r.path is None]
        if len(missing) > MAX_MISSING_SHARE * len(records) and not params.allow_missing:
            raise ValueError(f"{where}: {len(missing)} of {len(records)} annotated videos have no video file "
                             f"(e.g. {', '.join(r.id for r in missing[:3])}), more than {MAX_MISSING_SHARE:.0%}; "
                             f"fix video_root or pass --param allow_missing=true")
        processed, failures = [], []
        for rec in tqdm(records, desc="decode videos", disable=not progress):
            try:
                if rec.path is None:
                    raise VideoReadError(f"no video file for {rec.id!r} under {video_root} "
                                         f"(tried {rec.id}.mp4/.mkv/.webm/.avi/.mov/.m4v)")
                processed.append(process_video(rec, media, params))
                files.keep()
            except VideoReadError as exc:
                files.drop("no video file" if rec.path is None else "unreadable video file", rec.id)
                failures.append({"video_id": rec.id, "file": str(rec.path) if rec.path else None, "error": str(exc)})
                if len(failures) <= MAX_WARNINGS:
                    print(f"warning: skipped video {rec.id}: {exc}", file=sys.stderr)
        if len(failures) > MAX_WARNINGS:
            print(f"warning: ... and {len(failures) - MAX_WARNINGS} more skipped videos (all counted below and "
                  f"listed in the manifest's builder.failures)", file=sys.stderr)
        files.check_share(MAX_MISSING_SHARE, params.allow_missing, where)
        ps, excluded = assemble(processed, counter, params, seed, rewriter, failures)
        drops = {"files": files, **count_drops(processed, ps, excluded, failures, params, LENGTH_TOLERANCE)}
        ps.sources = sources
        ranges = params.ranges
        ps.builder = {
            "name": "mmbench.builders.temporal_summarization", "source": source, "params": _jsonable(asdict(params)),
            "length_control": params.length_control, "fps": FPS, "anti_overlap_s": ANTI_OVERLAP_S,
            "frame_rule": "frame on screen at t_k = k/fps (last frame with pts <= t_k), times from the first frame",
            "rewrite": _rewrite_record(rewriter),
            "token_counter": getattr(counter.tokenizer, "name", "qwen3"),
            "max_missing_share": MAX_MISSING_SHARE,
            "videos": {p.record.id: p.info for p in processed},
            "failures": failures, "excluded": excluded,
        }
        if params.length_control == "duration":
            tpf = params.tokens_per_frame
            ps.builder.update({
                "frame_size": list(params.frame_size), "tokens_per_frame": tpf,
                "frame_resize": "bicubic, letterboxed (aspect kept, black bars)",
                "bins": {length_label(L): {"tokens": list(r), "frames": list(frame_range(r, tpf))}
                         for L, r in sorted(ranges.items())}})
        else:
            ps.builder["length_tolerance"] = LENGTH_TOLERANCE
        write_valid_poolset(ps, out, checks, media_from=scratch / "media", drops=drops)
    return ps


def _boolean(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ValueError(f"{name} must be true or false, got {value!r}")


def _check_params(p: TSParams, source: str, base_url: str | None) -> None:
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r} for {TASK_NAME}; use one of {SOURCES}")
    if p.distractors < 1:
        raise ValueError("distractors must be at least 1")
    if not p.lengths or min(p.lengths) < 64:
        raise ValueError(f"lengths must be a non-empty list of token counts >= 64, got {list(p.lengths)}")
    if len(set(p.lengths)) != len(p.lengths):
        raise ValueError(f"lengths must not repeat a bin, got {list(p.lengths)}")
    if p.length_control not in LENGTH_CONTROLS:
        raise ValueError(f"length_control must be one of {LENGTH_CONTROLS}, got {p.length_control!r}")
    if len(p.frame_size) != 2 or min(p.frame_size) < 32 or any(x % 32 for x in p.frame_size):
        raise ValueError(f"frame_size must be [width, height], multiples of 32, got {list(p.frame_size)}")
    if not p.min_frame_pixels <= p.frame_size[0] * p.frame_size[1] <= p.max_frame_pixels:
        raise ValueError(f"frame_size {p.frame_size[0]}x{p.frame_size[1]} is outside the frame pixel budget "
                         f"{p.min_frame_pixels}..{p.max_frame_pixels} (min_frame_pixels, max_frame_pixels)")
    if p.length_control == "duration":
        for L, r in sorted(p.ranges.items()):
            lo, hi = frame_range(r, p.tokens_per_frame)
            if lo > hi:
                raise ValueError(f"bin {length_label(L)} ({r[0]}..{r[1] - 1} tokens) holds no whole number of "
                                 f"{p.tokens_per_frame}-token frames; use a smaller frame_size")
    if p.segmentation not in ("auto", "shots"):
        raise ValueError(f"segmentation must be 'auto' or 'shots', got {p.segmentation!r}")
    if p.rewrite not in ("rule", "llm"):
        raise ValueError(f"rewrite must be 'rule' or 'llm', got {p.rewrite!r}")
    if p.rewrite == "llm" and (not base_url or not p.rewrite_model):
        raise ValueError("rewrite='llm' needs rewrite_base_url (an OpenAI-compatible API) and rewrite_model")
    if p.frame_format not in ("JPEG", "PNG"):
        raise ValueError(f"frame_format must be 'JPEG' or 'PNG', got {p.frame_format!r}")


def sample_durations(p: TSParams) -> list[int]:
    """Whole-second durations of the sample videos: spread inside each bin's frame range (duration control),
    or long enough for the longest bin within the frame pixel ceiling (resolution control)."""
    n_bins = len(p.lengths)
    counts = [p.videos // n_bins + (1 if b < p.videos % n_bins else 0) for b in range(n_bins)]
    if p.length_control == "resolution":
        lo = max(4 * MIN_SCENE_S, math.ceil(max(p.lengths) / (p.max_frame_pixels // 1024)))
        return spread_durations(lo, lo + 16, p.videos)
    out = []
    for (L, r), n in zip(sorted(p.ranges.items()), counts):
        lo, hi = frame_range(r, p.tokens_per_frame)
        if lo < 3 * MIN_SCENE_S:
            raise ValueError(f"bin {length_label(L)} holds {lo}..{hi} frames at {p.tokens_per_frame} tokens per "
                             f"frame, too short for a sample video of 3 scenes of {MIN_SCENE_S} s; use a smaller "
                             f"frame_size")
        out += spread_durations(lo, hi, n)
    return out


def _load_records(source: str, scratch: Path, seed: int, p: TSParams, annotations: str | None,
                  video_root: str | None) -> tuple[list[VideoRecord], dict[str, str]]:
    if source == "sample":
        durations = sample_durations(p)
        records = make_sample_videos(scratch / "videos", durations, seed)
        return records, {"videos": f"mmbench synthetic sample videos (n={len(durations)}, seed={seed}, "
                                   f"durations {min(durations)}-{max(durations)} s, 128x128, 4 fps, H.264)"}
    if annotations is None or video_root is None:
        raise ValueError(f"source {source!r} needs parameters annotations=<file> and video_root=<folder>")
    reader = read_activitynet if source == "activitynet" else read_youku
    records = reader(Path(annotations), Path(video_root), p.max_videos, seed)
    return records, {"annotations": source_fingerprint(Path(annotations)),
                     "video_root": f"{Path(video_root).name} ({len(records)} annotated videos used)"}


def process_video(rec: VideoRecord, media: MediaStore, p: TSParams) -> ProcessedVideo:
    """Decode at 1 FPS, store the frames once per bin at the bin's frame size, and segment into events."""
    try:
        return _process(rec, media, p, p.reader)
    except VideoReadError:
        if p.reader != "auto":
            raise
        return _process(rec, media, p, "pyav")  # decord opened it but failed to decode


def frame_sizes(n_frames: int, width: int, height: int, p: TSParams) -> dict[int, tuple[int, int] | None]:
    """The frame size of each bin for a video of `n_frames` 1-FPS frames (None where it does not go)."""
    if p.length_control == "resolution":
        return {L: fit_frame_size(n_frames, L, width, height, LENGTH_TOLERANCE, p.min_frame_pixels,
                                  p.max_frame_pixels) for L in p.lengths}
    home = bin_of(n_frames * p.tokens_per_frame, p.ranges)
    return {L: (p.frame_size if L == home else None) for L in p.lengths}


def _process(rec: VideoRecord, media: MediaStore, p: TSParams, reader: str) -> ProcessedVideo:
    sv = open_video(rec.path, FPS, reader)
    sizes = frame_sizes(sv.n_frames, sv.width, sv.height, p)
    info: dict[str, Any] = {"file": rec.path.name, "reader": sv.reader, "duration": round(sv.duration, 3),
                            "frames": sv.n_frames, "source_size": [sv.width, sv.height],
                            "frame_sizes": {length_label(L): (list(s) if s else None) for L, s in sizes.items()}}
    if p.length_control == "duration":
        info["tokens"] = sv.n_frames * p.tokens_per_frame
    if not any(sizes.values()):
        info["segmentation"] = None
        return ProcessedVideo(rec, {}, [], [], [], "none", info)
    resize = letterbox_frame if p.length_control == "duration" else resize_frame
    refs: dict[int, list[str]] = {L: [] for L, s in sizes.items() if s}
    hists = []
    for frame in sv.frames():
        hists.append(colour_histogram(frame))
        for L in refs:
            refs[L].append(media.put_image(resize(frame, sizes[L]), format=p.frame_format).ref)
    if rec.events is not None and p.segmentation == "auto":
        events, method = list(rec.events), "annotations"
    else:
        events, method = detect_shots(hists, sv.times, sv.duration, p.shot_threshold), "shots"
    kept, segments, dropped = segment_events(events, sv.duration, sv.times)
    renders = {L: Video(tuple(r), FPS, sizes[L][0], sizes[L][1]) for L, r in refs.items()}
    info.update({"segmentation": method, "events_kept": len(kept),
                 "events_dropped": [{"start": d.event.start, "end": d.event.end, "reason": d.reason}
                                    for d in dropped]})
    return ProcessedVideo(rec, renders, kept, segments, dropped, method, info)


def _rng(seed: int, *parts: Any) -> np.random.Generator:
    digest = hashlib.sha256(":".join(map(str, (seed, *parts))).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def assemble(processed: Sequence[ProcessedVideo], counter: UnifiedTokenCounter, p: TSParams, seed: int,
             rewriter: ChatRewriter | None, failures: list[dict]) -> tuple[PoolSet, list[dict]]:
    """Queries, candidates and Easy/Hard pools from decoded videos; returns the pool set and the exclusions
    (each {video_id, kind, reason[, bin]}: `kind` is the counted category, `reason` the particulars)."""
    excluded: list[dict] = []
    ranges = p.ranges
    for pv in processed:
        if not pv.renders:
            excluded.append(_outside(pv, p, ranges))
    decoded = [pv for pv in processed if pv.renders]
    queries: dict[str, Document] = {}
    perms = {}
    for pv in decoded:
        vid = pv.record.id
        stories = [story_key(e.caption) for e in pv.events] if pv.segmentation == "annotations" else None
        found = distractor_permutations(frame_keys(pv), p.distractors, _rng(seed, vid), captions=stories)
        if len(found) < p.distractors:
            excluded.append({"video_id": vid, "kind": "too few distinct event permutations",
                             "reason": f"{len(pv.segments)} event segment(s) allow only {len(found)} distinct "
                                       f"non-identity permutations (< {p.distractors})"})
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
        in_bin = [pv for pv in decoded if L in pv.renders]
        if p.length_control == "resolution":
            excluded += [{"video_id": pv.record.id, "bin": label, "kind": "cannot reach a bin's length",
                          "reason": f"{pv.info['frames']} frames cannot reach {L} tokens within "
                                    f"±{LENGTH_TOLERANCE:.0%} inside the frame pixel budget"}
                         for pv in decoded if L not in pv.renders]
        originals = {pv.record.id: _candidate(pv, L, counter, p) for pv in in_bin}
        for pv in in_bin:
            vid, dataset = pv.record.id, pv.record.dataset
            if vid not in queries:
                continue
            story = event_story(originals[vid])
            others = sorted(o.record.id for o in in_bin if o.record.id != vid and o.record.dataset == dataset
                            and event_story(originals[o.record.id]) != story)
            if len(others) < p.distractors:
                excluded.append({"video_id": vid, "bin": label, "kind": "too few other videos in its bin",
                                 "reason": f"only {len(others)} other videos of {dataset} with another event "
                                           f"sequence fit bin {label} (< {p.distractors} Easy distractors)"})
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
                          "video_id": vid, "n_events": len(pv.segments), **_length_meta(L, p, ranges)}))
    if not pools:
        log = DropLog("decoded videos")
        measure_lengths(log, processed, p, LENGTH_TOLERANCE)
        reach = f"; decoded videos per length bin: {bin_counts_text(log.bins)}"
        raise ValueError(f"no pool could be built: {len(processed)} videos decoded, {len(failures)} failed, "
                         f"{len(excluded)} exclusions (first: {(failures + excluded)[:2]}){reach}")
    used = {p.query_id for p in pools}
    ps = PoolSet(task=TASK_NAME, task_version=TASK_VERSION, queries=[q for q in queries.values() if q.id in used],
                 candidates=list(candidates.values()), pools=pools, seed=seed)
    return ps, excluded


def _outside(pv: ProcessedVideo, p: TSParams, ranges: dict[int, tuple[int, int]]) -> dict:
    """The exclusion of a video whose length fits no bin (duration control)."""
    if p.length_control == "resolution":
        return {"video_id": pv.record.id, "kind": "cannot reach any bin's length",
                "reason": f"{pv.info['frames']} frames cannot reach any of {list(p.lengths)} tokens within "
                          f"±{LENGTH_TOLERANCE:.0%} inside the frame pixel budget"}
    tokens = pv.info["frames"] * p.tokens_per_frame
    lo, hi = min(r[0] for r in ranges.values()), max(r[1] for r in ranges.values())
    kind = "shorter than the shortest bin" if tokens < lo else "longer than the longest bin"
    return {"video_id": pv.record.id, "kind": kind,
            "reason": f"{pv.info['frames']} frames x {p.tokens_per_frame} tokens = {tokens} tokens, outside "
                      f"every bin ({lo}..{hi - 1} tokens)"}


def _length_meta(L: int, p: TSParams, ranges: dict[int, tuple[int, int]]) -> dict[str, Any]:
    """What a pool item states about its bin: the control, and the range (or tolerance) its candidates meet."""
    if p.length_control == "resolution":
        return {"length_control": "resolution", "length_tolerance": LENGTH_TOLERANCE}
    return {"length_control": "duration", "length_range": list(ranges[L]), "frame_size": list(p.frame_size),
            "tokens_per_frame": p.tokens_per_frame}


def event_story(doc: Document) -> str:
    """A video's event sequence as normalised text: two videos with the same story answer the same query."""
    return story_key(" | ".join(doc.meta.get("captions", [])))


def frame_keys(pv: ProcessedVideo) -> list[list[Any]]:
    """Each segment's frames as their stored content (refs in every bin), so a permutation that
    reproduces the original frame sequence (events with identical frames) is recognised and rejected."""
    bins = sorted(pv.renders)
    return [[tuple(pv.renders[L].frames[i] for L in bins) if bins else i for i in seg] for seg in pv.segments]


def _candidate(pv: ProcessedVideo, L: int, counter: UnifiedTokenCounter, p: TSParams) -> Document:
    video = pv.renders[L]
    return Document(id=f"ts-{length_label(L)}-{pv.record.id}", segments=[video], tokens=counter.segment(video),
                    meta={"length_bin": length_label(L), "length_tokens": L, "video_id": pv.record.id,
                          "dataset": pv.record.dataset, "perturbation": "none", "length_control": p.length_control,
                          "segmentation": pv.segmentation,
                          "duration_s": pv.info["duration"], "frames": len(video.frames),
                          "captions": [c for c in pv.captions if c.strip()],
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
