"""A tiny random-weight E5-V-shaped model (LLaVA-NeXT: CLIP vision tower + Llama text model), built offline."""
from __future__ import annotations

from pathlib import Path

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eot_id|>", "<image>", "<pad>"]


def build_e5v(out: Path, seed: int = 0) -> Path:
    """Save a ~300k-parameter LlavaNextForConditionalGeneration with its processor to `out`."""
    import torch
    from tokenizers import Tokenizer
    from transformers import (CLIPVisionConfig, LlamaConfig, LlavaNextConfig, LlavaNextForConditionalGeneration,
                              LlavaNextImageProcessor, LlavaNextProcessor, PreTrainedTokenizerFast)

    from tiny_models import _bpe

    torch.manual_seed(seed)
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(_bpe(500, tuple(LLAMA3_SPECIALS))),
                                  bos_token="<|begin_of_text|>", eos_token="<|eot_id|>", pad_token="<pad>",
                                  extra_special_tokens={"image_token": "<image>"})
    tok._tokenizer.post_processor = None
    from tokenizers import processors

    bos = tok.convert_tokens_to_ids("<|begin_of_text|>")
    tok._tokenizer.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])
    pinpoints = [[32, 32], [32, 64], [64, 32], [64, 64]]
    cfg = LlavaNextConfig(
        vision_config=CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=2, image_size=32, patch_size=8, projection_dim=16),
        text_config=LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096),
        image_token_index=tok.convert_tokens_to_ids("<image>"), image_grid_pinpoints=pinpoints,
        vision_feature_select_strategy="default", vision_feature_layer=-2)
    model = LlavaNextForConditionalGeneration(cfg).eval()
    improc = LlavaNextImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32},
                                     image_grid_pinpoints=pinpoints)
    proc = LlavaNextProcessor(image_processor=improc, tokenizer=tok, patch_size=8,
                              vision_feature_select_strategy="default", num_additional_image_tokens=1)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    proc.save_pretrained(out)
    return out
