"""GPU readiness: mmbench's encode path on a random-weight GME-2B / Qwen3-VL-Embedding-2B at 8K-32K tokens.

For each architecture the script builds the model from its configuration (the real layer sizes of
Qwen2-VL-2B and Qwen3-VL-2B, random weights: no download), saves it with a tokenizer and processor,
loads it through mmbench's adapter (`QwenVLEmbedder`, the registered preset), and for each document
length times
  * mmbench's `encode` of one text document (template, processor, transfer, forward, last-token
    pooling, normalisation, copy back), and
  * the bare forward pass `model(**inputs)` on the same prepared inputs,
and prints their ratio (goal: mmbench >= 80 % of the bare pass), the peak GPU memory of the encode,
and whether the longest document fits. Throughput is tokens per second.

    python perf/gpu_readiness.py                 # on a GPU: bf16, 8K / 16K / 32K tokens, both models
    python perf/gpu_readiness.py --toy           # anywhere: the same path at toy size (CPU, < 1 minute)

The tokenizer is the small test BPE of tests/tiny_models.py (ids fit the real vocabulary size); token
counts are what the model receives, so throughput does not depend on it. The layer sizes below are
those of the published config.json files of Qwen2-VL-2B-Instruct and Qwen3-VL-2B-Instruct (each number's
source is cited next to it; tests/test_gpu_readiness_configs.py checks the built configs against them).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

# Full sizes, from the published config.json files (the Hugging Face hub is not reachable from here, so
# each number was read from a public copy, cited next to it). Fields a published file leaves out take the
# transformers class defaults, which are checked against the same sources in tests/test_gpu_readiness_configs.py.
#
# Qwen2-VL-2B-Instruct (GME-2B is a fine-tune of it with the same shapes): text tower from
#   https://huggingface.co/Qwen/Qwen2-VL-2B-Instruct-AWQ/blob/refs%2Fpr%2F1/config.json (Qwen's own upload) and
#   https://huggingface.co/onnx-community/Qwen2-VL-2B-Instruct/blob/214aa9f9bbb9fa4358067a0b7eab6c0587a6ead9/config.json
#   ("_name_or_path": "Qwen/Qwen2-VL-2B-Instruct"): hidden 1536, intermediate 8960, 28 layers, 12 heads,
#   2 KV heads, rms_norm_eps 1e-6, rope_theta 1e6, mrope_section [16, 24, 24], max positions 32768,
#   vocab 151936, tie_word_embeddings true; vision_config there gives only hidden_size 1536 (the merger's
#   output width), the rest is Qwen2VLVisionConfig's defaults: depth 32, embed_dim 1280, mlp_ratio 4,
#   16 heads, patch 14 (also in https://huggingface.co/zszhong/Lyra_Qwen2VL_2B_ViT/blob/main/config.json,
#   the 2B vision tower saved alone).
QWEN2_VL_2B = dict(
    text=dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
              num_key_value_heads=2, max_position_embeddings=32768, rms_norm_eps=1e-6,
              rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]}),
    vision=dict(depth=32, embed_dim=1280, hidden_size=1536, num_heads=16, mlp_ratio=4),
    tie_word_embeddings=True)
# Qwen3-VL-2B-Instruct (Qwen3-VL-Embedding-2B keeps its shapes): the published file
#   (https://huggingface.co/Qwen/Qwen3-VL-2B-Instruct/tree/main, config.json 1.51 kB) was not readable from
#   here; its values as quoted by public code: text hidden 2048, 28 layers, 16 heads, 8 KV heads,
#   head_dim 128, rope_theta 5e6, vocab 151936 (the Qwen3VLMeta dump in an InfiniCore-based Qwen3-VL-2B
#   loader); interleaved mrope_section [24, 20, 20], max positions 262144 (every Qwen3-VL dense config,
#   e.g. https://huggingface.co/quanliang/F1/blob/main/config.json); intermediate 6144 (a checkpoint
#   validator of a Qualcomm AI Hub Qwen3-VL adapter expects text 2048/6144/16 heads/28 layers/8 KV/128
#   and vision depth 24/hidden 1024/16 heads/out 2048/patch 16; also Qwen3-1.7B's, the text tower it
#   starts from); tie_word_embeddings true (Qwen3-1.7B's config as quoted in public test fixtures: the
#   one value here not seen for the 2B VL model itself); vision intermediate 4096, 2304 position
#   embeddings, deepstack layers [5, 11, 17] (sgl-jax's Qwen3VLVisionConfig, whose defaults are the 2B's).
QWEN3_VL_2B = dict(
    text=dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
              num_key_value_heads=8, head_dim=128, max_position_embeddings=262144, rms_norm_eps=1e-6,
              rope_parameters={"rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20],
                               "mrope_interleaved": True}),
    vision=dict(depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16, out_hidden_size=2048,
                num_position_embeddings=2304, deepstack_visual_indexes=[5, 11, 17], patch_size=16),
    tie_word_embeddings=True)
TOY2 = dict(text=dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=32768,
                      rope_parameters={"rope_type": "default", "rope_theta": 1e4, "mrope_section": [4, 6, 6]}),
            vision=dict(depth=2, embed_dim=32, hidden_size=128, num_heads=2, mlp_ratio=2))
TOY3 = dict(text=dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=32, max_position_embeddings=32768,
                      rope_parameters={"rope_type": "default", "rope_theta": 1e4, "mrope_section": [4, 6, 6],
                                       "mrope_interleaved": True}),
            vision=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=128,
                        num_position_embeddings=64, deepstack_visual_indexes=[0]))
ARCHS = {"gme-2b": ("qwen2", QWEN2_VL_2B, TOY2), "qwen3-vl-embedding-2b": ("qwen3", QWEN3_VL_2B, TOY3)}


def build_config(kind: str, sizes: dict, vocab: int, special_ids: dict[str, int]):
    """The transformers config of one architecture at `sizes` (no weights: cheap at full size)."""
    import transformers as tf

    common = dict(image_token_id=special_ids["<|image_pad|>"], video_token_id=special_ids["<|video_pad|>"],
                  vision_start_token_id=special_ids["<|vision_start|>"],
                  vision_end_token_id=special_ids["<|vision_end|>"],
                  tie_word_embeddings=sizes.get("tie_word_embeddings", False))
    text = {**sizes["text"], "vocab_size": vocab}
    config = tf.Qwen2VLConfig if kind == "qwen2" else tf.Qwen3VLConfig
    return config(text_config=text, vision_config=sizes["vision"], **common)


def special_ids(tok) -> dict[str, int]:
    from tiny_models import QWEN_SPECIALS

    return {t: tok.convert_tokens_to_ids(t) for t in QWEN_SPECIALS}


def save_random_model(kind: str, sizes: dict, out: Path, vocab: int, dtype) -> None:
    import torch
    import transformers as tf
    from tiny_models import qwen_tokenizer

    tok = qwen_tokenizer()
    cfg = build_config(kind, sizes, max(vocab, len(tok)), special_ids(tok))
    torch.manual_seed(0)
    if kind == "qwen2":
        model = tf.Qwen2VLForConditionalGeneration(cfg)
        proc = tf.Qwen2VLProcessor(image_processor=tf.Qwen2VLImageProcessor(), tokenizer=tok,
                                   video_processor=tf.Qwen2VLVideoProcessor())
    else:
        model = tf.Qwen3VLForConditionalGeneration(cfg)
        proc = tf.Qwen3VLProcessor(image_processor=tf.Qwen2VLImageProcessor(patch_size=16, merge_size=2),
                                   tokenizer=tok, video_processor=tf.Qwen3VLVideoProcessor(patch_size=16, merge_size=2))
    model.to(dtype).save_pretrained(out)
    proc.save_pretrained(out)
    del model


def document_of(tokens: int, model, doc_id: str):
    """A text document the adapter receives as about `tokens` tokens (template included)."""
    from mmbench.data.documents import Document, Text

    tok = model.budget_tokenizer()
    words = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma "
             "tau upsilon phi chi psi omega").split()
    per = max(1, len(tok.encode(" ".join(words))) / len(words))
    n = int(tokens / per)
    text = " ".join(words[i % len(words)] for i in range(n))
    while len(tok.encode(text)) > tokens - 64:  # leave room for the template
        text = text[: int(len(text) * 0.98)]
    return Document(doc_id, [Text(text)])


def measure(model, tokens: int, reps: int, cuda: bool) -> dict:
    import torch

    from mmbench.models.templates import render

    doc = document_of(tokens, model, f"d{tokens}")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    prompt = render(doc.segments, "document", model.preset.template).text
    inputs = {k: v.to(model._device) for k, v in model.processor(text=[prompt], padding=True,
                                                                 return_tensors="pt").items()}
    n_tokens = int(inputs["attention_mask"].sum())

    def bare():
        with torch.inference_mode():
            model.model(**inputs).last_hidden_state  # noqa: B018 - the forward pass is what is timed

    def ours():
        model.encode([doc], "document", None)

    out = {"tokens": n_tokens}
    for name, fn in (("bare", bare), ("mmbench", ours)):
        fn()  # warm-up (kernels, allocator)
        sync()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            sync()
            best = min(best, time.perf_counter() - t)
        out[name] = best
        if cuda:
            out[f"{name}_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return out


DEFAULT_LENGTHS = "8192,16384,32768,65536,131072"   # the 64K and 128K bins are measured too (docs/long-contexts.md)


def declared_positions(model) -> int | None:
    """The positions the model's configuration declares (a longer document runs past what it was trained on)."""
    config = getattr(model.model, "config", None)
    for cfg in (getattr(config, "text_config", None), config):
        n = getattr(cfg, "max_position_embeddings", None)
        if isinstance(n, int):
            return n
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--toy", action="store_true", help="toy sizes on CPU (checks the script, not the GPU)")
    ap.add_argument("--arch", choices=[*ARCHS, "both"], default="both")
    ap.add_argument("--lengths", default=None, help="comma-separated token counts (default 8192,16384,32768,65536,131072; toy 256,512,1024)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--device", default=None)
    a = ap.parse_args()
    import torch

    from mmbench.models.qwen_vl_presets import load_preset

    cuda = not a.toy and torch.cuda.is_available() if a.device is None else a.device.startswith("cuda")
    device = a.device or ("cuda" if cuda else "cpu")
    if not a.toy and not cuda:
        sys.exit("no GPU here: run with --toy for the CPU check of this script")
    dtype_name = "bfloat16" if cuda else "float32"
    dtype = getattr(torch, dtype_name)
    lengths = [int(x) for x in (a.lengths or ("256,512,1024" if a.toy else DEFAULT_LENGTHS)).split(",")]
    archs = list(ARCHS) if a.arch == "both" else [a.arch]
    print(f"device={torch.cuda.get_device_name() if cuda else 'cpu'} dtype={dtype_name} toy={a.toy}")
    for arch in archs:
        kind, real, toy = ARCHS[arch]
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            save_random_model(kind, toy if a.toy else real, Path(tmp), 151936 if not a.toy else 0, dtype)
            model = load_preset(arch, model_path=tmp, device=device, dtype=dtype_name, context=max(lengths) + 256)
            params = sum(p.numel() for p in model.model.parameters())
            print(f"\n{arch}: {params / 1e9:.2f}B parameters (random weights), built and loaded in "
                  f"{time.perf_counter() - t0:.0f}s, attention={model._attn}")
            fits = {}
            positions = declared_positions(model)
            for n in lengths:
                fits[n] = False
                if positions is not None and n > positions:
                    print(f"  {n:6d} tokens: past the {positions} positions the configuration declares; measured "
                          "for speed and memory only (the model cannot be expected to use them)")
                try:
                    r = measure(model, n, a.reps, cuda)
                except torch.cuda.OutOfMemoryError:
                    print(f"  {n:6d} tokens: out of GPU memory (does not fit in {dtype_name})")
                    torch.cuda.empty_cache()
                    continue
                fits[n] = True
                share = r["bare"] / r["mmbench"]
                mem = f"  peak {r['mmbench_peak_gib']:.1f} GiB" if cuda else ""
                print(f"  {r['tokens']:6d} tokens: bare forward {r['tokens'] / r['bare']:9.0f} tok/s, mmbench encode "
                      f"{r['tokens'] / r['mmbench']:9.0f} tok/s -> {100 * share:5.1f}% of the bare pass{mem}")
            if cuda:
                total = torch.cuda.get_device_properties(0).total_memory / 2**30
                print(f"  a {max(lengths)}-token document fits on this {total:.0f} GiB GPU in {dtype_name}: "
                      f"{'yes' if fits[max(lengths)] else 'no'}")
            del model
            if cuda:
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
