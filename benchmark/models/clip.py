"""CLIP / SigLIP dual encoders through transformers: text tower for text, image tower for images.

A document holding both text and images is embedded as the mean of its L2-normalised text
embedding and its L2-normalised image embeddings (one per image), renormalised. The image tower
resizes every image to one fixed input, so images cost no tokens of the text window.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mmbench.data.documents import Document, Image, Text
from mmbench.data.media import MediaStore
from mmbench.models.base import EmbeddingModel, EncodeError, ModelCard, Role
from mmbench.models.hf_common import folder_revision, HFTextTokenizer, resolve_device, resolve_dtype


def _features(out: Any):
    """transformers 5 returns a model output from get_*_features; older versions a tensor."""
    return out if hasattr(out, "norm") else out.pooler_output


def _load_towers(auto_model: Any, source: str, attn_implementation: str | None, **kw: Any):
    """The model with the attention kernel asked for (transformers' default when None); a kernel this
    architecture or this install does not offer is a one-line error rather than a silent fallback."""
    if not attn_implementation:
        return auto_model.from_pretrained(source, **kw)
    try:
        model = auto_model.from_pretrained(source, attn_implementation=attn_implementation, **kw)
    except (ValueError, ImportError) as exc:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{source}: --attn-implementation {attn_implementation!r} is not available for this "
                         f"model: {why}") from None
    got = getattr(model.config, "_attn_implementation", None)
    if got != attn_implementation:
        raise ValueError(f"{source}: --attn-implementation {attn_implementation!r} was asked for, but "
                         f"transformers loaded {got!r}")
    return model



@dataclass
class PreparedTowers:
    """A batch ready for the two towers: tokenised texts and processed image chunks, each row's document."""

    documents: int
    text: dict[str, Any] | None = None                      # the text tower's inputs (on the CPU)
    text_owner: list[int] = field(default_factory=list)     # the document of each text row
    pixels: list[Any] = field(default_factory=list)         # the image tower's inputs, in chunks
    image_owner: list[int] = field(default_factory=list)    # the document of each image

class DualEncoderModel(EmbeddingModel):
    """CLIP-style dual encoder (CLIP, SigLIP, SigLIP 2) loaded with AutoModel/AutoProcessor."""

    def __init__(self, model_id: str | None = None, name: str | None = None, device: str | None = None,
                 dtype: str | None = None, revision: str | None = None, model_path: str | None = None,
                 trust_remote_code: bool = False, batch_images: int = 32, attn_implementation: str | None = None,
                 **_: Any) -> None:
        import torch
        from transformers import AutoModel, AutoProcessor

        source = model_path or model_id
        if not source:
            raise ValueError("DualEncoderModel needs model_id or model_path")
        local = Path(source).exists()
        self._device = resolve_device(device)
        self._dtype = resolve_dtype(dtype, self._device)
        kw = dict(revision=revision, local_files_only=local, trust_remote_code=trust_remote_code)
        self._model = _load_towers(AutoModel, source, attn_implementation, dtype=self._dtype, **kw)
        self._model = self._model.to(self._device).eval()
        self._processor = AutoProcessor.from_pretrained(source, **kw)
        self._tok = self._processor.tokenizer
        self._torch = torch
        self._batch_images = batch_images
        mtype = getattr(self._model.config, "model_type", "clip")
        # SigLIP was trained on text padded to the full length; CLIP pools at EOS, so padding is inert.
        self._pad_to_max = mtype.startswith("siglip")
        self._text_len = int(self._model.config.text_config.max_position_embeddings)
        specials = self._tok.num_special_tokens_to_add(pair=False)
        dim = getattr(self._model.config, "projection_dim", None) or self._model.config.text_config.hidden_size
        self.card = ModelCard(
            name=name or (Path(source).name if local else source), family=f"dual-encoder:{mtype}",
            modalities=frozenset({"text", "image"}), max_tokens=self._text_len - specials, similarity="cosine",
            revision=revision or folder_revision(source), dim=int(dim),
            settings={"model_id": Path(source).name if local else source, "dtype": str(self._dtype).split(".")[-1],
                      "text_max_length": self._text_len, "pad_to_max_length": self._pad_to_max,
                      "fusion": "mean of L2-normalised text and image embeddings, renormalised"},
            notes=("text and image towers are separate: a document with text and images is the renormalised mean "
                   "of its normalised text embedding and one normalised embedding per image; images are resized "
                   "to the tower's fixed input, so they cost no text tokens (visual_tokens = 0); videos are not seen. "
                   f"Attention: {self._model.config._attn_implementation}."),
        )

    def budget_tokenizer(self) -> HFTextTokenizer:
        return HFTextTokenizer(self._tok)

    def visual_tokens(self, width: int, height: int) -> int:
        return 0

    def encode(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> np.ndarray:
        return self.encode_prepared(self.prepare(documents, role, media))

    def prepare(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> PreparedTowers:
        """Each document's text joined and tokenised, its images read and run through the image processor."""
        texts: list[str] = []
        prepared = PreparedTowers(len(documents))
        images: list[Any] = []
        for i, doc in enumerate(documents):
            parts = [s.text for s in doc.segments if isinstance(s, Text)]
            refs = [s.ref for s in doc.segments if isinstance(s, Image)]
            if refs and media is None:
                raise EncodeError(f"document {doc.id!r} has images but no media store was given")
            if parts or not refs:
                texts.append("\n".join(parts))
                prepared.text_owner.append(i)
            for ref in refs:
                images.append(media.load_image(ref, item=doc.id))
                prepared.image_owner.append(i)
        if texts:
            enc = self._tok(texts, truncation=True, max_length=self._text_len, return_tensors="pt",
                            padding="max_length" if self._pad_to_max else True)
            prepared.text = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}
            if self._pad_to_max:
                prepared.text.pop("attention_mask", None)  # SigLIP's text tower attends to padding by design
        prepared.pixels = [self._processor.image_processor(images[start:start + self._batch_images],
                                                           return_tensors="pt")["pixel_values"]
                           for start in range(0, len(images), self._batch_images)]
        return prepared

    def encode_prepared(self, prepared: PreparedTowers) -> np.ndarray:
        """The towers' unit vectors summed per document, then normalised."""
        dim = int(self.card.dim or 0)
        sums = np.zeros((prepared.documents, dim), dtype=np.float64)
        for owner, vecs in ((prepared.text_owner, self._encode_texts(prepared.text)),
                            (prepared.image_owner, self._encode_images(prepared.pixels))):
            for o, v in zip(owner, vecs):
                sums[o] += v
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        return (sums / np.maximum(norms, 1e-12)).astype(np.float32)

    def _encode_texts(self, tokens: dict[str, Any] | None) -> np.ndarray:
        if tokens is None:
            return np.zeros((0, self.card.dim or 0), dtype=np.float32)
        enc = {k: v.to(self._device) for k, v in tokens.items()}
        with self._torch.inference_mode():
            feats = _features(self._model.get_text_features(**enc))
        return self._unit(feats)

    def _encode_images(self, pixels: list[Any]) -> np.ndarray:
        out = []
        for px in pixels:
            with self._torch.inference_mode():
                feats = _features(self._model.get_image_features(pixel_values=px.to(self._device, self._dtype)))
            out.append(self._unit(feats))
        return np.concatenate(out) if out else np.zeros((0, self.card.dim or 0), dtype=np.float32)

    def _unit(self, feats) -> np.ndarray:
        v = feats.float().cpu().numpy()
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
