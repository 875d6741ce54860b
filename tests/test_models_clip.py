"""DualEncoderModel on a tiny random CLIP built from a config and saved to a local folder."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mmbench.data.documents import Document, Text  # noqa: E402
from mmbench.data.media import MediaStore  # noqa: E402
from mmbench.models.base import EncodeError  # noqa: E402
from mmbench.models.clip import DualEncoderModel  # noqa: E402
from mmbench.models.registry import load_model  # noqa: E402
from mmbench.data.truncation import middle_truncate  # noqa: E402
from tiny_models import build_clip, random_image  # noqa: E402


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    return build_clip(tmp_path_factory.mktemp("clip") / "tiny-clip")


@pytest.fixture(scope="module")
def model(clip_dir):
    return DualEncoderModel(model_path=str(clip_dir), device="cpu", unknown_option="ignored")


@pytest.fixture()
def media(tmp_path):
    return MediaStore(tmp_path / "media")


def test_card_and_budget(model):
    assert model.card.max_tokens == 77 - 2
    assert model.card.modalities == frozenset({"text", "image"})
    assert model.card.dim == 16
    assert model.visual_tokens(4000, 3000) == 0
    tok = model.budget_tokenizer()
    ids = tok.encode("a cat sits on the mat")
    assert ids and model._tok.bos_token_id not in ids and model._tok.eos_token_id not in ids


def test_text_matches_reference_forward(model):
    docs = [Document("a", [Text("a cat sits on the mat")]), Document("b", [Text("the lazy dog")])]
    got = model.encode(docs, "query", None)
    ref_model = model._model
    enc = model._tok(["a cat sits on the mat", "the lazy dog"], padding=True, return_tensors="pt")
    img = model._processor.image_processor([random_image(40, 40, 0)], return_tensors="pt")
    with torch.no_grad():
        ref = ref_model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                        pixel_values=img["pixel_values"]).text_embeds
    ref = ref.numpy() / np.linalg.norm(ref.numpy(), axis=1, keepdims=True)
    assert got.shape == (2, 16) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, atol=1e-5)


def test_image_and_fusion(model, media):
    a, b = media.put_image(random_image(50, 40, 1)), media.put_image(random_image(64, 48, 2))
    img_a = model.encode([Document("ia", [a])], "document", media)[0]
    img_b = model.encode([Document("ib", [b])], "document", media)[0]
    txt = model.encode([Document("t", [Text("a cat")])], "document", media)[0]
    fused = model.encode([Document("f", [Text("a cat"), a, b])], "document", media)[0]
    expected = txt + img_a + img_b
    np.testing.assert_allclose(fused, expected / np.linalg.norm(expected), atol=1e-5)
    assert abs(np.linalg.norm(fused) - 1) < 1e-5
    assert not np.allclose(img_a, img_b)


def test_batch_invariance_and_errors(model, media):
    a = media.put_image(random_image(30, 30, 3))
    docs = [Document(f"d{i}", [Text("word " * (i + 1))] + ([a] if i % 2 else [])) for i in range(5)]
    together = model.encode(docs, "document", media)
    alone = np.stack([model.encode([d], "document", media)[0] for d in docs])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    with pytest.raises(EncodeError, match="d1"):
        model.encode([docs[1]], "document", None)


def test_budget_truncation_never_cut_by_tokenizer(model):
    long = Text("the quick brown fox jumps over the lazy dog " * 40)
    kept, report = middle_truncate([long], model.card.max_tokens, model.budget_tokenizer(), model.visual_tokens)
    assert report.truncated
    enc = model._tok(kept[0].text, truncation=False)
    assert len(enc["input_ids"]) <= 77


def test_registry_local_folder(clip_dir):
    m = load_model(str(clip_dir), device="cpu")
    assert isinstance(m, DualEncoderModel)
    assert m.card.revision.startswith("local-")


def test_attn_implementation_is_honoured_or_refused(clip_dir):
    docs = [Document("a", [Text("a cat sits on the mat")]), Document("b", [Text("the lazy dog")])]
    default = DualEncoderModel(model_path=str(clip_dir), device="cpu")
    eager = DualEncoderModel(model_path=str(clip_dir), device="cpu", attn_implementation="eager")
    assert eager._model.config._attn_implementation == "eager"
    assert eager._model.text_model.config._attn_implementation == "eager"  # the towers, not only the wrapper
    assert "Attention: eager." in eager.card.notes
    assert default._model.config._attn_implementation != "eager"  # so the request above changed something
    np.testing.assert_allclose(eager.encode(docs, "query", None), default.encode(docs, "query", None), atol=1e-5)
    with pytest.raises(ValueError, match=r"--attn-implementation 'bogus' is not available for this model") as caught:
        DualEncoderModel(model_path=str(clip_dir), device="cpu", attn_implementation="bogus")
    assert "\n" not in str(caught.value)
    # the registry path (what `mmbench run --model PATH --attn-implementation X` takes) passes it on
    loaded = load_model(str(clip_dir), device="cpu", attn_implementation="eager")
    assert loaded._model.config._attn_implementation == "eager"


@pytest.fixture(scope="module")
def siglip_dir(tmp_path_factory):
    from tiny_models import build_siglip

    return build_siglip(tmp_path_factory.mktemp("siglip") / "tiny-siglip")


def test_siglip_text_is_padded_to_its_window_and_matches_the_reference(siglip_dir, media):
    """SigLIP's text tower was trained on text padded to the full window, without an attention mask."""
    model = DualEncoderModel(model_path=str(siglip_dir), device="cpu")
    assert model.card.family == "dual-encoder:siglip" and model.card.settings["pad_to_max_length"] is True
    docs = [Document("a", [Text("a cat sits on the mat")]), Document("b", [Text("the lazy dog")])]
    got = model.encode(docs, "query", None)
    ids = model._tok([d.text for d in docs], padding="max_length", max_length=16, truncation=True,
                     return_tensors="pt")["input_ids"]
    assert ids.shape == (2, 16)
    with torch.no_grad():
        out = model._model.get_text_features(input_ids=ids)
    ref = (out if hasattr(out, "norm") else out.pooler_output).numpy()
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    np.testing.assert_allclose(got, ref, atol=1e-5)
    image = media.put_image(random_image(40, 30, 1))
    assert model.encode([Document("i", [image])], "document", media).shape == (1, model.card.dim)
    eager = DualEncoderModel(model_path=str(siglip_dir), device="cpu", attn_implementation="eager")
    assert eager._model.vision_model.config._attn_implementation == "eager"
    np.testing.assert_allclose(eager.encode(docs, "query", None), got, atol=1e-5)


def test_a_batch_prepared_ahead_forwards_to_encodes_vectors(model, media):
    """The local executor prepares the next batch (tokens, image chunks) before this one's forward pass."""
    a, b = media.put_image(random_image(30, 30, 4)), media.put_image(random_image(20, 40, 5))
    first = [Document("t", [Text("a cat")]), Document("i", [a]), Document("f", [Text("a dog"), a, b])]
    second = [Document("only-image", [b]), Document("empty", [])]
    ready_first, ready_second = model.prepare(first, "document", media), model.prepare(second, "document", media)
    assert np.array_equal(model.encode_prepared(ready_first), model.encode(first, "document", media))
    assert np.array_equal(model.encode_prepared(ready_second), model.encode(second, "document", media))
    assert model.encode([], "document", media).shape == (0, model.card.dim)
