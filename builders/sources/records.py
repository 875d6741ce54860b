"""The records source readers hand to builders: units of a context (a text or an image) and video events."""
from __future__ import annotations

from dataclasses import dataclass, field

from mmbench.data.documents import Image, Segment, Text
from mmbench.data.tokens import UnifiedTokenCounter, image_tokens


@dataclass(frozen=True)
class Unit:
    """One segment of a context with its unified token count, role and origin."""

    segment: Segment
    tokens: int
    role: str = "context"    # context | evidence | filler | padding | replacement
    source: str = ""         # where it came from, e.g. "hotpotqa:5a8b#Title/2" or "filler:pydoc@1234"
    info: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_evidence(self) -> bool:
        return self.role == "evidence"


def text_unit(counter: UnifiedTokenCounter, text: str, role: str = "context", source: str = "", **info) -> Unit:
    return Unit(Text(text), counter.text(text), role, source, dict(info))


def image_unit(image: Image, role: str = "context", source: str = "", **info) -> Unit:
    return Unit(image, image_tokens(image.width, image.height), role, source, dict(info))


@dataclass(frozen=True)
class Event:
    start: float
    end: float
    caption: str = ""
