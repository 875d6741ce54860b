"""Tiny random-weight models built offline from configs, for adapter tests (no hub access).

A byte-level BPE tokenizer is trained in-process on a small corpus; Qwen2-VL, Qwen3-VL, CLIP and
SigLIP models are built from small configs and saved to local folders with their processors,
so tests exercise the same `from_pretrained(local_dir)` path real checkpoints use. The CLIP and
Qwen2-VL builders live in the package (`mmbench.models.tiny_random`: the reproduction matrix runs them).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image as PILImage

# the tiny models the package builds itself (the reproduction matrix runs them); the rest are built here
from mmbench.models.tiny_random import CORPUS, QWEN_SPECIALS, build_clip, build_qwen2vl, qwen_tokenizer  # noqa: F401
from mmbench.models.tiny_random import bpe_json as _bpe  # noqa: F401
from mmbench.models.tiny_random import qwen_special_ids as _ids  # noqa: F401


def build_qwen3vl(out: Path, seed: int = 0) -> Path:
    """Save a tiny Qwen3-VL (patch 16, merge 2, deepstack) with tokenizer and processor to `out`."""
    import torch
    from transformers import (Qwen2VLImageProcessor, Qwen3VLConfig, Qwen3VLForConditionalGeneration,
                              Qwen3VLProcessor, Qwen3VLVideoProcessor)

    torch.manual_seed(seed)
    tok = qwen_tokenizer()
    ids = _ids(tok)
    cfg = Qwen3VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096,
                         rope_parameters={"rope_type": "default", "rope_theta": 1e4, "mrope_section": [2, 3, 3],
                                          "mrope_interleaved": True}),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                           num_position_embeddings=64, deepstack_visual_indexes=[0]),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    model = Qwen3VLForConditionalGeneration(cfg).eval()
    proc = Qwen3VLProcessor(image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2), tokenizer=tok,
                            video_processor=Qwen3VLVideoProcessor(patch_size=16, merge_size=2))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    proc.save_pretrained(out)
    return out


def build_siglip(out: Path, seed: int = 0, window: int = 16, append_eos: bool = False) -> Path:
    """Save a tiny SigLIP (hidden 32, text window 16, image 32 px, patch 8) with its processor to `out`;
    `append_eos`: the tokenizer ends each text with `</s>`, as google/siglip-base-patch16-224's does."""
    import torch
    from tokenizers import Tokenizer, processors
    from transformers import PreTrainedTokenizerFast, SiglipConfig, SiglipImageProcessor, SiglipModel, SiglipProcessor

    torch.manual_seed(seed)
    tok = Tokenizer.from_str(_bpe(400, ("</s>", "<pad>")))
    if append_eos:
        tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))])
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", model_max_length=window)
    cfg = SiglipConfig(
        text_config=dict(vocab_size=len(hf_tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=window),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8))
    model = SiglipModel(cfg).eval()
    proc = SiglipProcessor(image_processor=SiglipImageProcessor(size={"height": 32, "width": 32}), tokenizer=hf_tok)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    proc.save_pretrained(out)
    return out


def random_image(width: int, height: int, seed: int) -> PILImage.Image:
    """A deterministic noise image: distinct seeds give clearly different embeddings."""
    rng = np.random.default_rng(seed)
    return PILImage.fromarray(rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8), "RGB")
