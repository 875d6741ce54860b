"""What the Hugging Face adapters share: the revision a model folder or hub id resolves to, the budget
tokenizer adapter, and the device and dtype names every transformers-based adapter accepts.

Light to import: torch, huggingface_hub and the digests are imported inside the functions that use them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


def resolve_device(device: str | None) -> str:
    """`None`/"auto" picks CUDA when available, else CPU."""
    import torch

    if device in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def resolve_dtype(dtype: str | None, device: str):
    """Map a dtype name to torch; default float32 on CPU and bfloat16 on accelerators."""
    import torch

    if dtype in (None, "", "auto"):
        return torch.float32 if device == "cpu" else torch.bfloat16
    table = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
             "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
    if dtype not in table:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {sorted(table)}")
    return table[dtype]


class HFTextTokenizer:
    """Adapts a transformers tokenizer to the counting protocol (no special tokens)."""

    def __init__(self, tok: Any) -> None:
        self._tok = tok
        self._known: dict[str, list[int]] = {}  # texts tokenised ahead in one batch (see `prime`)

    def encode(self, text: str) -> list[int]:
        ids = self._known.get(text)
        if ids is not None:
            return list(ids)
        return self._tok(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]

    def prime(self, texts: Sequence[str]) -> None:
        """Tokenise `texts` in one batched call (one pass of the fast tokenizer over all of them, instead of
        a Python round trip per text); `encode` answers them from memory until `forget`."""
        todo = sorted({t for t in texts if t not in self._known})
        if todo:
            batch = self._tok(todo, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
            self._known.update(zip(todo, batch))

    def forget(self) -> None:
        self._known = {}

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)


def folder_revision(model_id: str, hub_cache: str | Path | None = None) -> str:
    """A model's revision when none was given.

    A local folder: the digest of its files' contents (memoised by stat, digests.py), so weights saved
    over old ones give a new revision and new cache entries. A hub id: the commit of the snapshot the
    local hub cache resolves it to (what from_pretrained loads), so an updated snapshot is not served
    vectors of the old one; "main" when the cache does not hold it.
    """
    path = Path(model_id)
    if path.exists():
        from mmbench.data.digests import folder_digest

        return "local-" + folder_digest(path)[:16]
    try:
        from huggingface_hub import try_to_load_from_cache

        for filename in ("config.json", "modules.json"):
            hit = try_to_load_from_cache(model_id, filename, cache_dir=hub_cache)
            if isinstance(hit, str):
                return Path(hit).parent.name  # .../snapshots/<commit>/<filename>
    except Exception:  # noqa: BLE001 - not a valid repo id (an mteb name, a path typo): no snapshot to name
        pass
    return "main"
