"""`mmbench verify-backend`: the shipped probe set, a loopback OpenAI-compatible server serving a faithful and a
perturbed copy of a reference model, batch-composition checks of a local adapter, and a run carrying its
certificate onto the board."""
import base64
import hashlib
import io
import json

import numpy as np
import pytest
from PIL import Image as PILImage

from loopback_server import LoopbackServer
from mmbench.models.api_openai import OpenAIEmbeddingModel
from mmbench.running.verify_backend import (certificate, certificate_covers, encode_path, load_probe, probe_folder,
                                            run_block)
from toy_models import HashingModel

DIM = 64


def _words(vec, text):
    for w in text.lower().split():
        vec[int(hashlib.md5(w.encode()).hexdigest(), 16) % (DIM - 3)] += 1


def faithful(body):
    """HashingModel's function, computed from the wire format: words hashed, images by their mean colour."""
    def one(parts):
        v = np.zeros(DIM)
        for kind, value in parts:
            if kind == "text":
                _words(v, value)
            else:
                raw = base64.b64decode(value.split(",", 1)[1])
                with PILImage.open(io.BytesIO(raw)) as img:
                    v[-3:] += np.asarray(img.convert("RGB"), dtype=np.float32).reshape(-1, 3).mean(0) / 255
        v[0] += 1e-3
        return v
    if "input" in body:
        vecs = [one([("text", t)]) for t in body["input"]]
    else:
        vecs = [one([("text", p["text"]) if p["type"] == "text" else ("image", p["image_url"]["url"])
                     for p in body["messages"][0]["content"]])]
    return vecs


class EmbeddingServer(LoopbackServer):
    def __init__(self, perturb: float = 0.0):
        self.perturb = perturb
        super().__init__()

    def handle(self, path, headers, body):
        vecs = faithful(body)
        if self.perturb:  # the same model served with an error: a fixed direction added, scaled to each vector
            noise = np.random.default_rng(7).normal(size=DIM)
            vecs = [v + self.perturb * np.linalg.norm(v) * noise / np.linalg.norm(noise) for v in vecs]
        return 200, {}, {"data": [{"index": i, "embedding": [float(x) for x in v]} for i, v in enumerate(vecs)]}


def test_the_probe_ships_every_kind_of_item_and_valid_pairs():
    import configparser
    from pathlib import Path

    probe = load_probe()
    kinds = {s.kind for d in probe.documents for s in d.segments}
    assert kinds == {"text", "image", "video"}
    interleaved = [d for d in probe.documents if len({s.kind for s in d.segments}) > 1 and
                   sum(s.kind == "image" for s in d.segments) > 1]
    assert interleaved, "an item interleaving text and several images"
    lengths = sorted(len(d.text.split()) for d in probe.documents if d.text)
    assert lengths[0] < 10 and lengths[-1] > 2000            # short and long text
    assert len(probe.pairs) >= 4 and len(probe.digest) == 64
    for d in probe.documents:
        for s in d.segments:
            for ref in getattr(s, "frames", None) or ([s.ref] if hasattr(s, "ref") else []):
                probe.media.load_image(ref, d.id)
    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).parents[1] / "setup.cfg")
    patterns = [p.strip() for p in cfg["options.package_data"]["mmbench.data"].split(",")]
    shipped = {p for pat in patterns for p in probe_folder().parent.glob(pat)}
    assert shipped == {p for p in probe_folder().rglob("*") if p.is_file()}


@pytest.mark.parametrize("perturb, passed", [(0.0, True), (0.3, False)])
def test_a_faithful_server_passes_and_a_perturbed_one_fails(perturb, passed):
    with EmbeddingServer(perturb) as server:
        api = OpenAIEmbeddingModel(model="toy", base_url=server.url + "/v1", images=True, max_tokens=None,
                                   max_attempts=1)
        cert = certificate(HashingModel(dim=DIM), api, "api", "loopback")
    assert cert["passed"] is passed
    assert cert["n_items"] == 10 and set(cert["skipped"]["reference"]) == set()   # videos hidden, text kept
    if passed:
        assert cert["cosine_min"] > 0.999999 and cert["top1_agreement"] == 1.0 and cert["reasons"] == []
    else:
        assert cert["cosine_min"] < 0.99 and "minimum cosine" in cert["reasons"][0]


def test_the_cli_writes_the_certificate_and_exits_by_its_verdict(tmp_path, capsys):
    from mmbench.cli import main

    for perturb, code in ((0.0, 0), (0.3, 1)):
        out = tmp_path / f"cert-{perturb}.json"
        with EmbeddingServer(perturb) as server:
            rc = main(["verify-backend", "--model", "toy_models:HashingModel", "--server", server.url + "/v1",
                       "--server-model", "toy", "--server-option", "max_attempts=1", "--out", str(out)])
        assert rc == code
        cert = json.loads(out.read_text())
        assert cert["passed"] is (code == 0) and cert["second"]["kind"] == "api"
    assert "FAILED: minimum cosine" in capsys.readouterr().out


def test_batch_composition_of_a_local_adapter_passes(tmp_path):
    from mmbench.models.clip import DualEncoderModel
    from tiny_models import build_clip

    model = DualEncoderModel(model_path=str(build_clip(tmp_path / "clip")), device="cpu")
    cert = certificate(model, model, "batching", "reversed whole batches")
    assert cert["passed"], cert["reasons"]
    assert cert["cosine_min"] > 0.9999 and cert["n_items"] >= 8


class BatchDependent(HashingModel):
    """Vectors that move with what else is in the batch (a padding bug): must fail the batch check."""

    def encode(self, documents, role, media):
        out = super().encode(documents, role, media)
        return out + 0.5 * np.linalg.norm(out, axis=1, keepdims=True) * (len(documents) > 1) * np.eye(DIM)[5]


def test_a_model_whose_vectors_depend_on_the_batch_fails():
    model = BatchDependent(dim=DIM)
    cert = certificate(model, model, "batching", "reversed whole batches")
    assert not cert["passed"] and cert["cosine_min"] < 0.99


def test_a_run_carries_its_certificate_to_results_and_board(vg_tiny, tmp_path):
    import pandas as pd

    from mmbench.data.poolset import load_poolset
    from mmbench.leaderboards.efficiency import efficiency_table
    from mmbench.leaderboards.stated import stated_number_problems
    from mmbench.leaderboards.store import Entry
    from mmbench.running.evaluation import evaluate_in_memory
    from mmbench.running.runner import RunOptions

    model = HashingModel(dim=DIM)
    cert = certificate(model, model, "batching", "reversed whole batches")
    assert certificate_covers(cert, model.card.identity())
    assert not certificate_covers(cert, HashingModel(dim=32).card.identity())
    ps = load_poolset(vg_tiny)
    with_cert = evaluate_in_memory(ps.task, ps, model, RunOptions(use_cache=False, progress=False, certificate=cert), "h")
    without = evaluate_in_memory(ps.task, ps, model, RunOptions(use_cache=False, progress=False), "h")
    block = with_cert.summary["mmbench"]["backend_certificate"]
    assert block == run_block(cert) and block["passed"] is True
    assert stated_number_problems(with_cert.summary, with_cert.per_query, with_cert.seen, len(ps.pools)) == []
    runs = {"a": with_cert, "b": without}
    entries = [Entry(k, "retrieval", ps.task, "1", r.content_hash, r.info["model"], tmp_path, "2026", {})
               for k, r in runs.items()]
    table = efficiency_table(entries, lambda e: runs[e.id])
    assert [r["certificate"] for r in table.rows] == [f"passed (cosine min {block['cosine_min']:.5f}, needs 0.99; top-1 agreement 1.000, needs 1; "
                                                      "batching comparison)", "NONE"]
    assert isinstance(pd.DataFrame(table.records()), pd.DataFrame)


def test_encode_path_skips_items_a_model_cannot_see():
    probe = load_probe()
    got = encode_path(HashingModel(dim=DIM, modalities=("image",)), probe)
    assert "text-long" in got.skipped and "image-red" in got.vectors


def test_run_attaches_a_matching_certificate_and_refuses_another_models(vg_tiny, tmp_path, capsys):
    from mmbench.cli import main

    cert_path = tmp_path / "cert.json"
    assert main(["verify-backend", "--model", "toy_models:HashingModel", "--out", str(cert_path)]) == 0
    common = ["run", "--task", "visual_grounding", "--data", str(vg_tiny), "--no-cache", "--quiet",
              "--backend-certificate", str(cert_path)]
    out = tmp_path / "run"
    assert main([*common, "--model", "toy_models:HashingModel", "--output", str(out), "--price-per-token", "1e-6"]) == 0
    info = json.loads((out / "results.json").read_text())["mmbench"]
    assert info["backend_certificate"]["passed"] is True
    assert info["efficiency"]["cost_per_1k_documents"] > 0 and info["efficiency"]["price_per_token"] == 1e-6
    # a certificate of the default HashingModel does not cover the BatchSensitiveModel
    assert main([*common, "--model", "toy_models:BatchSensitiveModel", "--output", str(tmp_path / "other")]) == 2
    assert "the certificate was made for another model" in capsys.readouterr().err
