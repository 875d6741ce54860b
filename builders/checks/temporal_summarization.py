"""Invariants of the temporal_summarization pool sets, checked on the built records (see mmbench.builders.parts.validity).

Everything is read from the records themselves: the frame refs of each candidate's one `Video`
segment, the candidate meta (`video_id`, `perturbation`, `event_order`, `event_frames`, `duration_s`,
`captions`) and the pool meta (`length_control`, `length_range` or `length_tolerance`).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Iterable

from mmbench.builders.parts.captions import story_key
from mmbench.builders.parts.validity import Violation
from mmbench.data.documents import Document, Video
from mmbench.data.poolset import PoolSet

# metadata that records how a document was built, read by these checks: stored in provenance.parquet, apart from the
# tables an evaluator reads (several name the label, e.g. a candidate's record or needle equal to its query's)
PROVENANCE_COLUMNS = ("video_id", "captions", "perturbation", "event_order", "blocks")

INVARIANTS: dict[str, str] = {
    "one_answer": "each pool labels exactly one candidate, the unperturbed video of its query, and no other "
                  "candidate shows that video's frames in their original order",
    "hard_permutation": "every Hard distractor is the target's own frames with its events in another order "
                        "(same frames, same count, same length, a frame sequence of its own) that tells another "
                        "caption sequence",
    "easy_other_video": "every Easy distractor is another, unperturbed video that tells another event sequence "
                        "(so it does not answer the query)",
    "bin_length": "duration control: every candidate of a bin has the bin's one frame size, a frame count equal "
                  "to its duration at 1 FPS, and a unified length inside the bin's stated range; resolution "
                  "control: a length within the stated tolerance of the bin's nominal length",
    "one_bin_per_video": "duration control: no video appears in two length bins",
    "constant_cq": "every pool has the same number of candidates",
}


def _video(doc: Document) -> Video | None:
    segs = [s for s in doc.segments if isinstance(s, Video)]
    return segs[0] if len(segs) == 1 and len(doc.segments) == 1 else None


def _story(doc: Document) -> str:
    return story_key(" | ".join(doc.meta.get("captions", [])))


def expected_frames(duration: float, fps: float = 1.0) -> int:
    """1-FPS sample count of a video of `duration` s (as `video.sample_times` counts them)."""
    from mmbench.builders.parts.video import sample_times

    return len(sample_times(duration, fps))


def check(ps: PoolSet, checked: dict[str, int]) -> Iterable[Violation]:
    cands = ps.candidate_by_id()
    yield from _check_pools(ps, cands, checked)
    yield from _check_bins(ps, cands, checked)
    sizes = Counter(len(p.candidate_ids) for p in ps.pools)
    checked["constant_cq"] = len(ps.pools)
    if len(sizes) > 1:
        common = sizes.most_common(1)[0][0]
        for p in ps.pools:
            if len(p.candidate_ids) != common:
                yield Violation("constant_cq", p.id, f"{len(p.candidate_ids)} candidates, the others have {common}")


def _check_pools(ps: PoolSet, cands: dict[str, Document], checked: dict[str, int]) -> Iterable[Violation]:
    for item in ps.pools:
        checked["one_answer"] = checked.get("one_answer", 0) + 1
        if len(item.relevant_ids) != 1 or item.relevant_ids[0] not in item.candidate_ids:
            yield Violation("one_answer", item.id, f"relevant ids {item.relevant_ids} are not one of its candidates")
            continue
        target = cands[item.relevant_ids[0]]
        tv = _video(target)
        if tv is None or target.meta.get("perturbation") != "none" \
                or target.meta.get("video_id") != item.meta.get("video_id"):
            yield Violation("one_answer", item.id, f"labelled candidate {target.id} is not the unperturbed video "
                                                   f"{item.meta.get('video_id')}")
            continue
        seen = {tv.frames: target.id}
        for cid in item.candidate_ids:
            if cid == target.id:
                continue
            doc = cands[cid]
            v = _video(doc)
            if v is None:
                yield Violation("one_answer", item.id, f"candidate {cid} is not a single video")
                continue
            if v.frames in seen:
                yield Violation("one_answer", item.id, f"candidate {cid} shows the same frame sequence as "
                                                       f"{seen[v.frames]}")
            seen.setdefault(v.frames, cid)
            if item.meta.get("difficulty") == "hard":
                checked["hard_permutation"] = checked.get("hard_permutation", 0) + 1
                yield from _check_hard(item.id, target, tv, doc, v)
            else:
                checked["easy_other_video"] = checked.get("easy_other_video", 0) + 1
                if doc.meta.get("video_id") == target.meta.get("video_id") or doc.meta.get("perturbation") != "none":
                    yield Violation("easy_other_video", item.id, f"{cid} is not another unperturbed video")
                elif _story(doc) == _story(target):
                    yield Violation("easy_other_video", item.id, f"{cid} tells the same event sequence as the target "
                                                                 f"(it answers the query too)")


def _check_hard(item_id: str, target: Document, tv: Video, doc: Document, v: Video) -> Iterable[Violation]:
    if doc.meta.get("video_id") != target.meta.get("video_id") or doc.meta.get("perturbation") not in \
            ("reversal", "block"):
        yield Violation("hard_permutation", item_id, f"{doc.id} is not a permutation of the target video")
        return
    if sorted(v.frames) != sorted(tv.frames) or doc.tokens != target.tokens or (v.width, v.height) != \
            (tv.width, tv.height):
        yield Violation("hard_permutation", item_id, f"{doc.id} does not hold exactly the target's frames "
                                                     f"({len(v.frames)} vs {len(tv.frames)} frames, {doc.tokens} vs "
                                                     f"{target.tokens} tokens)")
        return
    lengths, order = target.meta.get("event_frames", []), doc.meta.get("event_order", [])
    segments, pos = [], 0
    for n in lengths:
        segments.append(tv.frames[pos:pos + n])
        pos += n
    if pos != len(tv.frames) or sorted(order) != list(range(len(lengths))) or \
            tuple(f for i in order for f in segments[i]) != v.frames:
        yield Violation("hard_permutation", item_id, f"{doc.id} is not the target's events in the order {order}")
        return
    captions = [story_key(c) for c in target.meta.get("captions", [])]
    if target.meta.get("segmentation") == "annotations" and len(captions) == len(lengths) and \
            [captions[i] for i in order] == captions:
        yield Violation("hard_permutation", item_id, f"{doc.id} reorders events that tell the same caption sequence "
                                                     f"(it answers the query too)")


def _check_bins(ps: PoolSet, cands: dict[str, Document], checked: dict[str, int]) -> Iterable[Violation]:
    bins: dict[str, set[str]] = defaultdict(set)          # length bin -> candidate ids
    meta: dict[str, dict] = {}
    for item in ps.pools:
        label = item.meta.get("length_bin")
        bins[label].update(item.candidate_ids)
        meta.setdefault(label, item.meta)
    video_bins: dict[str, set[str]] = defaultdict(set)
    for label, ids in sorted(bins.items()):
        m = meta[label]
        control = m.get("length_control", "resolution")
        sizes: dict[tuple[int, int], str] = {}
        for cid in sorted(ids):
            checked["bin_length"] = checked.get("bin_length", 0) + 1
            doc = cands[cid]
            v = _video(doc)
            if v is None:
                continue  # reported by one_answer
            video_bins[doc.meta.get("video_id")].add(label)
            if control == "resolution":
                L, tol = m["length_tokens"], m.get("length_tolerance", 0.10)
                if abs(doc.tokens - L) > tol * L:
                    yield Violation("bin_length", cid, f"{doc.tokens} tokens, not within ±{tol:.0%} of {L}")
                continue
            lo, hi = m["length_range"]
            sizes.setdefault((v.width, v.height), cid)
            if [v.width, v.height] != list(m["frame_size"]):
                yield Violation("bin_length", cid, f"frame size {v.width}x{v.height}, bin {label} uses "
                                                   f"{m['frame_size'][0]}x{m['frame_size'][1]}")
            want = expected_frames(float(doc.meta.get("duration_s", -1)))
            if len(v.frames) != want:
                yield Violation("bin_length", cid, f"{len(v.frames)} frames for a {doc.meta.get('duration_s')} s "
                                                   f"video (1 FPS: {want})")
            if not lo <= doc.tokens < hi:
                yield Violation("bin_length", cid, f"{doc.tokens} tokens, outside bin {label}'s range {lo}..{hi - 1}")
        if len(sizes) > 1:
            yield Violation("bin_length", label, f"bin {label} mixes frame sizes {sorted(sizes)}")
    if any(m.get("length_control") == "duration" for m in meta.values()):
        for vid, labels in sorted(video_bins.items()):
            checked["one_bin_per_video"] = checked.get("one_bin_per_video", 0) + 1
            if len(labels) > 1:
                yield Violation("one_bin_per_video", vid, f"video appears in bins {sorted(labels)}")
