"""E5-V: prompts and pooling equal mteb's wrapper (an independent reference), on a tiny LLaVA-NeXT built offline."""
from __future__ import annotations

import numpy as np
import pytest

from mmbench.data.documents import Document, Text
from mmbench.data.media import MediaStore
from mmbench.models.e5v import E5VEmbedder, prompt_for
from tiny_e5v import build_e5v
from tiny_models import random_image


@pytest.fixture(scope="module")
def tiny_e5v(tmp_path_factory):
    return build_e5v(tmp_path_factory.mktemp("e5v") / "model")


@pytest.fixture(scope="module")
def mteb_e5v(tiny_e5v):
    pytest.importorskip("mteb")
    from mteb.models.model_implementations.e5_v import E5VModel

    model = E5VModel(model_name=str(tiny_e5v), revision=None, device="cpu")
    model.processor = _TextFirst(model.processor)
    return model


class _TextFirst:
    """mteb's wrapper calls the processor as processor(texts, images) (the transformers 4 order); transformers 5
    takes images first, so its positional call is mapped back to the keywords it means."""

    def __init__(self, processor):
        self.processor = processor

    def __call__(self, text, images=None, **kw):
        return self.processor(text=text, images=images, **kw)


def test_prompts_are_mtebs_golden_strings(mteb_e5v, tmp_path):
    media = MediaStore(tmp_path / "m")
    img = media.put_image(random_image(16, 16, 0))
    assert prompt_for([Text("A dog runs.")])[0] == mteb_e5v.text_prompt.replace("<sent>", "A dog runs.")
    assert prompt_for([img])[0] == mteb_e5v.img_prompt
    assert prompt_for([Text("A dog runs.")])[0] == (
        "<|start_header_id|>user<|end_header_id|>\n\nA dog runs.\nSummary above sentence in one word: "
        "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n \n")
    mixed, n = prompt_for([Text("look"), img, Text("here")])
    assert n == 1 and "look\n<image>\nhere\nSummary above image and sentence in one word: " in mixed


def test_vectors_equal_mtebs_for_text_and_images(tiny_e5v, mteb_e5v, tmp_path):
    ours = E5VEmbedder(model_path=str(tiny_e5v))
    media = MediaStore(tmp_path / "m")
    pics = [random_image(40, 24, 1), random_image(20, 36, 2)]
    refs = [media.put_image(p) for p in pics]
    texts = ["the cat sits on the mat", "a quick brown fox"]
    got_t = ours.encode([Document(f"t{i}", [Text(t)]) for i, t in enumerate(texts)], "query", media)
    got_i = ours.encode([Document(f"i{i}", [r]) for i, r in enumerate(refs)], "document", media)
    # mteb's wrapper takes the last position, so one input per batch keeps padding out of its way
    ref_t = mteb_e5v.get_text_embeddings([{"text": [t]} for t in texts], show_progress_bar=False).float().numpy()
    ref_i = mteb_e5v.get_image_embeddings([{"image": [media.load_image(r.ref).convert("RGB")]} for r in refs],
                                          show_progress_bar=False).float().numpy()
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)
    np.testing.assert_allclose(got_t, unit(ref_t), atol=1e-5)
    np.testing.assert_allclose(got_i, unit(ref_i), atol=1e-5)


def test_batch_padding_does_not_change_vectors_and_budget_matches_processor(tiny_e5v, tmp_path):
    model = E5VEmbedder(model_path=str(tiny_e5v))
    media = MediaStore(tmp_path / "m")
    img = media.put_image(random_image(40, 24, 3))
    docs = [Document("short", [Text("hi")]), Document("long", [Text("look at this"), img, Text("and more words")])]
    together = model.encode(docs, "document", media)
    alone = np.vstack([model.encode([d], "document", media) for d in docs])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    ids = model.processor(text=[prompt_for([img])[0]], images=[media.load_image(img.ref)],
                          return_tensors="pt")["input_ids"]
    assert model.visual_tokens(40, 24) == int((ids == model.processor.image_token_id).sum()) + 1
    assert model.card.dim == 64 and model.card.max_tokens < 8192 and "video" in model.card.modalities


def test_a_batch_prepared_ahead_forwards_to_encodes_vectors(tiny_e5v, tmp_path):
    model = E5VEmbedder(model_path=str(tiny_e5v))
    media = MediaStore(tmp_path / "m")
    ref = media.put_image(random_image(40, 24, 3))
    first = [Document("t", [Text("the cat sits on the mat")]), Document("i", [ref])]
    second = [Document("u", [Text("a quick brown fox")])]
    ready_first, ready_second = model.prepare(first, "document", media), model.prepare(second, "query", media)
    assert np.array_equal(model.encode_prepared(ready_first), model.encode(first, "document", media))
    assert np.array_equal(model.encode_prepared(ready_second), model.encode(second, "query", media))
    assert model.encode([], "document", media).shape == (0, model.card.dim)
