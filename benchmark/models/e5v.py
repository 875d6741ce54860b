"""E5-V (royokong/e5-v): LLaVA-NeXT-8B whose one-word summary prompt turns the last hidden state into an embedding.

Checked against mteb 2.26's wrapper (mteb/models/model_implementations/e5_v.py, an independent reference)
and the model card (https://huggingface.co/royokong/e5-v):
- Llama-3 chat markup around the content: ``<|start_header_id|>user<|end_header_id|>\\n\\n{content}<|eot_id|>``
  ``<|start_header_id|>assistant<|end_header_id|>\\n\\n \\n``;
- text: ``{text}\\nSummary above sentence in one word: ``; image: ``<image>\\nSummary above image in one word: ``;
- the embedding is the final layer's hidden state at the last position (``hidden_states[-1][:, -1]``).
  mmbench takes the last *attended* position, which is the same token under left padding and still right
  under right padding;
- no instruction: queries and documents get the same prompts (E5-V is prompt-based, not instruction-tuned).

mmbench's own choices, stated (E5-V publishes no prompt for them): a document with both images and text
keeps its reading order with one ``<image>`` per image and ends ``\\nSummary above image and sentence in one
word: ``; several images in one document are allowed (LLaVA-NeXT expands each); video frames are given as
images. The window is the Llama-3 backbone's 8,192 tokens (mteb's ModelMeta); image costs follow
LLaVA-NeXT's any-resolution tiling, computed with the processor's own feature count.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mmbench.data.documents import Document, Image, Text, Video
from mmbench.data.media import MediaStore
from mmbench.models.base import EmbeddingModel, EncodeError, ModelCard, Role
from mmbench.models.hf_common import HFTextTokenizer, folder_revision, resolve_device, resolve_dtype

HUB_ID = "royokong/e5-v"
WINDOW = 8192
LLAMA3_TURN = ("<|start_header_id|>user<|end_header_id|>\n\n{}<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n \n")
TEXT_SUFFIX = "\nSummary above sentence in one word: "
IMAGE_SUFFIX = "\nSummary above image in one word: "
MIXED_SUFFIX = "\nSummary above image and sentence in one word: "
IMAGE_TOKEN = "<image>"


def prompt_for(segments: Sequence[Any]) -> tuple[str, int]:
    """The E5-V prompt for a document's segments (Text, Image) in reading order, and its number of images."""
    parts, n_images, has_text = [], 0, False
    for seg in segments:
        if isinstance(seg, Text):
            if seg.text:
                parts.append(seg.text)
                has_text = True
        elif isinstance(seg, Image):
            parts.append(IMAGE_TOKEN)
            n_images += 1
    suffix = MIXED_SUFFIX if n_images and has_text else IMAGE_SUFFIX if n_images else TEXT_SUFFIX
    return LLAMA3_TURN.format("".join(_joined(parts)) + suffix), n_images


def _joined(parts: list[str]) -> list[str]:
    """Image placeholders on their own line, as in E5-V's image prompt; texts joined as they are."""
    out: list[str] = []
    for i, p in enumerate(parts):
        if i and (p == IMAGE_TOKEN or parts[i - 1] == IMAGE_TOKEN):
            out.append("\n")
        out.append(p)
    return out


class E5VEmbedder(EmbeddingModel):
    """E5-V through transformers' LlavaNext classes; `model_path` may be a local folder (e.g. a tiny test model)."""

    def __init__(self, model_path: str | None = None, device: str | None = None, dtype: str | None = None,
                 attn_implementation: str | None = None, revision: str | None = None, context: int = WINDOW,
                 trust_remote_code: bool = False, name: str | None = None, **_: Any) -> None:
        import torch
        from transformers import LlavaNextForConditionalGeneration, LlavaNextProcessor

        source = model_path or HUB_ID
        local = Path(source).exists()
        self._torch = torch
        self._device = resolve_device(device)
        self._dtype = resolve_dtype(dtype, self._device)
        kw = dict(revision=revision, local_files_only=local, trust_remote_code=trust_remote_code)
        self.processor = LlavaNextProcessor.from_pretrained(source, **kw)
        self.processor.tokenizer.padding_side = "left"  # the last position is the pooled token for every row
        model_kw = {"attn_implementation": attn_implementation} if attn_implementation else {}
        self.model = LlavaNextForConditionalGeneration.from_pretrained(source, dtype=self._dtype, **model_kw,
                                                                       **kw).to(self._device).eval()
        self._tok = self.processor.tokenizer
        self.context = int(context)
        overhead = max(len(self._tok.encode(prompt_for([])[0].replace(TEXT_SUFFIX, s), add_special_tokens=False))
                       for s in (TEXT_SUFFIX, IMAGE_SUFFIX, MIXED_SUFFIX)) + 2  # +2: BOS and a boundary merge
        text_cfg = getattr(self.model.config, "text_config", self.model.config)
        self.card = ModelCard(
            name=name or "e5-v", family="llava-next-prompt-last-token",
            modalities=frozenset({"text", "image", "video"}), max_tokens=self.context - overhead,
            similarity="cosine", revision=revision or folder_revision(source), dim=int(text_cfg.hidden_size),
            settings={"model_id": Path(source).name if local else source, "template": "llama3-user-turn",
                      "prompts": {"text": TEXT_SUFFIX, "image": IMAGE_SUFFIX, "mixed": MIXED_SUFFIX},
                      "pooling": "last attended position of the final hidden state", "normalize": "l2",
                      "padding_side": "left", "dtype": str(self._dtype).split(".")[-1], "context": self.context,
                      "video_input": "frames as images"},
            notes=("E5-V prompts and pooling as in mteb's wrapper; the mixed text+image prompt and several "
                   f"images per document are mmbench's choice (unverified). Window {self.context} minus "
                   f"{overhead} template tokens."),
        )

    def budget_tokenizer(self) -> HFTextTokenizer:
        return HFTextTokenizer(self._tok)

    def visual_tokens(self, width: int, height: int) -> int:
        """Placeholder tokens LLaVA-NeXT expands one image of this size into (any-resolution tiling)."""
        crop = self.processor.image_processor.crop_size
        ch, cw = (crop["height"], crop["width"]) if isinstance(crop, dict) else (crop.height, crop.width)
        n = self.processor._get_number_of_features(height, width, ch, cw)
        if self.processor.vision_feature_select_strategy == "default":
            n -= 1
        return int(n) + 1  # +1: the newline that separates the placeholder from its neighbours

    def encode(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> np.ndarray:
        return self.encode_prepared(self.prepare(documents, role, media))

    def prepare(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> dict[str, Any]:
        """The batch's prompts and images through the processor (CPU tensors); over the window is an error here."""
        if not documents:
            return {}
        prompts, images = [], []
        for doc in documents:
            segs: list[Any] = []
            for seg in doc.segments:
                if isinstance(seg, Video):
                    segs.extend(Image(ref=r, width=seg.width, height=seg.height) for r in seg.frames)
                else:
                    segs.append(seg)
            prompt, _ = prompt_for(segs)
            for seg in segs:
                if isinstance(seg, Image):
                    if media is None:
                        raise EncodeError(f"document {doc.id!r} has images but no media store was given")
                    images.append(media.load_image(seg.ref, item=doc.id).convert("RGB"))
            prompts.append(prompt)
        inputs = self.processor(text=prompts, images=images or None, padding=True, return_tensors="pt")
        n = int(inputs["attention_mask"].shape[1])
        if n > self.context:
            raise EncodeError(f"document {documents[0].id!r}: {n} tokens exceed the {self.context}-token window")
        return dict(inputs)

    def encode_prepared(self, prepared: dict[str, Any]) -> np.ndarray:
        """One forward pass: the last attended token's final hidden state, L2-normalised."""
        if not prepared:
            return np.zeros((0, self.card.dim or 0), dtype=np.float32)
        inputs = {k: v.to(self._device) for k, v in prepared.items()}
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(self._dtype)
        with self._torch.inference_mode():
            hidden = self.model(**inputs, output_hidden_states=True, return_dict=True).hidden_states[-1]
        mask = inputs["attention_mask"]
        last = mask.shape[1] - 1 - mask.flip(dims=[1]).argmax(dim=1)
        emb = hidden[self._torch.arange(hidden.shape[0], device=hidden.device), last]
        emb = self._torch.nn.functional.normalize(emb.float(), p=2, dim=-1)
        return emb.cpu().numpy().astype(np.float32)
