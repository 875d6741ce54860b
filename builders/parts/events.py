"""Event segmentation of 1-FPS frame sequences and event-level temporal permutations.

Events come from annotation timestamps, or from a shot-boundary detector where a video has
none. The 0.5 s anti-overlap filter makes events clean units; every sampled frame is then
assigned to exactly one event segment, so a permutation of segments keeps all frames (the
same length) and keeps each event's frames together and in their own order.

Anti-overlap filter (precise): overlap(a, b) = max(0, min(a.end, b.end) − max(a.start, b.start)).
Events are visited in order of (end, start, annotation index) — earliest end first, the
interval-scheduling order that keeps as many events as possible, so one long "whole video"
caption cannot evict all the short ones; an event is kept when its overlap with every event kept
so far is ≤ 0.5 s, otherwise it is dropped. Kept events therefore overlap pairwise by at most
0.5 s. They are then put in order of (start, end).

Frame assignment: between consecutive kept events a, b the cut is the midpoint of a.end and
b.start (inside the overlap if they overlap, inside the gap if not), made non-decreasing. A 1-FPS
frame sampled at t_k stands for the second [t_k, t_k + 1/fps) until the next sample, so it belongs
to the event that holds most of that interval: to a when t_k + 0.5/fps ≤ cut, else to b (the cut
is in effect rounded to the nearest sample time). Taking "t_k < cut" instead put the first frame of
a new scene into the previous event whenever the annotated boundary lay just after the sample
time. Frames before the first cut belong to the first event and after the last to the last. An
event left with no 1-FPS frame is dropped and the cuts recomputed.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mmbench.builders.sources.records import Event

ANTI_OVERLAP_S = 0.5
SHOT_THRESHOLD = 0.5     # total-variation distance between consecutive 1-FPS colour histograms
MIN_SHOT_S = 2.0         # a detected shot lasts at least this long
ADAPTIVE_MIN = 0.2       # a smaller change is never a cut
ADAPTIVE_RATIO = 3.0     # ... a change this many times the mean change around it is one
ADAPTIVE_WINDOW = 2      # steps on either side that make "around"


@dataclass(frozen=True)
class Dropped:
    event: Event
    reason: str


def overlap(a: Event, b: Event) -> float:
    return max(0.0, min(a.end, b.end) - max(a.start, b.start))


def clip_events(events: Sequence[Event], duration: float) -> tuple[list[Event], list[Dropped]]:
    """Clip events to [0, duration]; drop those left empty (end ≤ start)."""
    kept, dropped = [], []
    for e in events:
        c = Event(max(0.0, e.start), min(duration, e.end), e.caption)
        if e.end < e.start:
            dropped.append(Dropped(e, f"malformed timestamps: ends ({e.end:g} s) before it starts ({e.start:g} s)"))
        elif c.end <= c.start:
            dropped.append(Dropped(e, f"empty within [0, {duration:g}] s"))
        else:
            kept.append(c)
    return kept, dropped


def anti_overlap(events: Sequence[Event], max_overlap: float = ANTI_OVERLAP_S) -> tuple[list[Event], list[Dropped]]:
    """Greedy filter, earliest end first: keep an event if it overlaps no kept one by more than `max_overlap` s."""
    order = sorted(range(len(events)), key=lambda i: (events[i].end, events[i].start, i))
    kept: list[Event] = []
    dropped: list[Dropped] = []
    for i in order:
        e = events[i]
        worst = max((overlap(e, k) for k in kept), default=0.0)
        if worst > max_overlap + 1e-9:
            dropped.append(Dropped(e, f"overlaps a kept event by {worst:.2f} s > {max_overlap:g} s"))
        else:
            kept.append(e)
    return sorted(kept, key=lambda e: (e.start, e.end)), dropped


def assign_frames(events: Sequence[Event], times: Sequence[float]) -> tuple[list[Event], list[list[int]], list[Dropped]]:
    """Split frame indices 0..len(times)-1 into one contiguous segment per event (see module docstring)."""
    events = list(events)
    dropped: list[Dropped] = []
    t = np.asarray(times, dtype=np.float64)
    step = float(np.median(np.diff(t))) if len(t) > 1 else 1.0
    centres = t + step / 2          # the middle of the interval each sampled frame stands for
    while events:
        cuts = [(a.end + b.start) / 2 for a, b in zip(events, events[1:])]
        cuts = list(np.maximum.accumulate(cuts)) if cuts else []
        bounds = [0] + [int(np.searchsorted(centres, c, side="right")) for c in cuts] + [len(t)]
        segments = [list(range(lo, hi)) for lo, hi in zip(bounds, bounds[1:])]
        empty = [i for i, s in enumerate(segments) if not s]
        if not empty:
            return events, segments, dropped
        dropped.append(Dropped(events[empty[0]], "no 1-FPS frame of its own"))
        del events[empty[0]]
    return [], [], dropped


def segment_events(events: Sequence[Event], duration: float, times: Sequence[float],
                   max_overlap: float = ANTI_OVERLAP_S) -> tuple[list[Event], list[list[int]], list[Dropped]]:
    """Clip, anti-overlap filter and frame assignment in one call: (kept events, frame segments, dropped)."""
    clipped, d1 = clip_events(events, duration)
    kept, d2 = anti_overlap(clipped, max_overlap)
    kept, segments, d3 = assign_frames(kept, times)
    return kept, segments, d1 + d2 + d3


def detect_shots(histograms: Sequence[np.ndarray], times: Sequence[float], duration: float,
                 threshold: float = SHOT_THRESHOLD, min_shot_s: float = MIN_SHOT_S) -> list[Event]:
    """Shot boundaries where consecutive 1-FPS colour histograms differ by more than `threshold` (total variation),
    or by at least ADAPTIVE_MIN and ADAPTIVE_RATIO times the mean change of the ADAPTIVE_WINDOW steps on either
    side: a cut between two scenes on similar backgrounds (white stripes, then a small square on white) changes
    less than `threshold` but far more than anything within either scene.

    A boundary closer than `min_shot_s` to the previous one (or to the end) is ignored, so a flash
    or a gradual change does not split a shot into fragments.
    """
    diffs = [0.5 * float(np.abs(histograms[k] - histograms[k - 1]).sum()) for k in range(1, len(histograms))]
    starts = [0.0]
    for k in range(1, len(histograms)):
        d = diffs[k - 1]
        around = diffs[max(0, k - 1 - ADAPTIVE_WINDOW):k - 1] + diffs[k:k + ADAPTIVE_WINDOW]
        calm = float(np.mean(around)) if around else 0.0
        cut = d > threshold or (d >= ADAPTIVE_MIN and d >= ADAPTIVE_RATIO * calm)
        if cut and times[k] - starts[-1] >= min_shot_s and duration - times[k] >= min_shot_s:
            starts.append(float(times[k]))
    ends = starts[1:] + [duration]
    return [Event(s, e) for s, e in zip(starts, ends)]


# --- permutations ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Permutation:
    """A new order of event indices; `kind` is "reversal" or "block" (with its block sizes)."""

    kind: str
    order: tuple[int, ...]
    blocks: tuple[int, ...] = ()


def reversal(n: int) -> Permutation:
    return Permutation("reversal", tuple(range(n - 1, -1, -1)), tuple([1] * n))


def block_permutation(n: int, rng: np.random.Generator) -> Permutation:
    """Cut the event sequence into 2..n contiguous blocks and put the blocks in a new (non-identity) order."""
    if n < 2:
        raise ValueError("a block permutation needs at least 2 events")
    m = int(rng.integers(2, n + 1))
    cuts = sorted(rng.choice(np.arange(1, n), size=m - 1, replace=False).tolist())
    bounds = [0, *cuts, n]
    blocks = [tuple(range(lo, hi)) for lo, hi in zip(bounds, bounds[1:])]
    while True:
        perm = rng.permutation(m).tolist()
        if perm != list(range(m)):
            break
    return Permutation("block", tuple(i for b in perm for i in blocks[b]), tuple(len(blocks[b]) for b in perm))


def apply_order(segments: Sequence[Sequence[str]], order: Sequence[int]) -> list[str]:
    """Concatenate the event segments in `order`; each event's frames stay together and in order."""
    return [f for i in order for f in segments[i]]


def distractor_permutations(segments: Sequence[Sequence[str]], k: int, rng: np.random.Generator,
                            max_tries: int = 200, captions: Sequence[str] | None = None) -> list[Permutation]:
    """Up to `k` permutations whose frame sequences differ from the original and from each other.

    The whole reversal comes first, then block permutations. Identity orders, and orders that
    happen to reproduce an existing frame sequence (identical events), are rejected. With
    `captions` (one per segment), so are orders that tell the same caption sequence as the
    original (events [A, B, A] reversed still read "A, then B, then A": that video answers the query).
    """
    n = len(segments)
    if n < 2 or k < 1:
        return []
    seen = {tuple(apply_order(segments, range(n)))}
    story = tuple(captions) if captions is not None and len(captions) == n else None
    out: list[Permutation] = []
    candidates = itertools.chain([reversal(n)], (block_permutation(n, rng) for _ in range(max_tries)))
    for p in candidates:
        frames = tuple(apply_order(segments, p.order))
        if frames in seen or (story is not None and tuple(story[i] for i in p.order) == story):
            continue
        seen.add(frames)
        out.append(p)
        if len(out) == k:
            break
    return out
