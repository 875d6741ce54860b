"""Middle truncation at segment granularity: keep the head and the tail of a document.

A document is a run of units: text tokens (cost 1 each), whole images, and video frames.
The head keeps units from the start up to half the budget, the tail keeps units from the
end with what is left; an image or frame that does not fit is dropped whole, and nothing
after it on that side is kept. A model whose input puts tokens between two consecutive texts (a template's
joiner) gives their count as `join_tokens`: every join the kept view will have is paid from the budget, so a view
of many short texts fits as well as one of a single text. The report says exactly what was cut. Head truncation
(`truncate(..., "head")`, `mmbench run --truncation head`) gives the whole budget to the head and keeps no tail.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from mmbench.data.documents import Image, Segment, Text, Video
from mmbench.data.tokens import TextTokenizer


WINDOW_CHARS_PER_TOKEN = 8   # first guess of characters per token when cutting a long text's windows
WINDOW_MARGIN = 4             # tokens kept unused at a window's cut edge, where tokenisation may differ


@dataclass
class TruncationReport:
    tokens_before: int
    tokens_after: int
    cut_text_tokens: int = 0
    dropped_images: int = 0
    dropped_frames: int = 0
    exact: bool = True  # False when a very long text was tokenised only at its two ends (counts estimated)

    @property
    def truncated(self) -> bool:
        return self.tokens_after < self.tokens_before


STRATEGIES = ("middle", "head")  # what `truncate` keeps: the head and the tail (mmbench's protocol), or the head only


def strategy_of(settings: dict | None) -> str:
    """The strategy a model card's settings ask for: "head" where `mmbench run --truncation head` put it there, else
    "middle" (the protocol's rule, which leaves the card as it is)."""
    return str((settings or {}).get("truncation", "middle"))


def middle_truncate(
    segments: Sequence[Segment],
    budget: int,
    tokenizer: TextTokenizer | None,
    visual_tokens: Callable[[int, int], int],
    video_tokens: Callable[[int, int, int], int] | None = None,
) -> tuple[list[Segment], TruncationReport]:
    """Fit `segments` into `budget` tokens: ceil(budget/2) from the head, the rest from the tail.

    `video_tokens(n_frames, width, height)` is what n frames of a video cost (default: n images);
    models that merge frames in time make it cheaper than n separate images.
    """
    return truncate(segments, budget, tokenizer, visual_tokens, video_tokens, "middle")


def truncate(
    segments: Sequence[Segment],
    budget: int,
    tokenizer: TextTokenizer | None,
    visual_tokens: Callable[[int, int], int],
    video_tokens: Callable[[int, int, int], int] | None = None,
    strategy: str = "middle",
    join_tokens: int = 0,
) -> tuple[list[Segment], TruncationReport]:
    """Fit `segments` into `budget` tokens by `strategy`: "middle" (`middle_truncate`), or "head": units from the
    start while they fit, nothing from the end (what sentence-transformers and most tools do to a long text).

    `join_tokens` is what the model's input puts between two consecutive text pieces; the budget pays for every
    such join of the kept view (the head and the tail of a cut text are two pieces, so one join between them)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"truncation strategy {strategy!r}: one of {', '.join(STRATEGIES)}")
    if budget < 0 or join_tokens < 0:
        raise ValueError("budget and join_tokens must be non-negative")
    if video_tokens is None:
        def video_tokens(n: int, w: int, h: int) -> int:
            return n * visual_tokens(w, h)
    ids: list[_Tokens | None] = []
    units: list[int] = []
    costs: list[Callable[[int], int]] = []  # tokens of the first (or last) k units of a segment
    for seg in segments:
        if isinstance(seg, Text):
            if tokenizer is None:
                raise ValueError("text segments need a tokenizer to be truncated")
            toks = _tokens(seg.text, budget, tokenizer)
            ids.append(toks)
            # an empty text is one unit of no tokens: kept or dropped whole, so that its join is paid when kept
            units.append(toks.count or 1)
            costs.append((lambda k: k) if toks.count else (lambda k: 0))
        elif isinstance(seg, Image):
            ids.append(None)
            units.append(1)
            costs.append(_image_cost(visual_tokens(seg.width, seg.height)))
        elif isinstance(seg, Video):
            ids.append(None)
            units.append(len(seg.frames))
            costs.append(_frames_cost(video_tokens, seg.width, seg.height))
        else:
            raise TypeError(f"not a segment: {seg!r}")
    n = len(segments)
    # joins[k]: the tokens between segment k-1 and segment k when both are kept (two texts in a row)
    joins = [join_tokens if k and isinstance(segments[k], Text) and isinstance(segments[k - 1], Text) else 0
             for k in range(n)]
    total = sum(cost(u) for cost, u in zip(costs, units)) + sum(joins)
    exact = all(t is None or t.exact for t in ids)
    if total <= budget:
        return list(segments), TruncationReport(total, total)

    head = [0] * n
    head_budget = budget if strategy == "head" else (budget + 1) // 2
    left = head_budget
    stop = n
    for k in range(n):   # a head piece pays for its join to the (whole) segment before it
        cost = _with_join(costs[k], joins[k])
        take = _most_that_fit(units[k], cost, left)
        head[k] = take
        left -= cost(take)
        if take < units[k]:
            stop = k
            break
    used_head = head_budget - left

    tail = [0] * n
    # the tail pays for the join where it meets the head (reserved: which pieces meet is known only at the end)
    left = max(0, budget - used_head - join_tokens)
    for k in range(n - 1, stop - 1 if strategy == "middle" else n - 1, -1):   # "head": no tail at all
        # a tail piece pays for its join to the (whole) segment after it
        avail = units[k] - head[k]
        cost = _with_join(costs[k], joins[k + 1] if k + 1 < n else 0)
        take = _most_that_fit(avail, cost, left)
        tail[k] = take
        left -= cost(take)
        if take < avail:
            break

    kept: list[Segment] = []
    report = TruncationReport(tokens_before=total, tokens_after=0, exact=exact)
    for k, seg in enumerate(segments):
        if head[k] + tail[k] >= units[k]:
            kept.append(seg)
            report.tokens_after += costs[k](units[k])
            continue
        if head[k]:
            kept.append(_part(seg, ids[k], 0, head[k], tokenizer))
        if tail[k]:
            kept.append(_part(seg, ids[k], units[k] - tail[k], units[k], tokenizer))
        report.tokens_after += costs[k](head[k]) + costs[k](tail[k])
        cut = units[k] - head[k] - tail[k]
        if isinstance(seg, Text):
            text_ids = ids[k]
            report.cut_text_tokens += cut if text_ids is not None and text_ids.count else 0   # an empty text: none
        elif isinstance(seg, Image):
            report.dropped_images += cut
        else:
            report.dropped_frames += cut
    report.tokens_after += join_tokens * sum(isinstance(a, Text) and isinstance(b, Text)
                                             for a, b in zip(kept, kept[1:]))
    return kept, report


def _with_join(cost: Callable[[int], int], join: int) -> Callable[[int], int]:
    """The cost of the first (or last) k units of a segment plus its join, paid once any unit is kept."""
    return lambda k: cost(k) + join if k else 0


def _most_that_fit(avail: int, cost: Callable[[int], int], left: int) -> int:
    """The largest k <= avail with cost(k) <= left (costs grow with k)."""
    lo, hi = 0, avail
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cost(mid) <= left:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class _Tokens:
    """A text's token ids, or for a very long text only its two end windows."""

    head: list[int]
    tail: list[int]
    count: int
    exact: bool

    def slice(self, start: int, end: int) -> list[int]:
        if self.exact:
            return self.head[start:end]
        if start == 0:
            return self.head[:end]
        return self.tail[len(self.tail) - (self.count - start):][: end - start]


def first_texts_to_tokenize(segments: Sequence[Segment], budget: int) -> list[str]:
    """The strings `middle_truncate(segments, budget, ...)` tokenises first: each text whole, or for a text far
    longer than the budget its two end windows. A caller tokenising many documents can tokenise these in
    one batch beforehand (a tokenizer's `prime`); the truncation is the same either way."""
    width = (budget + WINDOW_MARGIN) * WINDOW_CHARS_PER_TOKEN
    out: list[str] = []
    for seg in segments:
        if isinstance(seg, Text):
            out += [seg.text[:width], seg.text[-width:]] if 2 * width < len(seg.text) else [seg.text]
    return out


def _tokens(text: str, budget: int, tokenizer: TextTokenizer) -> _Tokens:
    """Tokenise `text`, or only enough of each end when it is far longer than the budget."""
    need = budget + WINDOW_MARGIN
    width = need * WINDOW_CHARS_PER_TOKEN
    while 2 * width < len(text):
        head = tokenizer.encode(text[:width])
        tail = tokenizer.encode(text[-width:])
        if min(len(head), len(tail)) > need:
            per_char = (len(head) + len(tail)) / (2 * width)
            count = max(int(len(text) * per_char), len(head) + len(tail) + 1)
            return _Tokens(head[: len(head) - WINDOW_MARGIN], tail[WINDOW_MARGIN:], count, exact=False)
        width *= 2
    ids = tokenizer.encode(text)
    return _Tokens(ids, ids, len(ids), exact=True)


def _part(seg: Segment, ids: _Tokens | None, start: int, end: int, tokenizer: TextTokenizer | None) -> Segment:
    if isinstance(seg, Text):
        assert ids is not None and tokenizer is not None
        return Text(tokenizer.decode(ids.slice(start, end)))
    assert isinstance(seg, Video)
    return Video(seg.frames[start:end], seg.fps, seg.width, seg.height)


def _image_cost(per_image: int) -> Callable[[int], int]:
    """Tokens of k copies of an image that costs `per_image` (bound now, not when called)."""
    return lambda k: k * per_image


def _frames_cost(video_tokens: Callable[[int, int, int], int], width: int, height: int) -> Callable[[int], int]:
    """Tokens of the first (or last) k frames of a width x height video."""
    return lambda k: video_tokens(k, width, height) if k else 0
