"""RAVEL's language-model adapter: the LLM's embedding side, one vector per caption.

Mean over real (attention-mask) tokens of the target LLM's penultimate hidden states (`hidden_states[-2]`,
the output of the second-to-last decoder block), raw caption text, no chat template; `pool="last"` takes the
last real token instead (the paper's post-processing diagnostic, Appendix J).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from mmbench.models.feature_models import model_identity


class TextModel:
    """A causal/base LLM giving penultimate-layer hidden states, mean-pooled over real tokens (RAVEL) or
    at the last real token (`pool="last"`)."""

    def __init__(self, name_or_path: str, *, device: str = "cpu", dtype: torch.dtype = torch.float32,
                 layer: int = -2, local_files_only: bool = True, max_length: int = 256, pool: str = "mean") -> None:
        from transformers import AutoModel, AutoTokenizer

        if pool not in ("mean", "last"):
            raise ValueError(f"text pooling must be 'mean' or 'last', not {pool!r}")
        self.pool = pool
        self.name = str(name_or_path)
        self.device = torch.device(device)
        self.layer = layer
        self.max_length = max_length
        self.dtype = dtype
        self.tokenizer = AutoTokenizer.from_pretrained(name_or_path, local_files_only=local_files_only)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        self.tokenizer.padding_side = "right"
        self.model = AutoModel.from_pretrained(name_or_path, local_files_only=local_files_only, dtype=dtype)
        self.model = self.model.to(self.device).eval()

    def describe(self) -> dict[str, Any]:
        return {"model": model_identity(self.name), "layer": self.layer, "pool": self.pool,
                "max_length": self.max_length, "dtype": str(self.dtype)}

    @torch.no_grad()
    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        tok = self.tokenizer(list(texts), return_tensors="pt", padding=True, truncation=True, max_length=self.max_length)
        tok = {k: v.to(self.device) for k, v in tok.items()}
        out = self.model(**tok, output_hidden_states=True)
        hs: torch.Tensor = out.hidden_states[self.layer].float()
        if self.pool == "last":  # right padding: the last real token sits at length - 1
            last = tok["attention_mask"].sum(1).clamp_min(1) - 1
            return hs[torch.arange(hs.shape[0], device=hs.device), last]
        mask = tok["attention_mask"][..., None].float()
        pooled: torch.Tensor = (hs * mask).sum(1) / mask.sum(1).clamp_min(1)
        return pooled
