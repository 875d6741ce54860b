"""A tiny mteb encoder both mmbench (through the mteb bridge) and mteb can run offline."""
from __future__ import annotations

import hashlib

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta


def bow(text: str, dim: int = 64) -> np.ndarray:
    """Hashed bag of words."""
    v = np.zeros(dim)
    for w in text.lower().split():
        v[int(hashlib.md5(w.encode()).hexdigest(), 16) % dim] += 1
    return v


class BagOfWords(AbsEncoder):
    """Hashed bag of words (`dim` buckets: few buckets give many exact ties), plus the mean colour of an
    image when one is given. `constant=True` gives every input the same vector: every pool is one tie."""

    def __init__(self, modalities=("text",), dim: int = 64, constant: bool = False):
        self.calls: list[dict] = []
        self.dim, self.constant = dim, constant
        self.mteb_model_meta = ModelMeta(
            loader=None, name=f"local/bow-{dim}{'-constant' if constant else ''}", revision="0", release_date=None,
            languages=["eng-Latn"], n_parameters=0, memory_usage_mb=None, max_tokens=None, embed_dim=dim,
            license=None, open_weights=True, public_training_code=None, public_training_data=None,
            framework=["NumPy"], similarity_fn_name="cosine", use_instructions=False, training_datasets=set(),
            modalities=list(modalities))

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kw):
        out = []
        for batch in inputs:
            self.calls.append({"keys": sorted(batch), "prompt_type": prompt_type, "n": len(batch["text"])})
            for i, t in enumerate(batch["text"]):
                v = np.ones(self.dim) if self.constant else bow(t, self.dim)
                img = batch.get("image", [None] * len(batch["text"]))[i]
                if img is not None and not self.constant:
                    v[:3] += np.asarray(img.convert("RGB"), dtype=float).mean(axis=(0, 1)) / 255
                out.append(v + 1e-3)
        return np.stack(out)
