"""VLM2Vec-V2 against mteb 2.26's wrapper for it, on a tiny random Qwen2-VL standing for the merged checkpoint.

mteb's wrapper is V2.0's only (its V1 entry is VLM2Vec on Phi-3.5-V, another architecture), loaded as a
LoRA over the hub's Qwen2-VL-2B with peft; tests/mteb_compat.py points that load at the tiny folder and
nothing else. The tiny processor carries V2's checkpoint bounds (3136..1003520 px). Instructions are the
ones mteb gives its VisRAG tasks, passed to mmbench as `query_instruction` / `document_instruction`.
Per input kind the vectors are equal (1e-5) or the difference is named: an image the processor must
resize is resized by transformers 5's torchvision image processor in mteb's run and with PIL bicubic by
mmbench, which is what transformers' PIL image processor does (checked pixel by pixel below).
Video: mteb's collator decodes a video file (tests/mteb_compat.py writes the frames losslessly with ffmpeg
and decodes them back) and always samples 8 evenly spaced frames (VLM2Vec's eval config), repeating frames
in place for a shorter clip; mmbench keeps the pool set's frames. An 8-frame clip gives equal vectors; a
5-frame clip differs by those repeated frames only.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mteb")

from mmbench.data.documents import Document, Text, Video  # noqa: E402
from mmbench.data.media import MediaStore  # noqa: E402
from mmbench.models.qwen_vl import QwenVLEmbedder  # noqa: E402
from mmbench.models.qwen_vl_presets import PRESETS  # noqa: E402
from mteb_compat import FfmpegVideo, mteb_encode, mteb_vlm2vec2, video_file  # noqa: E402
from tiny_models import build_qwen2vl, random_image  # noqa: E402

TASK = "VisRAGRetChartQA"  # mteb gives it VLM2Vec-V2's document-image instructions
QUERY = "Find a document image that matches the given query:"
DOC = "Understand the content of the provided document image."
V2_MIN, V2_MAX = 3136, 1003520  # the V2 checkpoint's processor config
V2_SIZE = {"shortest_edge": V2_MIN, "longest_edge": V2_MAX}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from transformers import AutoProcessor

    root = tmp_path_factory.mktemp("vlm2vec")
    path = build_qwen2vl(root / "q2")
    AutoProcessor.from_pretrained(path, min_pixels=V2_MIN, max_pixels=V2_MAX).save_pretrained(path)
    store = MediaStore(root / "media")
    # 448x448 is on the 28-px grid within the bounds; 333x251 is resized to the grid; 1400x1000 is shrunk to 1280 tokens
    pil = [random_image(448, 448, 0), random_image(448, 448, 1), random_image(333, 251, 8),
           random_image(1400, 1000, 9)]
    return str(path), store, pil, [store.put_image(p) for p in pil]


@pytest.fixture(scope="module")
def both(setup):
    path = setup[0]
    ours = QwenVLEmbedder(PRESETS["vlm2vec-v2"], model_path=path, context=4096, dtype="float32", device="cpu",
                          query_instruction=QUERY, document_instruction=DOC)
    return ours, mteb_vlm2vec2(path)


def _cos(a, b):
    return float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))


def test_vlm2vec_v2_equals_mtebs_wrapper_on_every_input_kind(setup, both):
    _, store, pil, refs = setup
    ours, ref = both
    with torch.inference_mode():
        expect = {"query": mteb_encode(ref, [{"text": "a cat sits on the mat"}], "query", TASK),
                  "text": mteb_encode(ref, [{"text": "the dog sleeps"}], "document", TASK),
                  "image": mteb_encode(ref, [{"image": pil[0]}], "document", TASK),
                  "image+text": mteb_encode(ref, [{"image": pil[1], "text": "a dog"}], "document", TASK),
                  "text+image": mteb_encode(ref, [{"text": "a dog", "image": pil[1]}], "document", TASK)}
    got = {"query": ours.encode([Document("q", [Text("a cat sits on the mat")])], "query", store)}
    docs = {"text": [Text("the dog sleeps")], "image": [refs[0]], "image+text": [refs[1], Text("a dog")],
            "text+image": [Text("a dog"), refs[1]]}  # VLM2Vec's prompt puts the image first either way
    for kind, segments in docs.items():
        got[kind] = ours.encode([Document(kind, segments)], "document", store)
    for kind, vec in expect.items():
        np.testing.assert_allclose(got[kind][0], vec[0], atol=1e-5, err_msg=kind)


def test_resized_images_differ_by_the_resampling_kernel_only(setup, both):
    from transformers import Qwen2VLImageProcessorPil

    _, store, pil, refs = setup
    ours, ref = both
    for i in (2, 3):
        with torch.inference_mode():
            as_mteb = mteb_encode(ref, [{"image": pil[i]}], "document", TASK)[0]
        got = ours.encode([Document("r", [refs[i]])], "document", store)[0]
        assert _cos(got, as_mteb) >= 1 - 1e-5, i  # same grid and token count; a kernel apart
        # the kernel: transformers 5's default (torchvision) image processor against its PIL one, which mmbench equals
        size = ours.image_size(*pil[i].size)
        mine = ours.processor.image_processor(images=[ours._load(store, refs[i].ref, "r", size)], do_resize=False,
                                              return_tensors="pt")["pixel_values"]
        fast = ref.processor.image_processor(images=[pil[i]], return_tensors="pt")["pixel_values"]
        slow = Qwen2VLImageProcessorPil(size=V2_SIZE)(images=[pil[i]], return_tensors="pt")["pixel_values"]
        assert mine.shape == fast.shape == slow.shape
        assert (mine - slow).abs().max() < 1e-6 and (mine - fast).abs().max() > 1e-3
        # with the PIL image processor, mteb's wrapper gives mmbench's vector
        kept = ref.processor.image_processor
        ref.processor.image_processor = Qwen2VLImageProcessorPil(size=V2_SIZE)
        try:
            with torch.inference_mode():
                np.testing.assert_allclose(got, mteb_encode(ref, [{"image": pil[i]}], "document", TASK)[0], atol=1e-5)
        finally:
            ref.processor.image_processor = kept


def test_v1_shares_v2s_prompt_and_differs_in_pixel_bounds_only(setup):
    path, store, _, refs = setup
    v1 = QwenVLEmbedder(PRESETS["vlm2vec-2b"], model_path=path, context=4096, dtype="float32", device="cpu",
                        query_instruction=QUERY, document_instruction=DOC)
    v2 = QwenVLEmbedder(PRESETS["vlm2vec-v2"], model_path=path, context=4096, dtype="float32", device="cpu",
                        query_instruction=QUERY, document_instruction=DOC)
    docs = [Document("i", [refs[0]]), Document("b", [Text("a dog"), refs[1]])]
    np.testing.assert_allclose(v1.encode(docs, "document", store), v2.encode(docs, "document", store), atol=1e-6)
    assert v1.visual_tokens(1400, 1000) > v2.visual_tokens(1400, 1000)  # V1: the processor defaults' 16384 tokens


@pytest.mark.skipif(not shutil.which("ffmpeg") or not shutil.which("ffprobe"), reason="needs the ffmpeg program")
def test_video_equals_mtebs_on_eight_frames_and_a_short_clip_differs_by_mtebs_repeats(setup, both, tmp_path):
    from mteb.models.modality_collators import frame_indices

    _, store, _, _ = setup
    ours, ref = both
    for n in (8, 5):  # 448x448 frames: on the grid, 256 tokens each, within the video bounds
        frames = [random_image(448, 448, 30 + i) for i in range(n)]
        refs = tuple(store.put_image(f).ref for f in frames)
        decoded = FfmpegVideo(video_file(frames, tmp_path / f"clip{n}.mkv", fps=1.0))
        with torch.inference_mode():
            expect = mteb_encode(ref, [{"video": decoded, "text": "a clip"}], "document", TASK)[0]
        got = ours.encode([Document("v", [Text("a clip"), Video(refs, 1.0, 448, 448)])], "document", store)[0]
        if n == 8:
            np.testing.assert_allclose(got, expect, atol=1e-5)
            continue
        assert np.abs(got - expect).max() > 1e-3  # mteb's 8 frames from 5: (0, 0, 1, 1, 2, 3, 3, 4)
        picked = tuple(refs[i] for i in frame_indices(n, 8))
        again = ours.encode([Document("v", [Text("a clip"), Video(picked, 1.0, 448, 448)])], "document", store)[0]
        np.testing.assert_allclose(again, expect, atol=1e-5)


@pytest.mark.skipif(not shutil.which("ffmpeg") or not shutil.which("ffprobe"), reason="needs the ffmpeg program")
def test_mteb_protocol_gives_mtebs_vectors(setup, both, tmp_path):
    from mmbench.models.qwen_vl import with_protocol
    from mmbench.results.protocol import join_problems, protocol_id, protocol_record

    path, store, pil, refs = setup
    default, ref = both
    mteb = QwenVLEmbedder(PRESETS["vlm2vec-v2"], model_path=path, context=4096, dtype="float32", device="cpu",
                          protocol="mteb")
    assert with_protocol(PRESETS["vlm2vec-v2"], "mteb").dtype == "bfloat16"  # mteb's; the test asks float32
    frames = [random_image(448, 448, 50 + i) for i in range(8)]
    clip = Video(tuple(store.put_image(f).ref for f in frames), 1.0, 448, 448)
    rows = {"text": {"text": "the dog sleeps"}, "image": {"image": pil[0]}, "resized": {"image": pil[2]},
            "shrunk": {"image": pil[3]}, "image+text": {"image": pil[1], "text": "a dog"}}
    docs = {"text": [Text("the dog sleeps")], "image": [refs[0]], "resized": [refs[2]], "shrunk": [refs[3]],
            "image+text": [refs[1], Text("a dog")]}
    for n in (8, 5):  # 5: mteb repeats frames in place to make 8
        rows[f"video{n}"] = {"video": FfmpegVideo(video_file(frames[:n], tmp_path / f"c{n}.mkv")), "text": "a clip"}
        docs[f"video{n}"] = [Text("a clip"), Video(clip.frames[:n], 1.0, 448, 448)]
    with torch.inference_mode():
        # a video document gets the document instruction mteb gives its video-retrieval tasks (MSR-VTT's)
        expect = {kind: mteb_encode(ref, [row], "document", "MSRVTTT2V" if "video" in row else TASK)[0]
                  for kind, row in rows.items()}
        expect["query"] = mteb_encode(ref, [{"text": "a cat sits on the mat"}], "query", TASK)[0]
    got = {kind: mteb.encode([Document(kind, segments)], "document", store)[0] for kind, segments in docs.items()}
    assert mteb.last_encode_info[0]["adapted"] == ["visual_moved_first", "frames_repeated"]
    got["query"] = mteb.encode([Document("q", [Text("a cat sits on the mat")])], "query", store)[0]
    for kind, vec in expect.items():  # resized images too: the processor resizes, as in mteb's run
        np.testing.assert_allclose(got[kind], vec, atol=1e-5, err_msg=kind)
    assert mteb.video_tokens(30, 448, 448) == mteb.video_tokens(8, 448, 448)  # budgeted at the 8 frames it runs
    # the default (its own instructions, the clip's frames) gives other vectors; the two never join
    plain = QwenVLEmbedder(PRESETS["vlm2vec-v2"], model_path=path, context=4096, dtype="float32", device="cpu")
    assert _cos(plain.encode([Document("q", [Text("a cat sits on the mat")])], "query", store)[0],
                expect["query"]) < 0.9999
    assert _cos(default.encode([Document("v", docs["video5"])], "document", store)[0], expect["video5"]) < 0.9999
    sel = {"limit": None, "n_items": 10, "n_items_total": 10, "items_hash": "x"}
    records = [protocol_record(m.card.identity(), sel) for m in (plain, mteb)]
    assert protocol_id(records[0]) != protocol_id(records[1])
    assert join_problems([("a", "v2", "vg", records[0]), ("b", "v2", "vg", records[1])])
    assert mteb.card.settings["num_frames"] == 8 and "num_frames" not in plain.card.settings
