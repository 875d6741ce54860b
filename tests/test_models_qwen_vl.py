"""Qwen-VL embedders: golden template strings, smart resize, and tiny random Qwen2-VL / Qwen3-VL forwards."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mmbench.data.documents import Document, Image, Text, Video  # noqa: E402
from mmbench.data.media import MediaStore  # noqa: E402
from mmbench.models.base import EncodeError  # noqa: E402
from mmbench.models.qwen_vl import QwenVLEmbedder, resample_frames, smart_resize  # noqa: E402
from mmbench.models.qwen_vl_presets import PRESETS  # noqa: E402
from mmbench.models.registry import load_model  # noqa: E402
from mmbench.models.templates import GME, QWEN3_VL_EMBEDDING, VLM2VEC, render  # noqa: E402
from mmbench.data.truncation import middle_truncate  # noqa: E402
from tiny_models import build_qwen2vl, build_qwen3vl, random_image  # noqa: E402

IMG = Image("a.png", 100, 70)
IMG2 = Image("b.png", 60, 90)
VID = Video(("f0.png", "f1.png"), 1.0, 80, 60)
V = "<|vision_start|><|image_pad|><|vision_end|>"


# --- golden template strings ------------------------------------------------------------

def test_gme_golden():
    assert render([Text("a cat")], "query", GME).text == (
        "<|im_start|>system\nFind an image that matches the given text.<|im_end|>\n"
        "<|im_start|>user\na cat<|im_end|>\n<|im_start|>assistant\n<|endoftext|>")
    r = render([Text("a cat"), IMG], "document", GME)
    assert r.text == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                      f"<|im_start|>user\n{V}a cat<|im_end|>\n<|im_start|>assistant\n<|endoftext|>")
    assert r.reordered and r.visuals == [IMG]
    r = render([Text("one"), IMG, Text("two"), Text("three"), IMG2], "document", GME)
    assert f"user\none{V}two\nthree{V}<|im_end|>" in r.text and r.visuals == [IMG, IMG2] and not r.reordered


def test_qwen3_golden():
    assert render([IMG, Text("a cat")], "document", QWEN3_VL_EMBEDDING).text == (
        "<|im_start|>system\nRepresent the user's input.<|im_end|>\n"
        f"<|im_start|>user\n{V}a cat<|im_end|>\n<|im_start|>assistant\n")
    assert "system\nRetrieve images or text relevant to the user's query.<|im_end|>" in render(
        [Text("q")], "query", QWEN3_VL_EMBEDDING).text
    # the official script appends a period to an instruction that does not end in punctuation
    from dataclasses import replace

    tpl = replace(QWEN3_VL_EMBEDDING, query_instruction="Find the video")
    assert "system\nFind the video.<|im_end|>" in render([Text("q")], "query", tpl).text
    assert "user\nNULL<|im_end|>" in render([], "document", QWEN3_VL_EMBEDDING).text
    assert "user\n<|video_pad|>clip<|im_end|>" in render([Text("clip"), VID], "document", QWEN3_VL_EMBEDDING).text


def test_vlm2vec_golden():
    assert render([Text("a cat")], "query", VLM2VEC).text == (
        "Find me an everyday image that matches the given caption: a cat")
    assert render([IMG], "document", VLM2VEC).text == "<|image_pad|> Represent the given image."
    assert render([Text("a cat"), IMG], "document", VLM2VEC).text == (
        "<|image_pad|> Represent the given image. a cat")
    assert render([Text("plain text")], "document", VLM2VEC).text == "plain text"
    assert render([Text("x"), IMG, Text("y"), IMG2], "document", VLM2VEC).text == (
        "Represent the given image. x <|image_pad|> y <|image_pad|>")
    assert render([VID], "document", VLM2VEC).text == "<|video_pad|> Represent the given video."


def test_smart_resize_and_resample():
    assert smart_resize(70, 100, 28, 256 * 784, 1280 * 784)[0] * smart_resize(70, 100, 28, 256 * 784,
                                                                             1280 * 784)[1] >= 256 * 784
    h, w = smart_resize(3000, 4000, 28, 256 * 784, 1280 * 784)
    assert h % 28 == 0 and w % 28 == 0 and h * w <= 1280 * 784 and abs(w / h - 4 / 3) < 0.05
    assert smart_resize(64, 96, 32, 4 * 1024, 1800 * 1024) == (64, 96)
    with pytest.raises(ValueError, match="aspect"):
        smart_resize(10, 5000, 28, 1, 10 ** 9)
    frames, fps = resample_frames([f"f{i}" for i in range(8)], 4.0, 1.0)
    assert frames == ["f0", "f4"] and fps == 1.0
    assert resample_frames(["a", "b"], 1.0, 2.0) == (["a", "b"], 1.0)


def _previous_smart_resize(height, width, factor, min_pixels, max_pixels):
    """The hand-written resize mmbench used before it called qwen_vl_utils (kept here as the reference)."""
    import math
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def test_smart_resize_is_the_librarys_and_unchanged(monkeypatch):
    import qwen_vl_utils

    bounds = {(p.vision.factor, p.vision.min_pixels, p.vision.max_pixels) for p in PRESETS.values()}
    bounds |= {(p.vision.factor, p.vision.video_min_pixels, p.vision.video_max_pixels) for p in PRESETS.values()}
    rng = np.random.default_rng(0)
    sizes = [(int(h), int(w)) for h, w in rng.integers(1, 6000, size=(300, 2)) if max(h, w) / min(h, w) <= 200]
    sizes += [(1, 1), (28, 28), (27, 29), (480, 640), (1080, 1920), (30, 5999), (4000, 3000)]
    for factor, lo, hi in sorted(bounds):
        for h, w in sizes:
            assert smart_resize(h, w, factor, lo, hi) == _previous_smart_resize(h, w, factor, lo, hi), (h, w, factor)
    calls = []
    monkeypatch.setattr(qwen_vl_utils, "smart_resize", lambda *a, **k: calls.append(a) or (56, 84))
    assert smart_resize(50, 80, 28, 1, 10 ** 6) == (56, 84) and calls == [(50, 80, 28)]  # the library decides


# --- tiny models --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen")
    return {"q2": build_qwen2vl(root / "q2"), "q3": build_qwen3vl(root / "q3"), "root": root}


@pytest.fixture(scope="module")
def media(dirs):
    store = MediaStore(dirs["root"] / "media")
    imgs = [store.put_image(random_image(w, h, s)) for s, (w, h) in enumerate([(100, 70), (60, 90), (40, 40)])]
    frames = tuple(store.put_image(random_image(80, 60, 10 + i)).ref for i in range(4))
    return store, imgs, Video(frames, 2.0, 80, 60)


@pytest.fixture(scope="module")
def gme(dirs):
    return QwenVLEmbedder(PRESETS["gme-2b"], model_path=str(dirs["q2"]), context=2048, video=True)


@pytest.fixture(scope="module")
def qwen3(dirs):
    return load_model("qwen3-vl-embedding-2b", model_path=str(dirs["q3"]), context=2048, device="cpu",
                      dtype="float32", not_an_option=1)


def _docs(media):
    _, (a, b, c), vid = media
    return [Document("text", [Text("a cat sits on the mat")]), Document("img", [a]),
            Document("inter", [Text("the dog"), a, Text("sleeps near"), b, Text("the door"), c]),
            Document("video", [Text("a video"), vid])]


def test_gme_tiny_forward_matches_reference(gme, media, dirs):
    from transformers import Qwen2VLForConditionalGeneration

    store, (a, b, c), vid = media
    docs = _docs(media)
    got = gme.encode(docs, "document", store)
    assert got.shape == (4, 64) and np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
    assert len({tuple(np.round(v, 4)) for v in got}) == 4
    # independent reference: the full generation model's last hidden state at the final <|endoftext|>, with the
    # 1-D positions GME's recipe gives every token (test_models_gme_parity.py compares with the recipe itself)
    ref_model = Qwen2VLForConditionalGeneration.from_pretrained(dirs["q2"]).eval()
    prompt = render(docs[1].segments, "document", gme.preset.template).text
    assert prompt.endswith("<|endoftext|>")
    img = store.load_image(a.ref).resize((gme.image_size(100, 70)[1], gme.image_size(100, 70)[0]), 3)
    enc = gme.processor(text=[prompt], images=[img], do_resize=False, return_tensors="pt")
    sequential = torch.arange(enc["input_ids"].shape[1])[None]
    with torch.no_grad():
        h = ref_model(**enc, position_ids=sequential, output_hidden_states=True).hidden_states[-1][0, -1]
    np.testing.assert_allclose(got[1], (h / h.norm()).numpy(), atol=1e-5)
    # every image costs exactly what visual_tokens says: its pads plus vision start/end
    ids = enc["input_ids"][0].tolist()
    n_pad = ids.count(gme.processor.tokenizer.convert_tokens_to_ids("<|image_pad|>"))
    assert n_pad + 2 == gme.visual_tokens(100, 70) and n_pad >= 256  # GME: at least 256 image tokens
    info = {r["id"]: r for r in gme.last_encode_info}
    assert info["video"]["frames"] == 4 and info["inter"]["tokens"] > info["img"]["tokens"]


def test_batch_size_invariance(gme, qwen3, media):
    store = media[0]
    docs = _docs(media)
    for model in (gme, qwen3):
        together = model.encode(docs, "document", store)
        alone = np.stack([model.encode([d], "document", store)[0] for d in docs])
        np.testing.assert_allclose(together, alone, atol=2e-4)
        pair = model.encode(docs[2:0:-1], "query", store)
        np.testing.assert_allclose(pair, np.stack([model.encode([d], "query", store)[0] for d in docs[2:0:-1]]),
                                   atol=2e-4)


def test_prepared_ahead_gives_encodes_vectors_and_its_own_records(gme, media):
    """The local executor prepares batch i + 1 before batch i's forward pass: each prepared batch still forwards to
    `encode`'s vectors, and the records `last_encode_info` shows are the forwarded batch's, not the prepared one's."""
    store = media[0]
    docs = _docs(media)
    first, second = docs[:2], docs[2:]
    ready_first = gme.prepare(first, "document", store)
    ready_second = gme.prepare(second, "document", store)
    got_first = gme.encode_prepared(ready_first)
    assert [r["id"] for r in gme.last_encode_info] == ["text", "img"]
    got_second = gme.encode_prepared(ready_second)
    assert [r["id"] for r in gme.last_encode_info] == ["inter", "video"]
    assert np.array_equal(got_first, gme.encode(first, "document", store))
    assert np.array_equal(got_second, gme.encode(second, "document", store))
    assert gme.encode([], "document", store).shape == (0, 64)


def test_qwen3_video_and_budget(qwen3, media):
    store, (a, _, _), vid = media
    vecs = qwen3.encode([Document("v", [vid, Text("clip")]), Document("i", [a])], "document", store)
    assert vecs.shape == (2, 64)
    info = qwen3.last_encode_info
    assert info[0]["frames"] == 2 and any("resampled 2->1" in x for x in info[0]["adaptations"])
    # the processor expanded the bare video pad with timestamps, without doubling vision_start
    prompt = render([vid, Text("clip")], "document", qwen3.preset.template).text
    frames = [np.asarray(store.load_image(r).resize((96, 64))) for r in vid.frames[::2]]
    from transformers.video_utils import VideoMetadata

    enc = qwen3.processor(text=[prompt], videos=[np.stack(frames)], do_resize=False, do_sample_frames=False,
                          video_metadata=[VideoMetadata(fps=1.0, frames_indices=[0, 1], total_num_frames=2)],
                          cap_pixels_per_frame=False)
    text = qwen3.processor.tokenizer.decode(enc["input_ids"][0])
    assert "<0.5 seconds><|vision_start|><|video_pad|>" in text and "<|vision_start|><|vision_start|>" not in text
    assert "<|vision_start|><0" not in text
    # exact image budget at factor 32: 100x70 -> 96x64 -> 3*2 tokens + start/end
    assert qwen3.image_size(100, 70) == (64, 96)
    assert qwen3.card.modalities == frozenset({"text", "image", "video"})
    assert qwen3.card.settings["vision"]["factor"] == 32 and qwen3.card.settings["context"] == 2048


def test_truncation_keeps_window(dirs, media):
    store, (a, b, c), _ = media
    model = QwenVLEmbedder(PRESETS["vlm2vec-2b"], model_path=str(dirs["q2"]), context=300)
    doc = Document("long", [Text("the needle is hidden in a very long haystack " * 40), a, b,
                            Text("of ordinary words " * 40), c])
    kept, report = middle_truncate(doc.segments, model.card.max_tokens, model.budget_tokenizer(),
                                   model.visual_tokens)
    assert report.truncated and report.tokens_after <= model.card.max_tokens
    model.encode([Document("long", kept)], "document", store)
    assert model.last_encode_info[0]["tokens"] <= 300
    with pytest.raises(EncodeError, match="window"):
        model.encode([doc], "document", store)
    with pytest.raises(EncodeError, match="video"):
        model.encode([Document("v", [media[2]])], "document", store)


def test_reload_and_errors(dirs, gme, media, tmp_path):
    store = media[0]
    again = QwenVLEmbedder(PRESETS["gme-2b"], model_path=str(dirs["q2"]), context=2048, video=True)
    docs = _docs(media)[:3]
    np.testing.assert_allclose(again.encode(docs, "query", store), gme.encode(docs, "query", store), atol=1e-6)
    assert again.card.identity() == gme.card.identity()
    with pytest.raises(ValueError, match="another Qwen-VL generation"):
        QwenVLEmbedder(PRESETS["gme-2b"], model_path=str(dirs["q3"]))
    (tmp_path / "lora").mkdir()
    (tmp_path / "lora" / "adapter_config.json").write_text("{}")
    with pytest.raises(ValueError, match="LoRA"):
        QwenVLEmbedder(PRESETS["vlm2vec-2b"], model_path=str(tmp_path / "lora"))
    with pytest.raises(ValueError, match="model-path"):
        load_model("embed-rl")


def test_registry_lists_every_adapter():
    from mmbench.models.registry import model_specs

    specs = {s.name: s for s in model_specs()}
    for name in PRESETS:
        assert specs[name].context == PRESETS[name].context
        assert ("video" in specs[name].modalities) == PRESETS[name].video
    assert {"openai-embeddings", "gemini-embedding"} <= set(specs)


def test_video_budget_counts_temporal_groups(gme, qwen3, media):
    """A video costs one token group per two frames, not a group per frame; the budget bounds reality."""
    store, _, vid = media
    groups = -(-len(vid.frames) // 2)
    for model in (gme, qwen3):
        model.encode([Document("t", [Text("a video")]), Document("v", [Text("a video"), vid])], "document", store)
        info = {r["id"]: r for r in model.last_encode_info}
        actual = info["v"]["tokens"] - info["t"]["tokens"]
        budget = model.video_tokens(len(vid.frames), vid.width, vid.height)
        assert 0 < actual <= budget
        fh, fw = model.frame_size(vid.width, vid.height)
        pads_per_group = (fh // model.preset.vision.factor) * (fw // model.preset.vision.factor)
        assert budget <= groups * (pads_per_group + 12)  # not one group per frame
    # GME keeps every frame (no resampling), so its budget is tight up to the per-group allowance
    gme.encode([Document("t", [Text("a video")]), Document("v", [Text("a video"), vid])], "document", store)
    info = {r["id"]: r for r in gme.last_encode_info}
    assert gme.video_tokens(len(vid.frames), vid.width, vid.height) - (info["v"]["tokens"] - info["t"]["tokens"]) \
        <= groups * 12


def test_rzen_golden():
    from mmbench.models.templates import RZEN

    sys_turn = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    assert render([Text("a cat")], "query", RZEN).text == (
        f"{sys_turn}<|im_start|>user\nFind me an everyday image that matches the given caption: a cat<|im_end|>\n"
        "<|im_start|>assistant\n<|endoftext|>")
    # the instruction follows the leading images; documents carry no instruction
    assert f"user\n{V}Find me an everyday image that matches the given caption: a cat<|im_end|>" in render(
        [Text("a cat"), IMG], "query", RZEN).text
    assert render([IMG, Text("a dog")], "document", RZEN).text == (
        f"{sys_turn}<|im_start|>user\n{V}a dog<|im_end|>\n<|im_start|>assistant\n<|endoftext|>")
    # frames as images: one image placeholder per frame, in the official visual-first position
    assert f"user\n{V}{V}a clip<|im_end|>" in render([Text("a clip"), VID], "document", RZEN,
                                                     video_as_images=True).text


def test_video_frames_as_images(dirs, media):
    """Ops-MM / RzenEmbed take a video as its frame images: same vectors as the explicit image document,
    and the budget counts every frame's full image tokens."""
    store, _, vid = media
    ops = QwenVLEmbedder(PRESETS["ops-mm-embedding-2b"], model_path=str(dirs["q2"]), context=4096)
    assert "video" in ops.card.modalities and ops.card.settings["video_input"] == "frames as images"
    as_video = ops.encode([Document("v", [vid])], "document", store)
    frames = [Image(r, vid.width, vid.height) for r in vid.frames]
    as_images = ops.encode([Document("i", frames)], "document", store)
    np.testing.assert_allclose(as_video, as_images, atol=1e-5)
    assert ops.last_encode_info[0]["frames"] == 0
    ops.encode([Document("t", [Text("a video")]), Document("v", [Text("a video"), vid])], "document", store)
    info = {r["id"]: r for r in ops.last_encode_info}
    assert info["v"]["frames"] == 4 and any("4 images" in a for a in info["v"]["adaptations"])
    assert info["v"]["tokens"] - info["t"]["tokens"] == ops.video_tokens(4, vid.width, vid.height) \
        == 4 * ops.visual_tokens(vid.width, vid.height)
    rzen = QwenVLEmbedder(PRESETS["rzen-embed"], model_path=str(dirs["q2"]), context=4096)
    rzen.encode([Document("t", [Text("a video")]), Document("v", [Text("a video"), vid])], "query", store)
    info = {r["id"]: r for r in rzen.last_encode_info}
    per_frame = (info["v"]["tokens"] - info["t"]["tokens"]) / 4 - 2  # minus vision start/end
    assert 160 <= per_frame <= 180  # RzenEmbed's video frame bounds, not its image bounds
    assert info["v"]["tokens"] - info["t"]["tokens"] == rzen.video_tokens(4, vid.width, vid.height)


def test_a_view_of_many_text_segments_fits_the_window_once_rendered(gme):
    """The Logical Summarization sample's document c-9533c044628a had 47 text segments in the tiny GME's 2,048-token
    view and rendered to 2,053 tokens: the budget did not pay for the "\n" the template puts between two texts, and
    the safety margin covered 16 + window/100 of them. Failed (EncodeError in prepare) before the joins were counted."""
    from mmbench.running.views import model_view

    doc = Document("paragraphs", [Text(f"the needle is hidden in paragraph {i} of the haystack") for i in range(400)])
    view, record = model_view(doc, gme)
    assert record.truncated and len(view.segments) > 50
    info = {role: gme.prepare([view], role, None).info[0]["tokens"] for role in ("query", "document")}
    assert max(info.values()) <= 2048
    # the truncation's count is what the rendered prompt costs: the content's tokens and joins, the template around
    assert gme.rendered_tokens(view.segments) == max(info.values())
    assert max(info.values()) - record.seen_tokens <= gme.preset.context - gme.card.max_tokens


def _random_text(rng) -> str:
    """Words of letters, digits, punctuation, CJK and emoji, with spaces or newlines at either edge now and then."""
    alphabet = ["needle", "hay", "stack", "Ünïcode", "中文字", "🙂", "...", "?!", "'s", "42", "x.y", "--", "\t"]
    words = [rng.choice(alphabet) for _ in range(rng.choice([0, 1, 3, 8, 30, 120]))]
    text = "".join(w + rng.choice([" ", " ", "", "\n", ". "]) for w in words)
    return rng.choice(["", " ", "\n"]) + text + rng.choice(["", " ", "\n", "\n\n"])


@pytest.mark.parametrize("window", [512, 2048])
def test_random_views_of_any_number_of_segments_fit_the_window_once_rendered(dirs, media, window):
    """Documents of 1 to 400 text segments of random lengths (and a few images): the view `model_view` gives the tiny
    GME renders, in both roles, to at most the window, exactly the tokens `rendered_tokens` counts; a truncated view
    uses the window up to the margin. With the joins left uncounted (`text_join_tokens` 0) the re-truncation by
    the rendered excess still makes every view fit."""
    import random

    from mmbench.running.views import model_view

    store, imgs, _ = media
    model = QwenVLEmbedder(PRESETS["gme-2b"], model_path=str(dirs["q2"]), context=window)
    blind = QwenVLEmbedder(PRESETS["gme-2b"], model_path=str(dirs["q2"]), context=window)
    blind.text_join_tokens = lambda: 0   # type: ignore[method-assign]
    rng = random.Random(window)
    truncated = 0
    for trial in range(16):
        with_images = 0.03 if trial % 4 == 0 else 0.0
        segments = [imgs[rng.randrange(len(imgs))] if rng.random() < with_images else Text(_random_text(rng))
                    for _ in range(rng.choice([1, 2, 7, 47, 150, 400]))]
        doc = Document(f"d{trial}", segments)
        for m in (model, blind):
            view, record = model_view(doc, m)
            got = max(m.prepare([view], role, store).info[0]["tokens"] for role in ("query", "document"))
            assert got <= window, (trial, len(segments), got)
            assert got == m.rendered_tokens(view.segments)
            if m is model and record.truncated and not any(isinstance(s, Image) for s in segments):
                truncated += 1
                assert got >= m.card.max_tokens, (trial, got)
    assert truncated >= 4
