"""Tiny random-weight models built offline from configs, for adapter tests (no hub access).

A byte-level BPE tokenizer is trained in-process on a small corpus; Qwen2-VL, Qwen3-VL and
CLIP models are built from small configs and saved to local folders with their processors,
so tests exercise the same `from_pretrained(local_dir)` path real checkpoints use.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
from PIL import Image as PILImage

QWEN_SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
]

CORPUS = [
    "a cat sits on the mat while the dog sleeps near the door",
    "the quick brown fox jumps over the lazy dog in the garden",
    "represent the user's input. find an image that matches the given text.",
    "you are a helpful assistant. retrieve images or text relevant to the user's query.",
    "system user assistant instruction query document video image frame seconds",
    "Represent the given image with the following question: What is in the image",
    "0.5 1.0 1.5 2.0 2.5 3.0 seconds <> numbers 0123456789",
    "The needle is hidden somewhere in a very long haystack of ordinary words.",
] * 4


@functools.lru_cache(maxsize=4)
def _bpe(vocab_size: int, specials: tuple[str, ...]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    return tok.to_str()


def qwen_tokenizer():
    """A Qwen-style fast tokenizer: byte-level BPE plus the Qwen chat and vision special tokens."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer.from_str(_bpe(600, tuple(QWEN_SPECIALS)))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        extra_special_tokens={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                              "vision_start_token": "<|vision_start|>", "vision_end_token": "<|vision_end|>"})


def _ids(tok) -> dict[str, int]:
    return {t: tok.convert_tokens_to_ids(t) for t in QWEN_SPECIALS}


def build_qwen2vl(out: Path, seed: int = 0) -> Path:
    """Save a ~200k-parameter Qwen2-VL with tokenizer and processor to `out`."""
    import torch
    from transformers import (Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessor,
                              Qwen2VLProcessor, Qwen2VLVideoProcessor)

    torch.manual_seed(seed)
    tok = qwen_tokenizer()
    ids = _ids(tok)
    cfg = Qwen2VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         rope_parameters={"rope_type": "default", "rope_theta": 1e4, "mrope_section": [2, 3, 3]}),
        vision_config=dict(depth=2, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    model = Qwen2VLForConditionalGeneration(cfg).eval()
    proc = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(), tokenizer=tok,
                            video_processor=Qwen2VLVideoProcessor())
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    proc.save_pretrained(out)
    return out


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


def build_clip(out: Path, seed: int = 0) -> Path:
    """Save a tiny CLIP (hidden 32, image 32 px, patch 8, projection 16) with its processor to `out`."""
    import torch
    from tokenizers import Tokenizer, processors
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, PreTrainedTokenizerFast

    torch.manual_seed(seed)
    tok = Tokenizer.from_str(_bpe(400, ("<|startoftext|>", "<|endoftext|>")))
    bos, eos = tok.token_to_id("<|startoftext|>"), tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|startoftext|> $A <|endoftext|>", special_tokens=[("<|startoftext|>", bos), ("<|endoftext|>", eos)])
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|startoftext|>", eos_token="<|endoftext|>",
                                     pad_token="<|endoftext|>", model_max_length=77)
    cfg = CLIPConfig(
        text_config=dict(vocab_size=len(hf_tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=77, bos_token_id=bos, eos_token_id=eos,
                         pad_token_id=eos),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        projection_dim=16)
    model = CLIPModel(cfg).eval()
    proc = CLIPProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": 32},
                                                            crop_size={"height": 32, "width": 32}), tokenizer=hf_tok)
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
