"""perf/gpu_readiness.py builds its random-weight GME-2B and Qwen3-VL-Embedding-2B from configs: at full
size those configs must have the published layer sizes (the sources are cited in the script). Only the
configs are built here, never the 2B models."""
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("transformers")

SCRIPT = Path(__file__).resolve().parents[1] / "perf" / "gpu_readiness.py"

# Published values, written out again here (not read from the script) so a wrong number in either fails.
QWEN2_VL_2B_INSTRUCT = {
    "text": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, rms_norm_eps=1e-6, max_position_embeddings=32768, vocab_size=151936,
                 hidden_act="silu"),
    "rope": dict(rope_theta=1e6, mrope_section=[16, 24, 24]),
    "vision": dict(depth=32, embed_dim=1280, hidden_size=1536, mlp_ratio=4, num_heads=16, patch_size=14,
                   spatial_merge_size=2, temporal_patch_size=2, in_channels=3),
    "tie_word_embeddings": True,
}
QWEN3_VL_2B_INSTRUCT = {
    "text": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6, max_position_embeddings=262144,
                 vocab_size=151936, hidden_act="silu"),
    "rope": dict(rope_theta=5e6, mrope_section=[24, 20, 20], mrope_interleaved=True),
    "vision": dict(depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16, patch_size=16,
                   spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=2048, num_position_embeddings=2304,
                   deepstack_visual_indexes=[5, 11, 17], hidden_act="gelu_pytorch_tanh", in_channels=3),
    "tie_word_embeddings": True,
}


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("gpu_readiness", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("arch, published", [("gme-2b", QWEN2_VL_2B_INSTRUCT),
                                             ("qwen3-vl-embedding-2b", QWEN3_VL_2B_INSTRUCT)])
def test_full_size_configs_match_the_published_ones(script, arch, published):
    from tiny_models import qwen_tokenizer

    kind, full, _ = script.ARCHS[arch]
    cfg = script.build_config(kind, full, 151936, script.special_ids(qwen_tokenizer()))
    text, vision = cfg.text_config, cfg.vision_config
    for name, value in published["text"].items():
        assert getattr(text, name) == value, (arch, "text", name)
    rope = text.rope_parameters
    for name, value in published["rope"].items():
        assert rope[name] == value, (arch, "rope", name)
    for name, value in published["vision"].items():
        got = getattr(vision, name)
        assert (list(got) if isinstance(got, tuple) else got) == value, (arch, "vision", name)
    assert cfg.tie_word_embeddings is published["tie_word_embeddings"], arch
    # the text width the vision merger feeds must be the text tower's
    out = vision.hidden_size if kind == "qwen2" else vision.out_hidden_size
    assert out == text.hidden_size
