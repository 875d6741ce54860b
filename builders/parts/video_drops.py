"""Temporal Summarization's drop counts: readable videos -> videos in a bin -> videos that are a query.

Each step is a `DropLog` with a count per reason; the bin step also counts, per requested length bin, the
decoded videos long enough for it and those that are not (under resolution control: too short, too long, or
with no frame size that fits).
"""
from __future__ import annotations

from typing import Any, Sequence

from mmbench.builders.parts.video_bins import measure_bins
from mmbench.data.drops import DropLog
from mmbench.data.poolset import PoolSet
from mmbench.data.tokens import length_label


def count_drops(processed: Sequence[Any], ps: PoolSet, excluded: list[dict],
                failures: list[dict], p: Any, length_tolerance: float) -> dict[str, DropLog]:
    """Readable videos -> videos in a bin -> videos that are a query, each step with a count per reason; also,
    per requested bin, the decoded videos long enough for it or not (under resolution control: reaching it
    within ±`length_tolerance` inside the frame pixel budget, or too short, too long, or with no frame size
    that fits), its queries, and whether it was built (a bin no video fills is left out and named, not built
    thin)."""
    used_videos = {c.meta["video_id"] for c in ps.candidates}
    queries = {q.meta["video_id"] for q in ps.queries}
    binned, asked = DropLog("decoded videos (length bins)"), DropLog("videos in a bin (queries)")
    measure_lengths(binned, processed, p, length_tolerance)
    for L in p.lengths:
        n = len({item.meta["video_id"] for item in ps.pools if item.meta["length_tokens"] == L})
        binned.note_bin(length_label(L), queries=n, built=n > 0)
    for pv in processed:
        vid = pv.record.id
        if not pv.renders:
            binned.drop(drop_kind(vid, excluded, failures), vid)
            continue
        binned.keep()
        if vid in queries:
            asked.keep()
        else:
            kind = drop_kind(vid, [e for e in excluded if e["kind"] != "cannot reach a bin's length"], failures)
            asked.drop(kind + (" (still an Easy distractor)" if vid in used_videos else ""), vid)
    return {"bins": binned, "queries": asked}


def measure_lengths(log: DropLog, processed: Sequence[Any], p: Any, tolerance: float) -> None:
    """Each decoded video against every requested bin, by the build's length control: its duration
    (`measure_bins`) or whether some frame size brings it within ±`tolerance` (`measure_reach`)."""
    if p.length_control == "duration":
        measure_bins(log, (pv.info["tokens"] for pv in processed), p.ranges)
    else:
        measure_reach(log, processed, p, tolerance)


def measure_reach(log: DropLog, processed: Sequence[Any], p: Any, tolerance: float) -> None:
    """Resolution control: per requested bin, the decoded videos that reach it inside the frame pixel budget
    (long enough), those too short even at the largest frame, too long even at the smallest, and those whose
    frame count no allowed frame size brings within the tolerance."""
    most, least = p.max_frame_pixels // 1024, -(-p.min_frame_pixels // 1024)   # 32x32-pixel cells per frame
    for L in p.lengths:
        label = length_label(L)
        log.note_bin(label)          # a bin is listed even when no video was decoded
        for pv in processed:
            frames = pv.info["frames"]
            if L in pv.renders:
                log.measure(label, True)
            elif frames * most < L * (1 - tolerance):
                log.measure(label, False)
            elif frames * least > L * (1 + tolerance):
                log.measure(label, False, "too_long")
            else:
                log.measure(label, False, "no_frame_size")


def drop_kind(vid: str, excluded: list[dict], failures: list[dict]) -> str:
    """Why a video is in no bin or is no query: its first exclusion's kind (or its rewrite failure)."""
    for e in excluded:
        if e["video_id"] == vid:
            return e["kind"]
    if any(f["video_id"] == vid for f in failures):
        return "query rewrite failed"
    return "not drawn into any pool"
