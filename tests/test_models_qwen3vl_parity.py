"""Qwen3-VL-Embedding (and Embed-RL, MMEmb-R1, which reuse it) against mteb 2.26's wrapper, on a tiny Qwen3-VL.

mteb runs the model through sentence-transformers; tests/mteb_compat.py writes the sentence-transformers
files and chat template a tiny folder lacks (stated there). Per input kind the vectors are equal (1e-5)
or the difference is named and tested:
- content order: sentence-transformers builds the user turn in the dataset's column order, so a text
  column ahead of the image column puts the text first; the authors' script and mmbench put visuals
  first;
- resizing: the authors' script resizes with qwen-vl-utils (PIL bicubic) and tells the processor not
  to, as mmbench does (equal pixel for pixel below); mteb's wrapper lets transformers 5's image
  processor resize (torchvision), a kernel apart on images off the 32-px grid;
- video: mteb's collator decodes a video file (tests/mteb_compat.py writes the frames losslessly with
  ffmpeg and decodes them back) and its run differs from the authors' and mmbench's in three named
  ways, each reproduced below: the text goes before the video (mteb orders a row's modalities text,
  image, video), the frames' timestamps assume 24 fps (the sampled frames reach the processor without
  their rate, so transformers falls back to 24), and the vision start/end markup is doubled
  (transformers 5.24 wraps each frame in its own start/end inside the template's; transformers 4's
  Qwen3-VL processor replaced the template's markup whole).
"""
from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mteb")
pytest.importorskip("sentence_transformers")

from mmbench.data.documents import Document, Text, Video  # noqa: E402
from mmbench.data.media import MediaStore  # noqa: E402
from mmbench.models.qwen_vl import QwenVLEmbedder  # noqa: E402
from mmbench.models.qwen_vl_presets import PRESETS  # noqa: E402
from mmbench.models.templates import VIDEO_IN_VISION  # noqa: E402
from mteb_compat import FfmpegVideo, mteb_encode, mteb_qwen3, qwen3_st_folder, video_file  # noqa: E402
from tiny_models import build_qwen3vl, random_image  # noqa: E402

LONG = " ".join(["the needle is hidden somewhere in a very long haystack of ordinary words"] * 150)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3")
    path = build_qwen3vl(root / "q3")
    folder = qwen3_st_folder(path, root / "st")
    store = MediaStore(root / "media")
    # 448x448 is on the 32-px grid within 4..1800 tokens; 100x70 and 333x251 are resized to the grid
    pil = [random_image(448, 448, 0), random_image(448, 448, 1), random_image(100, 70, 7), random_image(333, 251, 8)]
    return str(path), folder, store, pil, [store.put_image(p) for p in pil]


@pytest.fixture(scope="module")
def ref(setup):
    return mteb_qwen3(setup[1])


def _ours(name, path):
    return QwenVLEmbedder(PRESETS[name], model_path=path, context=4096, dtype="float32", device="cpu")


def _cos(a, b):
    return float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))


def test_qwen3_vl_embedding_equals_mtebs_wrapper_on_every_input_kind(setup, ref):
    path, _, store, pil, refs = setup
    ours = _ours("qwen3-vl-embedding-2b", path)
    q = ours.preset.template.query_instruction
    with torch.inference_mode():
        expect = {"query": mteb_encode(ref, [{"text": "a cat sits on the mat"}], "query", instruction=q),
                  "text": mteb_encode(ref, [{"text": "the dog sleeps"}], "document"),
                  "image": mteb_encode(ref, [{"image": pil[0]}], "document"),
                  "image+text": mteb_encode(ref, [{"image": pil[0], "text": "a dog"}], "document"),
                  "images then text": mteb_encode(ref, [{"image": pil[:2], "text": "two dogs"}], "document"),
                  "long document": mteb_encode(ref, [{"text": LONG}], "document")}
    got = {"query": ours.encode([Document("q", [Text("a cat sits on the mat")])], "query", store)}
    docs = {"text": [Text("the dog sleeps")], "image": [refs[0]], "image+text": [Text("a dog"), refs[0]],
            "images then text": [*refs[:2], Text("two dogs")], "long document": [Text(LONG)]}
    for kind, segments in docs.items():
        got[kind] = ours.encode([Document(kind, segments)], "document", store)
    for kind, vec in expect.items():
        np.testing.assert_allclose(got[kind][0], vec[0], atol=1e-5, err_msg=kind)
    assert {r["id"]: r["tokens"] for r in ours.last_encode_info}["long document"] > 1900  # read whole (1971 tokens), no cut


def test_a_text_column_first_puts_the_text_first_in_mtebs_run(setup, ref):
    path, _, store, pil, refs = setup
    ours = _ours("qwen3-vl-embedding-2b", path).encode([Document("b", [Text("a dog"), refs[0]])], "document", store)
    with torch.inference_mode():
        text_first = mteb_encode(ref, [{"text": "a dog", "image": pil[0]}], "document")
    assert _cos(ours[0], text_first[0]) < 0.999  # another prompt: '<|im_start|>user\na dog<|vision_start|>...'
    rendered = ref.model[0].preprocess([{"text": "a dog", "image": pil[0]}], prompt="Represent the user's input.")
    text = ref.model[0].tokenizer.decode(rendered["input_ids"][0])
    assert "user\na dog<|vision_start|>" in text and text.endswith("<|im_start|>assistant\n")


def test_resizing_is_the_authors_and_mtebs_processor_is_a_kernel_apart(setup, ref):
    from qwen_vl_utils.vision_process import fetch_image
    from transformers import Qwen2VLImageProcessorPil

    path, _, store, pil, refs = setup
    ours = _ours("qwen3-vl-embedding-2b", path)
    vb = ours.preset.vision
    for i in (2, 3):
        size = ours.image_size(*pil[i].size)
        mine = ours._load(store, refs[i].ref, "r", size)
        # the authors' script: qwen-vl-utils resizes (its bounds: the preset's), the processor does not
        authors = fetch_image({"image": pil[i], "min_pixels": vb.min_pixels, "max_pixels": vb.max_pixels},
                              image_patch_size=16)
        assert authors.size == mine.size and np.array_equal(np.asarray(authors), np.asarray(mine))
        got = ours.encode([Document("r", [refs[i]])], "document", store)[0]
        with torch.inference_mode():
            as_mteb = mteb_encode(ref, [{"image": pil[i]}], "document")[0]
        assert _cos(got, as_mteb) >= 1 - 1e-5, i
        module = ref.model[0]
        kept = module.processor.image_processor
        module.processor.image_processor = Qwen2VLImageProcessorPil(
            patch_size=16, merge_size=2, size={"shortest_edge": vb.min_pixels, "longest_edge": vb.max_pixels})
        try:
            with torch.inference_mode():
                np.testing.assert_allclose(got, mteb_encode(ref, [{"image": pil[i]}], "document")[0], atol=1e-5)
        finally:
            module.processor.image_processor = kept


def test_embed_rl_and_mmemb_r1_run_qwen3s_protocol(setup):
    path, _, store, _, refs = setup
    docs = [Document("q", [Text("a cat")]), Document("b", [Text("a dog"), refs[1]])]
    base = _ours("qwen3-vl-embedding-2b", path)
    for name in ("embed-rl", "mmemb-r1"):
        kin = _ours(name, path)
        np.testing.assert_allclose(kin.encode(docs, "document", store), base.encode(docs, "document", store), atol=1e-6)
        np.testing.assert_allclose(kin.encode(docs[:1], "query", store), base.encode(docs[:1], "query", store),
                                   atol=1e-6)
        assert "UNVERIFIED" in kin.card.notes and "mteb" in kin.card.notes


@pytest.mark.skipif(not shutil.which("ffmpeg") or not shutil.which("ffprobe"), reason="needs the ffmpeg program")
def test_video_differs_from_mtebs_run_by_three_named_causes_only(setup, ref, tmp_path):
    path, _, store, _, _ = setup
    ours = _ours("qwen3-vl-embedding-2b", path)
    preset = ours.preset
    # mmbench with mteb's three departures: text before the video, timestamps at 24 fps, the template's markup kept
    as_mteb = QwenVLEmbedder(replace(preset, template=replace(preset.template, video_placeholder=VIDEO_IN_VISION,
                                                              single_visual_first=False),
                                     vision=replace(preset.vision, fps=None)),
                             model_path=path, context=4096, dtype="float32", device="cpu")
    for n in (4, 3):  # 448x448 frames: on the 32-px grid, 196 tokens each, within every bound; 3: an odd count
        frames = [random_image(448, 448, 20 + i) for i in range(n)]
        clip = Video(tuple(store.put_image(f).ref for f in frames), 1.0, 448, 448)
        decoded = FfmpegVideo(video_file(frames, tmp_path / f"clip{n}.mkv", fps=1.0))
        with torch.inference_mode():
            expect = mteb_encode(ref, [{"video": decoded, "text": "a clip"}], "document")[0]
        got = ours.encode([Document("v", [Text("a clip"), clip])], "document", store)[0]
        assert np.abs(got - expect).max() > 1e-3, n  # a protocol difference, not rounding
        prompt = ours._tok.decode(ours.prepare([Document("v", [Text("a clip"), clip])], "document", store)
                                  .inputs["input_ids"][0])
        assert "user\n<0.5 seconds><|vision_start|><|video_pad|>" in prompt and prompt.count("<|vision_start|>") == 2
        np.testing.assert_allclose(as_mteb.encode([Document("v", [Text("a clip"), replace(clip, fps=24.0)])],
                                                  "document", store)[0], expect, atol=1e-5, err_msg=str(n))
    rendered = ref.model[0].preprocess([{"text": "a clip", "video": decoded.get_frames_at(range(3)).data}],
                                       prompt="Represent the user's input.")
    text = ref.model[0].tokenizer.decode(rendered["input_ids"][0])
    assert "user\na clip<|vision_start|><0.0 seconds><|vision_start|><|video_pad|>" in text


@pytest.mark.skipif(not shutil.which("ffmpeg") or not shutil.which("ffprobe"), reason="needs the ffmpeg program")
def test_mteb_protocol_gives_mtebs_vectors(setup, ref, tmp_path):
    path, _, store, pil, refs = setup
    mteb = QwenVLEmbedder(PRESETS["qwen3-vl-embedding-2b"], model_path=path, context=16384, dtype="float32",
                          device="cpu", protocol="mteb")
    q = mteb.preset.template.query_instruction
    frames = [random_image(448, 448, 40 + i) for i in range(3)]
    clip = Video(tuple(store.put_image(f).ref for f in frames), 1.0, 448, 448)
    decoded = FfmpegVideo(video_file(frames, tmp_path / "clip.mkv", fps=1.0))
    rows = {"text": {"text": "the dog sleeps"}, "image": {"image": pil[0]}, "resized": {"image": pil[2]},
            "shrunk": {"image": pil[3]}, "image+text": {"image": pil[1], "text": "a dog"},
            "text+image": {"text": "a dog", "image": pil[1]}, "video": {"video": decoded, "text": "a clip"}}
    docs = {"text": [Text("the dog sleeps")], "image": [refs[0]], "resized": [refs[2]], "shrunk": [refs[3]],
            "image+text": [refs[1], Text("a dog")], "text+image": [Text("a dog"), refs[1]],
            "video": [Text("a clip"), clip]}
    with torch.inference_mode():
        expect = {kind: mteb_encode(ref, [row], "document")[0] for kind, row in rows.items()}
        expect["query"] = mteb_encode(ref, [{"text": "a cat sits on the mat"}], "query", instruction=q)[0]
    got = {kind: mteb.encode([Document(kind, segments)], "document", store)[0] for kind, segments in docs.items()}
    got["query"] = mteb.encode([Document("q", [Text("a cat sits on the mat")])], "query", store)[0]
    for kind, vec in expect.items():  # resized images too: the processor resizes, as in mteb's run
        np.testing.assert_allclose(got[kind], vec, atol=1e-5, err_msg=kind)
    # the default gives the authors' form: visuals first, the timestamps at the clip's own rate
    default = _ours("qwen3-vl-embedding-2b", path)
    for kind in ("text+image", "video"):
        assert _cos(default.encode([Document(kind, docs[kind])], "document", store)[0], expect[kind]) < 0.9999, kind
    # mteb's 8192-token cut, at the right (the default reads the window)
    long = Document("long", [Text(" ".join([LONG] * 5))])
    info = mteb.prepare([long], "document", store).info[0]
    assert info["tokens"] == 8192 and "prompt_cut" in info["adapted"]
    assert _ours("qwen3-vl-embedding-2b", path).preset.max_length is None


def test_protocols_have_their_own_ids_and_are_never_joined(setup):
    from mmbench.results.protocol import join_problems, protocol_id, protocol_record

    path = setup[0]
    sel = {"limit": None, "n_items": 10, "n_items_total": 10, "items_hash": "x"}
    cards = {name: QwenVLEmbedder(PRESETS["qwen3-vl-embedding-2b"], model_path=path, context=4096, dtype="float32",
                                  device="cpu", protocol=name).card for name in ("mmlongembed", "mteb")}
    records = {name: protocol_record(card.identity(), sel) for name, card in cards.items()}
    assert protocol_id(records["mmlongembed"]) != protocol_id(records["mteb"])
    assert records["mteb"]["setup"]["protocol"] == "mteb"
    problems = join_problems([("a", "q3", "vg", records["mmlongembed"]), ("b", "q3", "vg", records["mteb"])])
    assert problems and "setup of q3 differs" in problems[0]
    assert cards["mteb"].settings["max_length"] == 8192 and cards["mteb"].settings["frame_stamp_fps"] == 24.0
    assert "image_resize" not in cards["mmlongembed"].settings
