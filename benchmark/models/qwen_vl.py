"""A configurable last-token embedder for the Qwen-VL family (GME, Qwen3-VL-Embedding, VLM2Vec, kin).

Documents are rendered with the model's template (`templates.py`), images and video frames are
resized here with the model's own smart-resize bounds (so `visual_tokens` is exact and the
processor never resizes or truncates), and the embedding is the final-norm hidden state of the
last attended token, L2-normalised. Per-document token counts of each call are kept in
`last_encode_info` for the results.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mmbench.data.documents import Document, Image, Segment, Video
from mmbench.data.media import MediaStore
from mmbench.models.base import EmbeddingModel, EncodeError, ModelCard, Role
from mmbench.models.hf_common import folder_revision, HFTextTokenizer, resolve_device, resolve_dtype
from mmbench.models.templates import QwenVLTemplate, render


@dataclass(frozen=True)
class VisionBounds:
    """Pixel bounds and video sampling of a model (min/max pixels are per image or per frame)."""

    factor: int                  # patch size × spatial merge: 28 for Qwen2-VL, 32 for Qwen3-VL
    min_pixels: int
    max_pixels: int
    video_min_pixels: int
    video_max_pixels: int
    fps: float | None = None     # resample videos down to this rate; None keeps the document's frames
    temporal_patch: int = 2      # frames merged into one visual-token group


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen-VL resizing: sides multiples of `factor`, area within [min_pixels, max_pixels], aspect kept.

    The arithmetic is `qwen_vl_utils.smart_resize`, the function the models' reference code calls.
    Around it: an empty image or an aspect ratio above 200 is a one-line ValueError naming the size,
    and a side is never below one `factor` (the library can floor a very thin image's short side to
    0 when it shrinks it under `max_pixels`; the transformers processors keep one patch, as here).
    """
    if min(height, width) <= 0:
        raise ValueError(f"image size {width}x{height} is empty")
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"image size {width}x{height}: aspect ratio above 200 is not supported by Qwen-VL")
    if max_pixels < min_pixels:
        raise ValueError(f"vision bounds: max_pixels {max_pixels} is below min_pixels {min_pixels}")
    from qwen_vl_utils import smart_resize as reference  # imports torch: only when a Qwen-VL model sizes images

    h, w = reference(height, width, factor, min_pixels=min_pixels, max_pixels=max_pixels)
    return max(factor, h), max(factor, w)


def below_minimum(width: int, height: int, factor: int, min_pixels: int) -> bool:
    """Whether smart_resize upscales this image to `min_pixels` (its sides rounded to the grid fall short of it)."""
    return max(factor, round(height / factor) * factor) * max(factor, round(width / factor) * factor) < min_pixels


@dataclass(frozen=True)
class QwenVLPreset:
    """Everything that defines one registered model: weights, template, window, vision bounds."""

    name: str
    hub_id: str | None
    template: QwenVLTemplate
    context: int
    vision: VisionBounds
    video: bool = True
    video_frames_as_images: bool = False   # the official code feeds video frames as a list of images
    notes: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    positions: str = "mrope"               # rotary positions of the language model's tokens: see POSITIONS
    max_length: int | None = None          # a cut of the rendered prompt's tokens at the right (mteb-style); None: none
    dtype: str | None = None               # the protocol's weight dtype when the user gives none
    # "mmbench": images resized here (smart_resize, PIL bicubic); "processor": given whole to the processor's image
    # processor, which resizes them to the same grid (torchvision under transformers 5), as mteb's wrappers do
    image_resize: str = "mmbench"
    num_frames: int | None = None          # every video sampled to this many evenly spaced frames (see even_frames)
    frame_stamp_fps: float | None = None   # Qwen3-VL: the frame rate its timestamps are computed at; None: the video's
    # Named alternative protocols: preset fields to replace ("vision" and "template": a dict of their fields).
    protocols: dict[str, dict[str, Any]] = field(default_factory=dict)


DEFAULT_PROTOCOL = "mmlongembed"
# What happens to visuals that do not fit the model as they are; each case is counted per document in the run's
# summary (`adapted` in the adapter's per-document record).
VISUAL_HANDLING = {
    "small_images": "an image or frame below min_pixels is upscaled to it (smart_resize, PIL bicubic); counted as "
                    "upscaled_to_minimum",
    "odd_frame_counts": "native video: the processor repeats the last frame to fill a group of temporal_patch frames "
                        "(a 1-frame clip becomes 2 equal frames); counted as odd_frames_padded",
    "frame_rate": "a video above the model's fps keeps every k-th frame, never invents frames; counted as "
                  "video_resampled",
}
# How a view is made to fit the window (issue 47): the template's joins between texts are paid from the budget
# and the rendered prompt is measured and cut again by any excess. Views made before this differ on multi-text
# documents near the window, so the setting is part of the protocol's setup (another id than older runs).
WINDOW_FIT = "the rendered prompt, joins between texts included, within the window"
POSITIONS = {
    "mrope": "3-D multimodal rotary positions (Qwen-VL's get_rope_index: visual tokens by time, row and column)",
    "sequential": "1-D positions 0..n-1 for every token, visual ones included (the language model called with "
                  "position_ids=None, as GME's published inference code does under transformers < 4.52)",
}


def with_protocol(preset: QwenVLPreset, protocol: str | None) -> QwenVLPreset:
    """The preset under a named protocol: `mmlongembed` (its own) or one of `preset.protocols`."""
    name = protocol or DEFAULT_PROTOCOL
    if name == DEFAULT_PROTOCOL:
        return preset
    if name not in preset.protocols:
        known = ", ".join([DEFAULT_PROTOCOL, *sorted(preset.protocols)])
        raise ValueError(f"model {preset.name!r} has no protocol {name!r}; its protocols: {known}")
    changes = dict(preset.protocols[name])
    if "vision" in changes:
        changes["vision"] = replace(preset.vision, **changes["vision"])
    if "template" in changes:
        changes["template"] = replace(preset.template, **changes["template"])
    return replace(preset, **changes, protocols={})


FRAME_SAMPLING = ("num_frames evenly spaced, first and last included; a shorter clip's frames each repeated in place "
                  "(counted as frames_repeated)")
IMAGE_RESIZE_WORDS = "by the processor's image processor (torchvision under transformers 5), not here"


def _attn(requested: str | None, device: str) -> str:
    """flash-attention 2 when installed on CUDA, SDPA otherwise (or what the user asked for)."""
    if requested:
        return requested
    import importlib.util

    return "flash_attention_2" if device.startswith("cuda") and importlib.util.find_spec("flash_attn") else "sdpa"


IMAGE_RESIZE = ("mmbench", "processor")


def even_frames(frames: Sequence[str], target: int) -> list[str]:
    """`target` frames evenly spaced over the clip, first and last included (indices rounded half to even); a clip
    shorter than `target` has each of its frames repeated in place (0, 0, 1, 1, 2, ...) to reach it."""
    n = len(frames)
    if n < target:
        picked = [i * n // target for i in range(target)]
    else:
        picked = [int(i) for i in np.rint(np.linspace(0, n - 1, target))]
    return [frames[i] for i in picked]


def resample_frames(frames: Sequence[str], fps: float, target: float | None) -> tuple[list[str], float]:
    """Keep every k-th frame so the rate drops to `target`; never invent frames."""
    if not target or fps <= target or len(frames) <= 1:
        return list(frames), fps
    step = fps / target
    idx = sorted({min(len(frames) - 1, int(round(i * step))) for i in range(int(len(frames) / step + 0.5) or 1)})
    return [frames[i] for i in idx], fps * len(idx) / len(frames)


@dataclass
class PreparedInputs:
    """A batch ready for the forward pass: the processor's tensors (on the CPU) and each document's record."""

    inputs: dict[str, Any]
    info: list[dict[str, Any]]


class QwenVLEmbedder(EmbeddingModel):
    """Last-token pooled Qwen-VL embedder driven by a `QwenVLPreset`."""

    def __init__(self, preset: QwenVLPreset, device: str | None = None, dtype: str | None = None,
                 attn_implementation: str | None = None, model_path: str | None = None,
                 trust_remote_code: bool = False, revision: str | None = None, query_instruction: str | None = None,
                 document_instruction: str | None = None, video: bool | None = None, context: int | None = None,
                 safety_margin: int | None = None, protocol: str | None = None, positions: str | None = None,
                 **_: Any) -> None:
        import torch
        from transformers import AutoModel, AutoProcessor

        protocol_name = protocol or DEFAULT_PROTOCOL
        preset = with_protocol(preset, protocol)
        if positions is not None:
            if positions not in POSITIONS:
                raise ValueError(f"positions must be one of {', '.join(POSITIONS)}, not {positions!r}")
            preset = replace(preset, positions=positions)
        tpl = preset.template
        if query_instruction is not None:
            tpl = replace(tpl, query_instruction=query_instruction)
        if document_instruction is not None:
            tpl = replace(tpl, document_instruction=document_instruction)
        self.preset = replace(preset, template=tpl, video=preset.video if video is None else bool(video),
                              context=int(context or preset.context))
        source = model_path or preset.hub_id
        if not source:
            raise ValueError(f"model {preset.name!r} has no known hub id: pass --model-path to a local checkpoint")
        local = Path(source).exists()
        if local and (Path(source) / "adapter_config.json").is_file():
            raise ValueError(f"{source} is a LoRA adapter; merge it into its base model first "
                             "(peft: PeftModel.from_pretrained(base, path).merge_and_unload().save_pretrained(out))")
        self._torch = torch
        self._device = resolve_device(device)
        self._dtype = resolve_dtype(dtype or preset.dtype, self._device)
        self._attn = _attn(attn_implementation, self._device)
        kw = dict(revision=revision, local_files_only=local, trust_remote_code=trust_remote_code)
        self.processor = AutoProcessor.from_pretrained(source, **kw)
        self.processor.tokenizer.padding_side = "right"
        self.model = AutoModel.from_pretrained(source, dtype=self._dtype, attn_implementation=self._attn,
                                               **kw).to(self._device).eval()
        self._is_qwen3 = "qwen3" in getattr(self.model.config, "model_type", "")
        vcfg = self.model.config.vision_config
        factor = int(vcfg.patch_size) * int(vcfg.spatial_merge_size)
        if factor != preset.vision.factor:
            raise ValueError(f"{source}: vision patch x merge is {factor}, but preset {preset.name!r} assumes "
                             f"{preset.vision.factor}; this checkpoint belongs to another Qwen-VL generation")
        self._tok = self.processor.tokenizer
        self.last_encode_info: list[dict[str, Any]] = []
        self._markup = self._placeholder_markup()
        overhead = self._overhead()
        placeholder_ids = (self._tok.encode(ph, add_special_tokens=False) for ph in (tpl.image_placeholder,
                                                                                        tpl.video_placeholder))
        self._placeholder_tokens = tuple(len(ids) for ids in placeholder_ids)   # (image, video), as written
        window = self.preset.context
        margin = safety_margin if safety_margin is not None else 16 + window // 100
        vb = self.preset.vision
        text_cfg = getattr(self.model.config, "text_config", self.model.config)
        settings = {
            **tpl.settings(), "pooling": "last attended token, final hidden state after the final norm",
            "normalize": "l2", "dtype": str(self._dtype).split(".")[-1], "context": window,
            "vision": asdict(vb), "video": self.preset.video, "padding_side": "right",
            "video_input": "frames as images" if preset.video_frames_as_images else "native video",
            "model_id": Path(source).name if local else source, "positions": self.preset.positions,
            "visual_handling": VISUAL_HANDLING, "window_fit": WINDOW_FIT,
            **({"max_length": preset.max_length, "truncation_side": "right (the prompt's tokens, its end included)"}
               if preset.max_length else {}),
            **({"image_resize": IMAGE_RESIZE_WORDS} if preset.image_resize == "processor" else {}),
            **({"num_frames": preset.num_frames, "frame_sampling": FRAME_SAMPLING} if preset.num_frames else {}),
            **({"frame_stamp_fps": preset.frame_stamp_fps} if preset.frame_stamp_fps else {}),
            **({"protocol": protocol_name} if preset.protocols or protocol_name != DEFAULT_PROTOCOL else {}),
            **preset.settings,
        }
        mods = {"text", "image"} | ({"video"} if self.preset.video else set())
        self.card = ModelCard(
            name=preset.name, family="qwen-vl-last-token", modalities=frozenset(mods),
            max_tokens=window - overhead - margin, similarity="cosine",
            revision=revision or folder_revision(source), dim=int(text_cfg.hidden_size), settings=settings,
            notes=(preset.notes + f" Window {window} tokens minus template overhead {overhead} and a safety margin "
                   f"of {margin}; the joins between texts are paid from it, and a view whose rendered prompt still "
                   "exceeds the window is truncated further by the excess; videos are budgeted per group of "
                   "temporal_patch frames, with a timestamp allowance (an upper bound). Attention: " + self._attn
                   + ".").strip(),
        )

    # --- budgets -------------------------------------------------------------------------

    def budget_tokenizer(self) -> HFTextTokenizer:
        return HFTextTokenizer(self._tok)

    def image_size(self, width: int, height: int) -> tuple[int, int]:
        vb = self.preset.vision
        return smart_resize(height, width, vb.factor, vb.min_pixels, vb.max_pixels)

    def frame_size(self, width: int, height: int) -> tuple[int, int]:
        vb = self.preset.vision
        return smart_resize(height, width, vb.factor, vb.video_min_pixels, vb.video_max_pixels)

    def visual_tokens(self, width: int, height: int) -> int:
        """Exact tokens of an image with its placeholder markup."""
        f = self.preset.vision.factor
        h, w = self.image_size(width, height)
        return (h // f) * (w // f) + self._markup

    def video_tokens(self, n_frames: int, width: int, height: int) -> int:
        """Tokens of `n_frames` frames: one token group per `temporal_patch` frames (the processor
        repeats the last frame of an odd count), each with its markup and a timestamp allowance."""
        if not self.preset.video or n_frames <= 0:
            return 0
        n_frames = self.preset.num_frames or n_frames
        vb = self.preset.vision
        fh, fw = self.frame_size(width, height)
        if self.preset.video_frames_as_images:
            return n_frames * ((fh // vb.factor) * (fw // vb.factor) + self._markup)
        groups = -(-n_frames // vb.temporal_patch)
        return groups * ((fh // vb.factor) * (fw // vb.factor) + self._markup + 8)

    def text_join_tokens(self) -> int:
        """The template's joiner between two texts ("\n" for GME): one token per join of a view of many texts."""
        joiner = self.preset.template.text_joiner
        return len(self._tok.encode(joiner, add_special_tokens=False)) if joiner else 0

    def rendered_tokens(self, segments: Sequence[Segment]) -> int:
        """What these segments cost the model once rendered, in the costlier role: the prompt's tokens as the
        processor reads them, each placeholder replaced by what it expands to (`visual_tokens`, `video_tokens`: exact
        for images, an upper bound for videos)."""
        as_images = self.preset.video_frames_as_images
        image_ph, video_ph = self._placeholder_tokens
        visual = 0
        for seg in segments:
            if isinstance(seg, Image):
                visual += self.visual_tokens(seg.width, seg.height) - image_ph
            elif isinstance(seg, Video):
                written = image_ph * len(seg.frames) if as_images else video_ph
                visual += self.video_tokens(len(seg.frames), seg.width, seg.height) - written
        prompts = [render(segments, role, self.preset.template, video_as_images=as_images).text
                   for role in ("query", "document")]
        return max(len(ids) for ids in self._tok(prompts)["input_ids"]) + visual

    def rendered_excess(self, segments: Sequence[Segment]) -> int:
        return max(0, self.rendered_tokens(segments) - self.preset.context)

    def _overhead(self) -> int:
        """Template tokens around an empty document (instruction, chat markup, pooled token), worst case."""
        tpl = self.preset.template
        variants = [tpl.query_instruction]
        doc = tpl.document_instruction
        variants += [doc] if isinstance(doc, str) else list(doc.values())
        empty = len(self._tok.encode(tpl.empty_content, add_special_tokens=False)) if tpl.empty_content else 0
        worst = 0
        for text in variants:
            probe = replace(tpl, query_instruction=text)
            worst = max(worst, len(self._tok.encode(render([], "query", probe).text, add_special_tokens=False)))
        return worst - empty + 1  # +1: a merge across the content boundary

    def _placeholder_markup(self) -> int:
        """Tokens a visual placeholder adds besides its expanded pads (vision start/end, joiner)."""
        tpl = self.preset.template
        ids = self._tok.encode(tpl.image_placeholder, add_special_tokens=False)
        pad = self._tok.convert_tokens_to_ids("<|image_pad|>")
        joiner = len(self._tok.encode(tpl.boundary_joiner, add_special_tokens=False)) if tpl.boundary_joiner else 0
        return sum(1 for i in ids if i != pad) + joiner

    # --- encoding ------------------------------------------------------------------------

    def encode(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> np.ndarray:
        return self.encode_prepared(self.prepare(documents, role, media))

    def prepare(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> PreparedInputs:
        """The batch rendered, its images and frames read and resized, and run through the processor (CPU work,
        done for the next batch while this one is forwarded); a document over the window is an error here."""
        if not documents:
            return PreparedInputs({}, [])
        prompts, images, videos, metas = [], [], [], []
        info: list[dict[str, Any]] = []
        as_images = self.preset.video_frames_as_images
        vb = self.preset.vision
        for doc in documents:
            adapted: list[tuple[str, str]] = []   # (kind, what was done): counted per kind in the run's summary
            segments = [self._resampled(seg, doc.id, adapted) if isinstance(seg, Video) else seg
                        for seg in doc.segments]
            rendered = render(segments, role, self.preset.template, video_as_images=as_images)
            if rendered.reordered:
                adapted.insert(0, ("visual_moved_first", "single visual moved before the text (official form)"))
            n_frames, upscaled = 0, 0
            for seg in rendered.visuals:
                if media is None:
                    raise EncodeError(f"document {doc.id!r} has images or videos but no media store was given")
                if isinstance(seg, Image):
                    upscaled += below_minimum(seg.width, seg.height, vb.factor, vb.min_pixels)
                    size = None if self.preset.image_resize == "processor" else self.image_size(seg.width, seg.height)
                    images.append(self._load(media, seg.ref, doc.id, size))
                    continue
                size = self.frame_size(seg.width, seg.height)
                frames = [self._load(media, r, doc.id, size) for r in seg.frames]
                n_frames += len(frames)
                upscaled += len(frames) * below_minimum(seg.width, seg.height, vb.factor, vb.video_min_pixels)
                if as_images:
                    images.extend(frames)
                    continue
                if len(frames) % vb.temporal_patch:
                    adapted.append(("odd_frames_padded", f"{len(frames)} frames: the processor repeats the last "
                                    f"frame to fill a group of {vb.temporal_patch} (Qwen-VL's rule)"))
                videos.append(np.stack([np.asarray(f) for f in frames]))
                metas.append({"fps": self.preset.frame_stamp_fps or seg.fps, "frames_indices": list(range(len(frames))),
                              "total_num_frames": len(frames)})
            if as_images and n_frames:
                adapted.append(("frames_as_images", f"video frames given as {n_frames} images (the official input form)"))
            if upscaled:
                adapted.append(("upscaled_to_minimum", f"{upscaled} images or frames below the model's minimum pixels "
                                "upscaled to it (bicubic)"))
            prompts.append(rendered.text)
            info.append({"id": doc.id, "frames": n_frames, "adaptations": [text for _, text in adapted],
                         "adapted": [kind for kind, _ in adapted]})
        vb_size = {"shortest_edge": vb.min_pixels, "longest_edge": vb.max_pixels}
        by_processor = self.preset.image_resize == "processor"
        kwargs: dict[str, Any] = {"images_kwargs": {"do_resize": by_processor, **({"size": vb_size} if by_processor
                                                                                 else {})},
                                  "videos_kwargs": {"do_resize": False}}
        if videos:
            kwargs["do_sample_frames"] = False
            kwargs["cap_pixels_per_frame"] = False  # frames are already resized here with the model's bounds
            if self._is_qwen3:
                from transformers.video_utils import VideoMetadata

                kwargs["video_metadata"] = [VideoMetadata(**m) for m in metas]
        if self.preset.max_length:
            kwargs.update(truncation=True, max_length=self.preset.max_length)
        inputs = self.processor(text=prompts, images=images or None, videos=videos or None,
                                padding=True, return_tensors="pt", **kwargs)
        mask = inputs["attention_mask"]
        lengths = mask.sum(dim=1).tolist()
        for i, (doc, n, rec) in enumerate(zip(documents, lengths, info)):
            rec["tokens"] = int(n)
            if n == self.preset.max_length and len(self._tok(prompts[i], add_special_tokens=False)["input_ids"]) > n:
                rec["adaptations"].append(f"prompt cut at {n} tokens at the right, its closing tokens included "
                                          "(the protocol's max_length)")
                rec["adapted"].append("prompt_cut")
            if n > self.preset.context:
                raise EncodeError(f"document {doc.id!r}: {n} tokens exceed the {self.preset.context}-token window "
                                  "(it should have been truncated before encoding)")
        return PreparedInputs(dict(inputs), info)

    def encode_prepared(self, prepared: PreparedInputs) -> np.ndarray:
        """One forward pass over a prepared batch: last-token pooled, L2-normalised."""
        if not prepared.info:
            return np.zeros((0, self.card.dim or 0), dtype=np.float32)
        inputs = {k: v.to(self._device) for k, v in prepared.inputs.items()}
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(self._dtype)
        if "pixel_values_videos" in inputs:
            inputs["pixel_values_videos"] = inputs["pixel_values_videos"].to(self._dtype)
        if self.preset.positions == "sequential":
            n, length = inputs["input_ids"].shape
            inputs["position_ids"] = self._torch.arange(length, device=self._device).expand(n, length)
        with self._torch.inference_mode():
            hidden = self.model(**inputs).last_hidden_state
        emb = self._pool_last(hidden, inputs["attention_mask"])
        emb = self._torch.nn.functional.normalize(emb.float(), p=2, dim=-1)
        self.last_encode_info = prepared.info
        return emb.cpu().numpy().astype(np.float32)

    def _resampled(self, seg: Video, item: str, adapted: list[tuple[str, str]]) -> Video:
        """The video at the model's frame rate (fewer frames, never invented ones); noted in `adapted`."""
        if not self.preset.video:
            raise EncodeError(f"document {item!r}: model {self.card.name} does not accept video")
        if self.preset.num_frames:
            target = self.preset.num_frames
            frames = even_frames(seg.frames, target)
            if len(seg.frames) < target:
                adapted.append(("frames_repeated", f"{len(seg.frames)} frames: each repeated in place to reach the "
                                f"protocol's {target} evenly spaced frames"))
            elif len(seg.frames) > target:
                adapted.append(("video_resampled", f"video sampled to {target} evenly spaced frames of "
                                f"{len(seg.frames)}"))
            return replace(seg, frames=tuple(frames), fps=seg.fps * target / len(seg.frames))
        frames, fps = resample_frames(seg.frames, seg.fps, self.preset.vision.fps)
        if len(frames) < len(seg.frames):
            adapted.append(("video_resampled",
                            f"video resampled {seg.fps:g}->{fps:g} fps ({len(seg.frames)}->{len(frames)} frames)"))
        return replace(seg, frames=tuple(frames), fps=fps)

    @staticmethod
    def _pool_last(hidden, mask):
        """Hidden state at each row's last attended position (works for left or right padding)."""
        import torch

        last = mask.shape[1] - 1 - mask.flip(dims=[1]).argmax(dim=1)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]

    @staticmethod
    def _load(media: MediaStore, ref: str, item: str, size: tuple[int, int] | None):
        from PIL import Image as PILImage

        img = media.load_image(ref, item=item)
        if size is None:
            return img
        h, w = size
        return img if img.size == (w, h) else img.resize((w, h), PILImage.Resampling.BICUBIC)
