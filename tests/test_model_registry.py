"""The model list: every registered model states hub id, parameters, dimension, window and modalities,
and the figures agree with mteb's ModelMeta (an independent record) wherever mteb lists the model."""
from __future__ import annotations

import pytest

from mmbench.cli import main
from mmbench.models.registry import model_specs

MTEB_NAMES = {"minilm": "sentence-transformers/all-MiniLM-L6-v2", "clip-vit-b-32": "openai/clip-vit-base-patch32",
              "siglip-base": "google/siglip-base-patch16-224", "gme-2b": "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct",
              "gme-7b": "Alibaba-NLP/gme-Qwen2-VL-7B-Instruct", "qwen3-vl-embedding-2b": "Qwen/Qwen3-VL-Embedding-2B",
              "qwen3-vl-embedding-8b": "Qwen/Qwen3-VL-Embedding-8B", "vlm2vec-v2": "VLM2Vec/VLM2Vec-V2.0",
              "ops-mm-embedding-2b": "OpenSearch-AI/Ops-MM-embedding-v1-2B",
              "ops-mm-embedding-7b": "OpenSearch-AI/Ops-MM-embedding-v1-7B", "rzen-embed": "qihoo360/RzenEmbed",
              "e5-v": "royokong/e5-v", "doubao-seed-1.6-embedding": "Bytedance/Seed1.6-embedding"}


@pytest.mark.parametrize("name", sorted(MTEB_NAMES))
def test_metadata_agrees_with_mteb(name):
    mteb = pytest.importorskip("mteb")
    ref = mteb.get_model_meta(MTEB_NAMES[name])
    spec = {s.name: s for s in model_specs()}[name]
    assert spec.parameters == ref.n_parameters
    assert spec.dim == ref.embed_dim
    if ref.license:
        assert spec.license == ref.license
    assert set(ref.modalities) <= set(spec.modalities)


def test_every_model_with_metadata_is_registered():
    names = {s.name for s in model_specs()}
    assert set(MTEB_NAMES) <= names
    assert {"doubao-seed-1.6-embedding", "e5-v", "mmemb-r1", "embed-rl"} <= names
    unverified = {s.name for s in model_specs() if not s.verified}
    assert unverified == {"embed-rl", "mmemb-r1"}


def test_list_models_shows_hub_id_parameters_dim_window_and_modalities(capsys):
    assert main(["list", "models"]) == 0
    out = capsys.readouterr().out
    header, *rows = out.splitlines()
    for column in ("modalities", "context", "params", "dim", "hub id"):
        assert column in header
    e5v = next(r for r in rows if r.startswith("e5-v "))
    assert "8.4B" in e5v and "4096" in e5v and "royokong/e5-v" in e5v and "8192" in e5v and "text,image" in e5v
    doubao = next(r for r in rows if r.startswith("doubao-seed-1.6-embedding"))
    assert "128000" in doubao and "2048" in doubao
    assert "UNVERIFIED" in next(r for r in rows if r.startswith("mmemb-r1"))


def test_the_listed_context_is_the_window_a_run_reads(capsys, minilm, tmp_path):
    """`list models`, the run's protocol line and the board's model page print one figure: the card's `max_tokens`.
    MiniLM loads here; CLIP's and SigLIP's formula (the window less the tokenizer's specials) is checked on tiny
    random models with the real tokenizers' special tokens (CLIP: BOS and EOS in 77 positions; SigLIP: EOS in 64)."""
    from tiny_models import build_clip, build_siglip

    from mmbench.leaderboards.modelmeta import resolve
    from mmbench.models.clip import DualEncoderModel

    specs = {s.name: s for s in model_specs()}
    assert specs["minilm"].context == minilm.card.max_tokens == 254
    clip = DualEncoderModel(model_path=str(build_clip(tmp_path / "clip")), device="cpu")
    assert specs["clip-vit-b-32"].context == clip.card.max_tokens == 75
    siglip = DualEncoderModel(model_path=str(build_siglip(tmp_path / "siglip", window=64, append_eos=True)), device="cpu")
    assert specs["siglip-base"].context == siglip.card.max_tokens == 63
    assert main(["list", "models"]) == 0
    row = next(r for r in capsys.readouterr().out.splitlines() if r.startswith("minilm "))
    assert row.split()[2] == "254", row
    # the board's model page: the run's own window, and the registry's (the same) for a card that states none
    card = minilm.card.identity()
    assert resolve(card).context == resolve({**card, "max_tokens": None}).context == 254
