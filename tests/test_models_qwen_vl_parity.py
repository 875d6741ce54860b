"""Ops-MM-embedding and RzenEmbed against mteb 2.26's wrappers for them, on a tiny random Qwen2-VL.

Both wrappers run on transformers 5 as they are (no compatibility layer). Per input kind the vectors
must be equal (1e-5), or the kind is a protocol difference listed in docs/models.md with its cause.
Images are 448x448 (on the 28-px grid, 256 tokens), which neither side resizes, so the comparison is
of prompts, positions and pooling; resizing differences are listed in the table.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mteb")

from mmbench.data.documents import Document, Text, Video  # noqa: E402
from mmbench.data.media import MediaStore  # noqa: E402
from mmbench.models.qwen_vl import QwenVLEmbedder  # noqa: E402
from mmbench.models.qwen_vl_presets import PRESETS  # noqa: E402
from tiny_models import build_qwen2vl, random_image  # noqa: E402

LONG = " ".join(["the needle is hidden somewhere in a very long haystack of ordinary words"] * 150)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("qvl")
    path = build_qwen2vl(root / "q2")
    store = MediaStore(root / "media")
    refs = [store.put_image(random_image(448, 448, s)) for s in range(3)]
    return path, store, refs


def _ours(name, path, **kw):
    return QwenVLEmbedder(PRESETS[name], model_path=str(path), context=4096, dtype="float32", device="cpu", **kw)


def test_ops_mm_equals_mtebs_wrapper_on_every_input_kind(setup):
    from mteb.models.model_implementations.ops_mm_models import OpsMMEmbeddingWrapper

    path, store, refs = setup
    pil = [store.load_image(r.ref) for r in refs]
    ref = OpsMMEmbeddingWrapper(str(path), device="cpu", torch_dtype=torch.float32, attn_implementation="sdpa",
                                trust_remote_code=False)
    ours = _ours("ops-mm-embedding-2b", path)
    q = ours.preset.template.query_instruction
    with torch.inference_mode():
        expect = {
            "query": ref.embed_batch(texts=["a cat sits on the mat"], instruction=q),
            "image": ref.embed_batch(images=[pil[0]]),
            "image+text": ref.embed_batch(texts=["a dog"], images=[pil[0]]),
            "images then text": ref.embed_batch(texts=["two dogs"], images=[pil[:2]]),
            "video frames": ref.embed_batch(texts=["a clip"], videos=[pil]),
            "long document": ref.embed_batch(texts=[LONG]),
        }
    video = Video(tuple(r.ref for r in refs), 1.0, 448, 448)
    got = {"query": ours.encode([Document("q", [Text("a cat sits on the mat")])], "query", store)}
    docs = {"image": [refs[0]], "image+text": [Text("a dog"), refs[0]], "images then text": [*refs[:2], Text("two dogs")],
            "video frames": [Text("a clip"), video], "long document": [Text(LONG)]}
    for kind, segments in docs.items():
        got[kind] = ours.encode([Document(kind, segments)], "document", store)
    for kind, vec in expect.items():
        np.testing.assert_allclose(got[kind][0], vec[0].float().numpy(), atol=1e-5, err_msg=kind)


def _rzen_encode(wrapper, rows, prompt_type, instruction=""):
    from datasets import Dataset
    from mteb.types import PromptType
    from torch.utils.data import DataLoader

    data = Dataset.from_dict({k: [r[k] for r in rows] for k in rows[0]})
    loader = DataLoader(data, batch_size=1, collate_fn=lambda batch: {k: [b[k] for b in batch] for k in batch[0]})
    meta = SimpleNamespace(name="mmbench-parity", prompt={"query": instruction} if instruction else None)
    kind = PromptType.query if prompt_type == "query" else PromptType.document
    return wrapper.encode(loader, task_metadata=meta, hf_split="test", hf_subset="default", prompt_type=kind)


def test_rzen_equals_mtebs_wrapper_and_its_positions_are_the_authors(setup):
    from mteb.models.model_implementations.rzen_embed_model import RzenEmbedWrapper

    path, store, refs = setup
    pil = [store.load_image(r.ref) for r in refs]
    ref = RzenEmbedWrapper(str(path), device="cpu")
    ours = _ours("rzen-embed", path)
    assert ours.card.settings["positions"] == "sequential"
    # the authors' example instruction ends in a space; mteb joins instruction and text with nothing
    q = ours.preset.template.query_instruction + " "
    expect = {"query": _rzen_encode(ref, [{"text": "a cat sits on the mat"}], "query", q),
              "image": _rzen_encode(ref, [{"image": pil[0]}], "document"),
              "image+text": _rzen_encode(ref, [{"text": "a dog", "image": pil[0]}], "document"),
              "long document": _rzen_encode(ref, [{"text": LONG}], "document")}
    got = {"query": ours.encode([Document("q", [Text("a cat sits on the mat")])], "query", store)}
    docs = {"image": [refs[0]], "image+text": [Text("a dog"), refs[0]], "long document": [Text(LONG)]}
    for kind, segments in docs.items():
        got[kind] = ours.encode([Document(kind, segments)], "document", store)
    for kind, vec in expect.items():
        np.testing.assert_allclose(got[kind][0], vec[0], atol=1e-5, err_msg=kind)
    # the backbone's 3-D positions (mmbench's former default) are another vector on images
    mrope = _ours("rzen-embed", path, positions="mrope").encode([Document("i", [refs[0]])], "document", store)
    assert np.abs(mrope[0] - expect["image"][0]).max() > 1e-4
