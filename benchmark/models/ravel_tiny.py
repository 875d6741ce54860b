"""Tiny random vision encoders and a tiny random LLM for RAVEL, built from configs (offline demos and tests).

``build_tiny_models(root)`` saves, with ``save_pretrained``:

* ``clip``  — CLIPVisionModel (CLS token + 16 patches) + CLIPImageProcessor
* ``siglip`` — SiglipVisionModel (16 patches, no CLS), no processor saved (exercises the fallback)
* ``dinov2reg`` — Dinov2WithRegistersModel (CLS + 2 registers + 16 patches)
* ``llm`` — Qwen2ForCausalLM with a byte-level BPE tokenizer trained in-process

All load back through ``from_pretrained(path, local_files_only=True)``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

CORPUS = [
    "a red circle at the top left", "a blue square at the center", "two shapes on a white background",
    "a green triangle at the bottom right", "three shapes on a black background: a yellow circle",
    "an orange square and a purple triangle", "one shape on a green background",
]


def _tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<pad>", "<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>")
    return fast


def build_tiny_models(root: str | Path, seed: int = 0) -> dict[str, str]:
    from transformers import (CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel, Dinov2WithRegistersConfig,
                              Dinov2WithRegistersModel, Qwen2Config, Qwen2ForCausalLM, SiglipVisionConfig,
                              SiglipVisionModel)

    root = Path(root)
    paths: dict[str, str] = {}
    torch.manual_seed(seed)
    common: dict[str, Any] = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    clip = CLIPVisionModel(CLIPVisionConfig(image_size=32, patch_size=8, **common))
    clip.save_pretrained(root / "clip")
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(root / "clip")
    paths["clip"] = str(root / "clip")
    torch.manual_seed(seed + 1)
    SiglipVisionModel(SiglipVisionConfig(image_size=32, patch_size=8, **common)).save_pretrained(root / "siglip")
    paths["siglip"] = str(root / "siglip")
    torch.manual_seed(seed + 2)
    Dinov2WithRegistersModel(Dinov2WithRegistersConfig(image_size=32, patch_size=8, num_register_tokens=2,
                                                       **common)).save_pretrained(root / "dinov2reg")
    paths["dinov2reg"] = str(root / "dinov2reg")
    torch.manual_seed(seed + 3)
    tok = _tokenizer()
    llm = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                       num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                                       pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id))
    llm.save_pretrained(root / "llm")
    tok.save_pretrained(root / "llm")
    paths["llm"] = str(root / "llm")
    return paths
