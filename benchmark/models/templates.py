"""Prompt templates of the Qwen-VL-family embedders, and rendering documents into them.

A template turns a document's segments (text, images, videos in reading order) and a role
(query or document) into the exact prompt string the model was trained on, with one
placeholder per image or video; the processor later expands each placeholder into the right
number of visual tokens. Rendering is pure string work, so every template has golden tests.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence

from mmbench.data.documents import Image, Segment, Text, Video

IMAGE_IN_VISION = "<|vision_start|><|image_pad|><|vision_end|>"
VIDEO_IN_VISION = "<|vision_start|><|video_pad|><|vision_end|>"


@dataclass(frozen=True)
class QwenVLTemplate:
    """How one model family wraps a document: chat markup, instruction placement, placeholders."""

    name: str
    version: str
    style: Literal["chat", "plain"]
    query_instruction: str
    # A plain string, or one per dominant modality of the document: keys "text", "image", "video".
    document_instruction: str | Mapping[str, str]
    system_fallback: str = ""          # chat: system text when the role's instruction is empty
    instruction_period: bool = False   # append "." when the instruction does not end in punctuation
    image_placeholder: str = IMAGE_IN_VISION
    video_placeholder: str = VIDEO_IN_VISION
    generation_suffix: str = "<|im_start|>assistant\n"   # chat: text after the user turn; last token is pooled
    single_visual_first: bool = True   # one image/video plus text: the visual goes first (the official form)
    empty_content: str = ""            # what an empty document renders as
    text_joiner: str = "\n"            # between two consecutive text segments
    boundary_joiner: str = ""          # between a text and a visual placeholder
    instruction_in_user: bool = False  # chat: instruction opens the user turn (after leading visuals); system fixed
    instruction_joiner: str = ""       # chat, instruction_in_user: between the instruction and the content
    extra: Mapping[str, str] = field(default_factory=dict)

    def instruction(self, role: str, segments: Sequence[Segment]) -> str:
        """The instruction for a role; a per-modality mapping is keyed by the document's visual content."""
        raw = self.query_instruction if role == "query" else self.document_instruction
        if not isinstance(raw, str):
            kinds = {s.kind for s in segments}
            key = "image" if "image" in kinds else "video" if "video" in kinds else "text"
            raw = raw.get(key, raw.get("text", ""))
        text = raw.strip()
        if text and self.instruction_period and not unicodedata.category(text[-1]).startswith("P"):
            text += "."
        return text

    def settings(self) -> dict[str, object]:
        """What goes into the model card (changes the vectors)."""
        doc = self.document_instruction if isinstance(self.document_instruction, str) else dict(
            self.document_instruction)
        return {"template": f"{self.name}/{self.version}", "query_instruction": self.query_instruction,
                "document_instruction": doc, "system_fallback": self.system_fallback}


@dataclass
class RenderedPrompt:
    """A prompt string and the visual segments its placeholders stand for, in placeholder order."""

    text: str
    visuals: list[Image | Video]
    reordered: bool = False  # the single visual was moved before the text (official single-visual form)


def _ordered(segments: Sequence[Segment], single_visual_first: bool) -> tuple[list[Segment], bool]:
    visuals = [s for s in segments if not isinstance(s, Text)]
    if single_visual_first and len(visuals) == 1 and not isinstance(segments[0], (Image, Video)):
        rest = [s for s in segments if isinstance(s, Text)]
        return [visuals[0], *rest], True
    return list(segments), False


def _join(items: list[Segment], tpl: QwenVLTemplate, video_as_images: bool = False) -> str:
    out: list[str] = []
    prev: Segment | None = None
    for seg in items:
        if prev is not None:
            both_text = isinstance(prev, Text) and isinstance(seg, Text)
            out.append(tpl.text_joiner if both_text else tpl.boundary_joiner)
        if isinstance(seg, Text):
            out.append(seg.text)
        elif isinstance(seg, Image):
            out.append(tpl.image_placeholder)
        elif video_as_images:
            out.append(tpl.image_placeholder * len(seg.frames))
        else:
            out.append(tpl.video_placeholder)
        prev = seg
    return "".join(out)


def _leading_visuals(items: list[Segment]) -> int:
    lead = 0
    while lead < len(items) and not isinstance(items[lead], Text):
        lead += 1
    return lead


def render(segments: Sequence[Segment], role: str, tpl: QwenVLTemplate,
           video_as_images: bool = False) -> RenderedPrompt:
    """Render a document's segments for `role` ("query" or "document") with template `tpl`.

    `video_as_images` renders each video as one image placeholder per frame, for models whose
    official code feeds video frames as a list of images.
    """
    if role not in ("query", "document"):
        raise ValueError(f"role must be 'query' or 'document', not {role!r}")
    items, reordered = _ordered(segments, tpl.single_visual_first)
    visuals = [s for s in items if isinstance(s, (Image, Video))]
    instruction = tpl.instruction(role, segments)
    if tpl.style == "chat" and tpl.instruction_in_user:
        lead = _leading_visuals(items)
        rest = _join(items[lead:], tpl, video_as_images)
        opening = instruction + tpl.instruction_joiner if instruction and rest else instruction
        content = (_join(items[:lead], tpl, video_as_images) + opening + rest) or tpl.empty_content
        text = (f"<|im_start|>system\n{tpl.system_fallback}<|im_end|>\n<|im_start|>user\n{content}<|im_end|>\n"
                f"{tpl.generation_suffix}")
    elif tpl.style == "chat":
        content = _join(items, tpl, video_as_images) or tpl.empty_content
        system = instruction or tpl.system_fallback
        head = f"<|im_start|>system\n{system}<|im_end|>\n" if system else ""
        text = f"{head}<|im_start|>user\n{content}<|im_end|>\n{tpl.generation_suffix}"
    elif tpl.style == "plain":
        lead = _leading_visuals(items)
        parts = [_join([s], tpl, video_as_images) for s in items[:lead]]
        if instruction:
            parts.append(instruction)
        rest = _join(items[lead:], tpl, video_as_images)
        if rest:
            parts.append(rest)
        text = " ".join(parts) or tpl.empty_content
    else:
        raise ValueError(f"template {tpl.name}: unknown style {tpl.style!r}")
    return RenderedPrompt(text=text, visuals=visuals, reordered=reordered)


# --- the official templates -------------------------------------------------------------

GME = QwenVLTemplate(
    name="gme", version="1", style="chat",
    query_instruction="Find an image that matches the given text.",
    document_instruction="You are a helpful assistant.",
    system_fallback="You are a helpful assistant.",
    generation_suffix="<|im_start|>assistant\n<|endoftext|>",
)

# transformers >= 5 expands a bare <|video_pad|> into "<t seconds><|vision_start|>...<|vision_end|>" per
# frame pair, which is the token sequence the official Qwen3-VL chat template + processor produce.
QWEN3_VL_EMBEDDING = QwenVLTemplate(
    name="qwen3-vl-embedding", version="1", style="chat",
    query_instruction="Retrieve images or text relevant to the user's query.",
    document_instruction="Represent the user's input.",
    instruction_period=True, video_placeholder="<|video_pad|>", empty_content="NULL",
)

VLM2VEC = QwenVLTemplate(
    name="vlm2vec-qwen2vl", version="1", style="plain",
    query_instruction="Find me an everyday image that matches the given caption:",
    document_instruction={"text": "", "image": "Represent the given image.", "video": "Represent the given video."},
    image_placeholder="<|image_pad|>", video_placeholder="<|video_pad|>", boundary_joiner=" ",
)

# RzenEmbed (as mteb's wrapper feeds it): fixed system prompt, the instruction opens the user turn
# after the images; the query instruction is MMEB's text-to-image one, the model's training set.
RZEN = QwenVLTemplate(
    name="rzen-embed", version="1", style="chat",
    query_instruction="Find me an everyday image that matches the given caption:",
    document_instruction="",
    system_fallback="You are a helpful assistant.",
    instruction_in_user=True, instruction_joiner=" ",
    generation_suffix="<|im_start|>assistant\n<|endoftext|>",
)

TEMPLATES: dict[str, QwenVLTemplate] = {t.name: t for t in (GME, QWEN3_VL_EMBEDDING, VLM2VEC, RZEN)}
