"""Tiny random-weight retrieval models built offline from configs: a CLIP dual encoder and a Qwen2-VL.

The reproduction matrix (`mmbench reproduce`) runs them to pin the image paths of the adapters (a text model sees
none of Flickr's candidates), and the tests use them for the adapters' own checks. Nothing is downloaded: a
byte-level BPE tokenizer is trained in-process on a small corpus, the weights are drawn from torch's seeded
generator, and the model is saved with its processor to a local folder, so it loads through the same
`from_pretrained(local_dir)` path real checkpoints use. The same seed gives the same files (tested), on any
machine with the same torch, transformers and tokenizers.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

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
def bpe_json(vocab_size: int, specials: tuple[str, ...]) -> str:
    """A byte-level BPE tokenizer trained on `CORPUS`, as the `tokenizers` JSON string."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    return str(tok.to_str())


def qwen_tokenizer() -> Any:
    """A Qwen-style fast tokenizer: byte-level BPE plus the Qwen chat and vision special tokens."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer.from_str(bpe_json(600, tuple(QWEN_SPECIALS)))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        extra_special_tokens={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                              "vision_start_token": "<|vision_start|>", "vision_end_token": "<|vision_end|>"})


def qwen_special_ids(tok: Any) -> dict[str, int]:
    return {t: tok.convert_tokens_to_ids(t) for t in QWEN_SPECIALS}


def build_qwen2vl(out: Path, seed: int = 0) -> Path:
    """Save a ~200k-parameter Qwen2-VL with tokenizer and processor to `out`."""
    import torch
    from transformers import (Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessor,
                              Qwen2VLProcessor, Qwen2VLVideoProcessor)

    torch.manual_seed(seed)
    tok = qwen_tokenizer()
    ids = qwen_special_ids(tok)
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


def build_clip(out: Path, seed: int = 0) -> Path:
    """Save a tiny CLIP (hidden 32, image 32 px, patch 8, projection 16) with its processor to `out`; its
    tokenizer wraps each text in BOS and EOS within 77 positions, as openai/clip-vit-base-patch32's does."""
    import torch
    from tokenizers import Tokenizer, processors
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, PreTrainedTokenizerFast

    torch.manual_seed(seed)
    tok = Tokenizer.from_str(bpe_json(400, ("<|startoftext|>", "<|endoftext|>")))
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


BUILDERS: dict[str, Callable[[Path, int], Path]] = {"clip": build_clip, "qwen2vl": build_qwen2vl}
