"""Run mteb 2.26's Qwen2-VL-based wrappers (GME) on transformers 5: module paths only, kept in the tests.

mteb's GME wrapper (and GME's own published inference code it follows) was written for transformers
4.45-4.51, where `AutoModelForVision2Seq` loaded a Qwen2-VL whose `.model` was the text decoder (with
`embed_tokens`) and whose `.visual` returned the merged image features as a tensor. transformers 5
moved the decoder to `.model.language_model` and the vision tower to `.model.visual`, which returns an
output object (`pooler_output` holds the same merged features), and dropped `AutoModelForVision2Seq`.

`tf4_layout` gives the wrapper that layout over the same modules and weights. It changes attribute
paths and the vision tower's return shape only; the wrapper's prompts, image resizing, processor
call, truncation, positions, pooling and normalisation run as mteb wrote them. One setting is the
test's: `float32` replaces the wrapper's hard-coded `torch_dtype=float16` when `dtype` says so (a
precision choice mmbench records as `dtype`, not a protocol step), so tiny random weights compare at
1e-5.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator


def _modules():
    import torch

    class Tf4Visual(torch.nn.Module):
        """transformers 4's `Qwen2VisionTransformerPretrainedModel` call: returns the merged features."""

        def __init__(self, visual: torch.nn.Module) -> None:
            super().__init__()
            self.inner = visual

        def get_dtype(self) -> torch.dtype:
            return self.inner.get_dtype()

        def forward(self, pixel_values, grid_thw):
            return self.inner(pixel_values, grid_thw=grid_thw).pooler_output

    class Tf4Qwen2VL(torch.nn.Module):
        """transformers 4's Qwen2VLForConditionalGeneration layout over a transformers 5 model."""

        def __init__(self, generation_model: torch.nn.Module) -> None:
            super().__init__()
            self.generation_model = generation_model
            self.model = generation_model.model.language_model   # transformers 4: base.model (embed_tokens)
            self.visual = Tf4Visual(generation_model.model.visual)  # transformers 4: base.visual
            self.config = generation_model.config

        def get_input_embeddings(self):
            return self.model.get_input_embeddings()

    return Tf4Qwen2VL


@contextmanager
def tf4_layout(monkeypatch, dtype: str | None = "float32") -> Iterator[None]:
    """While active, `transformers.AutoModelForVision2Seq.from_pretrained` loads a Qwen2-VL in transformers 4's
    layout (see the module text). `dtype` None keeps the wrapper's own dtype."""
    import torch
    import transformers
    from transformers import Qwen2VLForConditionalGeneration

    wrapper = _modules()

    class AutoModelForVision2Seq:
        @staticmethod
        def from_pretrained(name: str, *args: Any, torch_dtype=None, revision=None, **kw: Any):
            chosen = getattr(torch, dtype) if dtype else torch_dtype
            model = Qwen2VLForConditionalGeneration.from_pretrained(name, dtype=chosen, attn_implementation="sdpa")
            return wrapper(model.eval()).eval()

    monkeypatch.setattr(transformers, "AutoModelForVision2Seq", AutoModelForVision2Seq, raising=False)
    yield


def mteb_gme(monkeypatch, path: str, **kw: Any):
    """mteb 2.26's `GmeQwen2VL` on a local Qwen2-VL folder (its defaults: 4..1280 image tokens, max_length 1800)."""
    from mteb.models.model_implementations.gme_v_models import GmeQwen2VL

    with tf4_layout(monkeypatch):
        return GmeQwen2VL(path, revision=None, device="cpu", **kw)
