"""Length bins of video candidates under length control by duration: stated token ranges, and frame counts.

At one standard frame size of T unified tokens, a 1-FPS video of n frames is n·T tokens long.
Each nominal length L gets the range [lo, hi) of tokens whose edges are the geometric midpoints
of neighbouring nominal lengths (the outer edges mirrored), so for 8K/16K/32K the bins are
5,793..11,585, 11,586..23,170 and 23,171..46,340 tokens and tile without gaps or overlaps.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

from mmbench.data.drops import DropLog
from mmbench.data.tokens import length_label


def bin_ranges(lengths: Sequence[int]) -> dict[int, tuple[int, int]]:
    """Each bin's [lo, hi) range of unified tokens: edges at the geometric midpoints of neighbouring nominal
    lengths, the outer edges mirrored (a lone bin spans L/√2 .. L·√2), so the ranges tile without gaps."""
    ls = sorted(set(int(x) for x in lengths))
    if len(ls) == 1:
        edges = [ls[0] / math.sqrt(2), ls[0] * math.sqrt(2)]
    else:
        mids = [math.sqrt(a * b) for a, b in zip(ls, ls[1:])]
        edges = [ls[0] * ls[0] / mids[0], *mids, ls[-1] * ls[-1] / mids[-1]]
    return {L: (math.ceil(edges[k] - 1e-9), math.ceil(edges[k + 1] - 1e-9)) for k, L in enumerate(ls)}


def frame_range(token_range: tuple[int, int], tokens_per_frame: int) -> tuple[int, int]:
    """The 1-FPS frame counts (inclusive) whose length n·tokens_per_frame lies in [lo, hi)."""
    lo, hi = token_range
    return -(-lo // tokens_per_frame), -(-hi // tokens_per_frame) - 1


def bin_of(tokens: int, ranges: dict[int, tuple[int, int]]) -> int | None:
    return next((L for L, (lo, hi) in ranges.items() if lo <= tokens < hi), None)


def measure_bins(log: DropLog, lengths: Iterable[int], ranges: dict[int, tuple[int, int]]) -> None:
    """Count each decoded video's length (`lengths`, unified tokens) against every bin: long enough when it
    reaches the bin's lower edge, too short otherwise."""
    lengths = list(lengths)
    for L, (lo, _) in sorted(ranges.items()):
        log.note_bin(length_label(L))          # a bin is listed even when no video was decoded
        for n in lengths:
            log.measure(length_label(L), n >= lo)
