"""The mteb bridge offline: a custom mteb encoder on mmbench documents, and a pool set run by mteb.evaluate."""
from __future__ import annotations

import re

import numpy as np
import pytest

mteb = pytest.importorskip("mteb")

from mteb.types import PromptType  # noqa: E402

from mmbench.data.documents import Document, Text  # noqa: E402
from mmbench.data.media import MediaStore  # noqa: E402
from mmbench.interop.mteb_task import export_mteb_task  # noqa: E402
from mmbench.models.mteb_bridge import MtebEncoderModel, load_mteb_model  # noqa: E402
from mmbench.data.poolset import PoolItem, PoolSet, write_poolset  # noqa: E402
from mteb_helpers import BagOfWords, bow as _bow  # noqa: E402
from tiny_models import random_image  # noqa: E402

DIM = 64

def test_mteb_model_on_mmbench_documents(tmp_path):
    media = MediaStore(tmp_path / "media")
    a, b = media.put_image(random_image(8, 8, 1)), media.put_image(random_image(8, 8, 2))
    enc = BagOfWords(modalities=("text", "image"))
    model = MtebEncoderModel(enc)
    assert model.card.modalities == frozenset({"text", "image"}) and model.card.dim == DIM
    docs = [Document("t", [Text("red apple")]), Document("m", [Text("green"), a, Text("pear"), b])]
    vecs = model.encode(docs, "query", media)
    assert vecs.shape == (2, DIM) and np.allclose(np.linalg.norm(vecs, axis=1), 1)
    expected = _bow("red apple") + 1e-3
    np.testing.assert_allclose(vecs[0], expected / np.linalg.norm(expected), atol=1e-6)
    assert {c["prompt_type"] for c in enc.calls} == {PromptType.query}
    assert any("image" in c["keys"] for c in enc.calls) and any("image" not in c["keys"] for c in enc.calls)
    info = {r["id"]: r["dropped"] for r in model.last_encode_info}
    assert info == {"t": {"images": 0, "videos": 0}, "m": {"images": 1, "videos": 0}}
    model.encode(docs[:1], "document", media)
    assert enc.calls[-1]["prompt_type"] == PromptType.document and "body" in enc.calls[-1]["keys"]


def test_load_unknown_mteb_model_is_clear():
    with pytest.raises(OSError, match="no/such-model"):
        load_mteb_model("no/such-model")


def test_mteb_model_from_a_local_folder():
    from mmbench.models.sentence_transformer import packaged_minilm_path

    folder = packaged_minilm_path()
    if folder is None:
        pytest.skip("the packaged MiniLM is not installed")
    model = load_mteb_model(str(folder))
    assert re.fullmatch(r"mteb:model@[0-9a-f]{8}", model.card.name) and model.card.dim == 384
    vecs = model.encode([Document("a", [Text("a red apple")]), Document("b", [Text("the ocean")])], "query", None)
    assert vecs.shape == (2, 384) and np.allclose(np.linalg.norm(vecs, axis=1), 1)


def test_mteb_model_unreachable_fails_fast_with_exit_2(monkeypatch, capsys, vg_tiny):
    """No network and no HF_HUB_OFFLINE: the hub probe fails, loading runs offline, the CLI exits 2 at once
    (before: minutes of hub retries, then exit 1). Not timed (tests never are): the connection attempts are
    counted, and the probe's is the only one."""
    import socket

    from huggingface_hub import constants

    from mmbench.cli import main

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    attempts = []

    def no_network(*args, **kwargs):
        attempts.append(args[0] if args else kwargs.get("address"))
        raise OSError("network is unreachable (test)")

    monkeypatch.setattr(socket, "create_connection", no_network)
    code = main(["run", "--task", "visual_grounding", "--model", "mteb:intfloat/e5-small-v2", "--data", str(vg_tiny),
                 "--quiet", "--no-cache"])
    assert code == 2
    assert len(attempts) == 1   # the hub probe, once; loading then ran offline (the message below says so)
    err = capsys.readouterr().err
    assert "could not load model 'mteb:intfloat/e5-small-v2'" in err and "the hub is unreachable" in err
    assert "--model mteb:DIR" in err
    assert constants.HF_HUB_OFFLINE is False  # offline mode only for the load


def _toy_poolset(tmp_path, with_image: bool):
    media = MediaStore(tmp_path / "src_media")
    topics = ["apple orchard harvest", "ocean wave surfing", "mountain snow climbing", "desert camel caravan"]
    queries = [Document(f"q{i}", [Text(t.split()[0] + " " + t.split()[1])]) for i, t in enumerate(topics)]
    cands = []
    for i, t in enumerate(topics):
        segs = [Text(t + " story")]
        if with_image:
            segs += [media.put_image(random_image(8, 8, i)), media.put_image(random_image(8, 8, 10 + i))]
        cands.append(Document(f"c{i}", segs))
    pools = [PoolItem(f"p{i}", f"q{i}", "all", [c.id for c in cands], [f"c{i}"],
                      meta={"length_bin": "0-1k" if i < 2 else "1k-2k"}) for i in range(4)]
    pools.append(PoolItem("p4", "q0", "all", ["c0", "c1"], ["c0"], meta={"length_bin": "1k-2k"}))
    ps = PoolSet(task="toy-task", task_version="1", queries=queries, candidates=cands, pools=pools)
    write_poolset(ps, tmp_path / "ps", media_from=media.root)
    return tmp_path / "ps"


def test_export_poolset_runs_in_mteb_evaluate(tmp_path):
    task = export_mteb_task(_toy_poolset(tmp_path, with_image=False))
    assert task.metadata.name == "toy-task" and task.metadata.type == "Retrieval"
    assert task.metadata.eval_splits == ["test"] and task.hf_subsets == ["default"]
    task.load_data()
    split = task.dataset["default"]["test"]
    assert split["top_ranked"]["p4"] == ["c0", "c1"] and split["relevant_docs"]["p4"] == {"c0": 1}
    res = mteb.evaluate(BagOfWords(), task, cache=None, show_progress_bar=False)
    (entry,) = res.task_results[0].scores["test"]
    assert entry["hf_subset"] == "default" and entry["ndcg_at_10"] == pytest.approx(1.0)
    assert entry["mrr"] == pytest.approx(1.0)


def test_export_with_images_records_loss(tmp_path):
    task = export_mteb_task(_toy_poolset(tmp_path, with_image=True))
    assert task.metadata.modalities == ["text", "image"]
    assert task.export_report["dropped_images"] == 4  # second image of each candidate
    task.load_data()
    corpus = task.dataset["default"]["test"]["corpus"]
    assert corpus[0]["image"].size == (8, 8)
    res = mteb.evaluate(BagOfWords(modalities=("text", "image")), task, cache=None, show_progress_bar=False)
    assert res.task_results[0].scores["test"][0]["main_score"] == pytest.approx(1.0)
