"""GME against mteb 2.26's wrapper (GME's published recipe), run on transformers 5 through tests/mteb_compat.py.

The default (`mmlongembed` protocol) must give the recipe's vectors wherever the two protocols agree
(same image bounds, no cut): a text document and an image document, whose image tokens take the
recipe's 1-D positions. `protocol=mteb` must give mteb's wrapper's vectors as mteb runs it (4..1280
image tokens, prompts cut at 1800 tokens), a long document included. Inputs the recipe's prompt cannot
take are compared on the recipe's processor and forward with mmbench's prompt form: several images
interleaved with text (in reading order), and a video (its features scattered at the video tokens, as
the recipe's commented-out video branch does), both under the recipe's 1-D positions.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mteb")

from mmbench.data.documents import Document, Text  # noqa: E402
from mmbench.data.media import MediaStore  # noqa: E402
from mmbench.models.qwen_vl import QwenVLEmbedder  # noqa: E402
from mmbench.models.qwen_vl_presets import PRESETS  # noqa: E402
from mmbench.models.templates import GME, IMAGE_IN_VISION, VIDEO_IN_VISION  # noqa: E402
from mmbench.results.protocol import join_problems, protocol_id, protocol_record  # noqa: E402
from mteb_compat import mteb_gme  # noqa: E402
from tiny_models import build_qwen2vl, random_image  # noqa: E402

QUERY = GME.query_instruction


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("gme")
    path = build_qwen2vl(root / "q2")
    store = MediaStore(root / "media")
    # 448x448 is on the 28-px grid at exactly 256 tokens: neither protocol resizes it; 100x70 is resized
    refs = {"grid": store.put_image(random_image(448, 448, 1)), "small": store.put_image(random_image(100, 70, 2))}
    return path, store, refs


@pytest.fixture(scope="module")
def mp():
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


def _mteb(mp, path, texts, images, instruction=None, **kw):
    wrapper = mteb_gme(mp, str(path), **kw)
    with torch.inference_mode():
        return wrapper.model.embed(texts=texts, images=images, device="cpu", instruction=instruction).numpy()


def _gme(path, **kw):
    return QwenVLEmbedder(PRESETS["gme-2b"], model_path=str(path), context=4096, dtype="float32", device="cpu", **kw)


def test_default_gives_the_recipes_vectors_on_text_and_image_documents(setup, mp):
    path, store, refs = setup
    img = store.load_image(refs["grid"].ref)
    # the recipe as GME's authors publish it: their bounds (256..1280 tokens), no cut below the window
    ref = _mteb(mp, path, ["a cat sits on the mat", None, "the dog sleeps"], [None, None, None], QUERY,
                min_image_tokens=256, max_length=4096)
    ref_img = _mteb(mp, path, [None], [img], None, min_image_tokens=256, max_length=4096)
    ref_both = _mteb(mp, path, ["the dog sleeps"], [img], None, min_image_tokens=256, max_length=4096)
    gme = _gme(path)
    assert gme.card.settings["positions"] == "sequential"
    got_q = gme.encode([Document("q", [Text("a cat sits on the mat")])], "query", store)
    got_d = gme.encode([Document("i", [refs["grid"]]), Document("b", [Text("the dog sleeps"), refs["grid"]])],
                       "document", store)
    np.testing.assert_allclose(got_q[0], ref[0], atol=1e-5)
    np.testing.assert_allclose(got_d[0], ref_img[0], atol=1e-5)   # image tokens at 1-D positions, as the recipe
    np.testing.assert_allclose(got_d[1], ref_both[0], atol=1e-5)  # image with text: image first, as the recipe
    # the other choice: the backbone's 3-D M-RoPE positions differ on images only (another setup)
    mrope = _gme(path, positions="mrope")
    np.testing.assert_allclose(mrope.encode([Document("q", [Text("a cat sits on the mat")])], "query", store)[0],
                               ref[0], atol=1e-5)
    other = mrope.encode([Document("i", [refs["grid"]])], "document", store)[0]
    assert np.abs(other - ref_img[0]).max() > 1e-4
    assert mrope.card.settings["positions"] == "mrope"
    with pytest.raises(ValueError, match="positions must be one of"):
        _gme(path, positions="2d")


def test_mteb_protocol_gives_mtebs_vectors(setup, mp):
    path, store, refs = setup
    small = store.load_image(refs["small"].ref)
    long_text = " ".join(["the needle is hidden somewhere in a very long haystack of ordinary words"] * 200)
    texts = ["a cat sits on the mat", long_text]
    ref_q = _mteb(mp, path, texts[:1], [None], QUERY)
    ref_long = _mteb(mp, path, texts[1:], [None], None)
    ref_img = _mteb(mp, path, [None], [small], None)       # 100x70: 2x4 tokens under mteb's 4-token minimum
    ref_both = _mteb(mp, path, ["a small image"], [small], None)
    gme = QwenVLEmbedder(PRESETS["gme-2b"], model_path=str(path), context=4096, dtype="float32", device="cpu",
                         protocol="mteb")
    got_q = gme.encode([Document("q", [Text(texts[0])])], "query", store)
    got = gme.encode([Document("long", [Text(long_text)]), Document("i", [refs["small"]]),
                      Document("b", [Text("a small image"), refs["small"]])], "document", store)
    np.testing.assert_allclose(got_q[0], ref_q[0], atol=1e-5)
    np.testing.assert_allclose(got[0], ref_long[0], atol=1e-5)  # cut at 1800 tokens at the right, as mteb
    np.testing.assert_allclose(got[1], ref_img[0], atol=1e-5)
    np.testing.assert_allclose(got[2], ref_both[0], atol=1e-5)
    info = {r["id"]: r for r in gme.last_encode_info}
    assert info["long"]["tokens"] == 1800 and any("cut at 1800" in a for a in info["long"]["adaptations"])
    assert not info["b"]["adaptations"] or all("cut" not in a for a in info["b"]["adaptations"])
    # the default protocol reads the whole document: another vector
    default = _gme(path).encode([Document("long", [Text(long_text)])], "document", store)[0]
    assert np.abs(default - ref_long[0]).max() > 1e-4


def test_protocols_have_their_own_ids_and_are_never_joined(setup):
    path, _, _ = setup
    sel = {"limit": None, "n_items": 10, "n_items_total": 10, "items_hash": "x"}
    cards = {name: _gme(path, **opts).card for name, opts in
             (("default", {}), ("mteb", {"protocol": "mteb"}), ("mrope", {"positions": "mrope"}))}
    records = {name: protocol_record(card.identity(), sel) for name, card in cards.items()}
    ids = {name: protocol_id(rec) for name, rec in records.items()}
    assert len(set(ids.values())) == 3
    assert records["default"]["setup"]["protocol"] == "mmlongembed" and records["mteb"]["setup"]["protocol"] == "mteb"
    for other in ("mteb", "mrope"):
        problems = join_problems([("a", "gme-2b", "vg", records["default"]), ("b", "gme-2b", "vg", records[other])])
        assert problems and "setup of gme-2b differs" in problems[0]
    assert "setup.visual_budget.positions" in join_problems(
        [("a", "gme-2b", "vg", records["default"]), ("b", "gme-2b", "vg", records["mrope"])])[0]
    assert cards["mteb"].settings["max_length"] == 1800 and cards["mteb"].settings["vision"]["min_pixels"] == 4 * 784
    with pytest.raises(ValueError, match="has no protocol 'mtb'; its protocols: mmlongembed, mteb"):
        _gme(path, protocol="mtb")


# The recipe's prompt (mteb's `embed`, GME's gme_inference.py): system turn, visuals then text in the user turn.
RECIPE = "<|im_start|>system\n{}<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n<|endoftext|>"
DOC_SYSTEM = "You are a helpful assistant."


def _recipe_forward(wrapper, prompt, images=None, videos=None):
    """The recipe's forward on its own processor's output for `prompt`; a video's features are scattered at the video
    tokens as the recipe's commented-out video branch does (GME's code runs images only). Video frames are given at
    the size mmbench's video bounds choose (the recipe's processor would apply its image minimum to them)."""
    model = wrapper.model
    kw = {"videos": videos, "do_sample_frames": False, "do_resize": False} if videos else {}
    inputs = model.processor(text=[prompt], images=images, padding=True, return_tensors="pt", **kw)
    with torch.inference_mode():
        if not videos:
            return model.forward(**inputs).numpy()
        embeds = model.base.model.embed_tokens(inputs["input_ids"])
        feats = model.base.visual(inputs["pixel_values_videos"], grid_thw=inputs["video_grid_thw"])
        embeds[inputs["input_ids"] == model.base.config.video_token_id] = feats
        return model.forward(attention_mask=inputs["attention_mask"], inputs_embeds=embeds).numpy()


def test_interleaved_documents_give_the_recipes_vectors(setup, mp):
    path, store, refs = setup
    second = store.put_image(random_image(448, 448, 3))
    pil = [store.load_image(refs["grid"].ref), store.load_image(second.ref)]
    recipe = mteb_gme(mp, str(path), min_image_tokens=256, max_length=4096)
    one = Document("one", [Text("a cat"), refs["grid"], Text("on the mat")])
    two = Document("two", [Text("a cat"), refs["grid"], Text("and a dog"), second])
    got = _gme(path).encode([one, two], "document", store)
    # one image amid text: moved first, the texts joined by a newline, as the recipe takes one image and one text
    with torch.inference_mode():
        ref_one = recipe.model.embed(texts=["a cat\non the mat"], images=[pil[0]], device="cpu").numpy()
    np.testing.assert_allclose(got[0], ref_one[0], atol=1e-5)
    # several images: mmbench's reading order (no reference form), run through the recipe's processor and forward
    user = f"a cat{IMAGE_IN_VISION}and a dog{IMAGE_IN_VISION}"
    np.testing.assert_allclose(got[1], _recipe_forward(recipe, RECIPE.format(DOC_SYSTEM, user), images=pil)[0],
                               atol=1e-5)
    mrope = _gme(path, positions="mrope").encode([two], "document", store)[0]
    assert np.abs(mrope - got[1]).max() > 1e-4


def test_video_gives_the_recipes_vectors(setup, mp):
    from mmbench.data.documents import Video

    path, store, _ = setup
    # 336x336 frames: 144 tokens each, on the grid within the video bounds (128..768), so neither side resizes
    pil = [random_image(336, 336, 30 + i) for i in range(3)]
    frames = tuple(store.put_image(p).ref for p in pil)
    recipe = mteb_gme(mp, str(path), min_image_tokens=256, max_length=4096)
    gme = _gme(path, video=True)
    for n in (2, 3):  # an even count, and an odd one the processor pads with the last frame
        got = gme.encode([Document("v", [Text("a clip"), Video(frames[:n], 1.0, 336, 336)])], "document", store)
        clip = np.stack([np.asarray(p) for p in pil[:n]])
        ref = _recipe_forward(recipe, RECIPE.format(DOC_SYSTEM, VIDEO_IN_VISION + "a clip"), videos=[clip])
        np.testing.assert_allclose(got[0], ref[0], atol=1e-5, err_msg=f"{n} frames")


def test_padding_and_upscaling_are_stated_and_counted(setup):
    from mmbench.data.documents import Video
    from mmbench.running.runner import adapted_counts

    path, store, refs = setup
    frames = tuple(store.put_image(random_image(56, 56, 20 + i)).ref for i in range(3))
    gme = _gme(path, video=True)
    assert "odd_frame_counts" in gme.card.settings["visual_handling"]
    docs = [Document("odd", [Text("a clip"), Video(frames, 1.0, 56, 56)]), Document("even", [Video(frames[:2], 1.0,
            56, 56)]), Document("small", [refs["small"]]), Document("grid", [refs["grid"]]),
            Document("text", [Text("words")])]
    gme.encode(docs, "document", store)
    kinds = {r["id"]: r["adapted"] for r in gme.last_encode_info}
    assert kinds["odd"] == ["visual_moved_first", "odd_frames_padded", "upscaled_to_minimum"]
    assert kinds["even"] == ["upscaled_to_minimum"] and kinds["small"] == ["upscaled_to_minimum"]
    assert kinds["grid"] == [] and kinds["text"] == []
    records = [{"model_info": r} for r in gme.last_encode_info] + [{"model_info": None}]
    assert adapted_counts(records) == {"documents_adapted": {"odd_frames_padded": 1, "upscaled_to_minimum": 3,
                                                              "visual_moved_first": 1}}
    assert adapted_counts(records[-2:]) == {}


def test_cli_protocol_mteb_runs_apart_and_compare_refuses_to_join(setup, vg_tiny, tmp_path, capsys):
    from mmbench.cli import main

    path, _, _ = setup
    common = ["run", "--task", "visual_grounding", "--model", "gme-2b", "--model-path", str(path), "--data",
              str(vg_tiny), "--limit", "3", "--dtype", "float32", "--batch-tokens", "4096", "--quiet"]
    assert main([*common, "--output", str(tmp_path / "default")]) == 0
    assert main([*common, "--protocol", "mteb", "--output", str(tmp_path / "mteb")]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "default"), str(tmp_path / "mteb"), "--resamples", "20",
                 "--ci-resamples", "20"]) == 2
    err = capsys.readouterr().err
    assert "different protocols" in err and "setup.protocol" in err and "max_length" in err
    assert main(["run", "--task", "visual_grounding", "--model", "minilm", "--data", str(vg_tiny),
                 "--protocol", "mteb"]) == 2
    assert "has one protocol only" in capsys.readouterr().err


def test_the_summary_prints_the_adaptation_counts():
    import pandas as pd

    from mmbench.results.store import RunResults
    from mmbench.results.summary import format_summary

    pq = pd.DataFrame({"precision_at_1": [1.0, 0.0], "ranked_ids": [["a"], ["b"]], "relevant_ids": [["a"], ["a"]]})
    seen = pd.DataFrame({"doc_id": ["a", "b"]})
    counts = {"odd_frames_padded": 2, "upscaled_to_minimum": 5}
    shown = format_summary(RunResults(pq, seen, {"mmbench": {"documents_adapted": counts}}), ())
    assert "note: documents adapted to the model: odd_frames_padded 2, upscaled_to_minimum 5" in shown
    assert "adapted" not in format_summary(RunResults(pq, seen, {"mmbench": {}}), ())
