"""Doubao-Seed-1.6 embedding against a loopback server that answers in the Volcengine Ark format."""
from __future__ import annotations

import base64
import hashlib
import json

import numpy as np
import pytest

from mmbench.cli import main
from mmbench.data.documents import Document, Text
from mmbench.data.media import MediaStore
from mmbench.models.api_doubao import DoubaoEmbeddingModel
from mmbench.models.base import EncodeError
from mmbench.common.http_client import HttpClient, RetryPolicy
from mmbench.results.store import load_results
from mmbench.data.tokens import UnifiedTokenCounter
from loopback_server import LoopbackServer
from tiny_models import random_image

KEY = "ark-test-KEY-42"
DIM = 2048


class ArkServer(LoopbackServer):
    """Checks each request's shape as the Ark reference states it, then returns a vector from its content."""

    def __init__(self):
        self.requests: list[dict] = []
        self.problems: list[str] = []
        super().__init__()

    def handle(self, path, headers, body):
        with self.lock:
            self.requests.append({"path": path, "headers": headers, "json": body})
        problem = _shape_problem(path, headers, body)
        if problem:
            with self.lock:
                self.problems.append(problem)
            return 400, {}, {"error": {"code": "InvalidParameter", "message": problem}}
        digest = hashlib.sha256(json.dumps(body["input"], sort_keys=True).encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        return 200, {}, {"object": "list", "model": body["model"], "id": "req-1", "created": 0,
                         "data": {"object": "embedding", "embedding": rng.normal(size=DIM).tolist()},
                         "usage": {"prompt_tokens": 1, "total_tokens": 1}}


def _shape_problem(path, headers, body) -> str | None:
    if path != "/api/v3/embeddings/multimodal":
        return f"wrong path {path}"
    if headers.get("authorization") != f"Bearer {KEY}":
        return "missing or wrong bearer key"
    if set(body) - {"model", "input", "encoding_format", "dimensions"}:
        return f"unknown fields {sorted(set(body) - {'model', 'input', 'encoding_format', 'dimensions'})}"
    if not isinstance(body.get("input"), list) or not body["input"]:
        return "input must be a non-empty list of parts"
    for part in body["input"]:
        if part.get("type") == "text":
            if not isinstance(part.get("text"), str) or set(part) != {"type", "text"}:
                return "bad text part"
        elif part.get("type") == "image_url":
            url = part.get("image_url", {}).get("url", "")
            head, _, data = url.partition(";base64,")
            magic = {"data:image/png": b"\x89PNG", "data:image/jpeg": b"\xff\xd8\xff"}
            if head not in magic:
                return "image must be an inline PNG or JPEG data URL"
            if not base64.b64decode(data).startswith(magic[head]):
                return f"declared {head[11:]} but the bytes are not"  # the reference requires them to match
        else:
            return f"unknown part type {part.get('type')!r}"
    return None


@pytest.fixture()
def ark():
    s = ArkServer()
    yield s
    s.close()


def _model(server, **kw):
    model = DoubaoEmbeddingModel(base_url=server.url + "/api/v3", api_key_env="TEST_ARK_KEY", **kw)
    model.client = HttpClient(retry=RetryPolicy(max_attempts=2, backoff_base=0.0), timeout=5, max_concurrency=2)
    return model


def test_one_request_per_document_with_interleaved_parts(ark, tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_ARK_KEY", KEY)
    media = MediaStore(tmp_path / "media")
    img = media.put_image(random_image(24, 16, 3))
    docs = [Document("a", [Text("before"), img, Text("after")]), Document("b", [Text("plain text")])]
    vecs = _model(ark, query_prefix="Find: ").encode(docs, "query", media)
    assert vecs.shape == (2, DIM) and np.allclose(np.linalg.norm(vecs, axis=1), 1, atol=1e-6)
    assert not ark.problems
    by_text = {r["json"]["input"][-1].get("text"): r["json"] for r in ark.requests}
    mixed = by_text["after"]
    assert [p["type"] for p in mixed["input"]] == ["text", "text", "image_url", "text"]  # reading order kept
    assert mixed["input"][0]["text"] == "Find: " and mixed["model"] == "doubao-embedding-vision-250615"
    assert mixed["encoding_format"] == "float" and "dimensions" not in mixed


def test_body_matches_mtebs_seed16_wrapper(tmp_path, monkeypatch):
    """mteb's wrapper (an independent reference) builds the same body for text and image+text inputs."""
    pytest.importorskip("mteb")
    from mteb.models.model_implementations import seed_1_6_embedding_models as ref

    sent = []

    class Reply:
        def raise_for_status(self):
            pass

        def json(self):
            return {"data": {"embedding": [0.0]}}

    monkeypatch.setattr(ref.requests, "post", lambda url, headers, json, timeout: sent.append((url, json)) or Reply())
    media = MediaStore(tmp_path / "media")
    img = media.put_image(random_image(20, 20, 5))
    ours = DoubaoEmbeddingModel(base_url="http://unused", api_key_env="NO_SUCH_KEY")
    ref.multimodal_embedding(text_content="a red square")
    expected = dict(sent[-1][1])
    assert sent[-1][0] == "https://ark.cn-beijing.volces.com/api/v3/embeddings/multimodal"
    got = ours.payload(Document("t", [Text("a red square")]), "document", media)
    assert {k: got[k] for k in expected} == expected  # ours adds only encoding_format
    # image + text: mteb puts images first then the text; a document in that order gives the same parts
    b64 = base64.b64encode(media.path(img.ref).read_bytes()).decode()
    ref.multimodal_embedding(image_base64=[b64], text_content="caption")
    ref_parts = sent[-1][1]["input"]
    got_parts = ours.payload(Document("m", [img, Text("caption")]), "document", media)["input"]
    assert [p["type"] for p in got_parts] == [p["type"] for p in ref_parts]
    assert got_parts[0]["image_url"]["url"].split(",", 1)[1] == ref_parts[0]["image_url"]["url"].split(",", 1)[1]
    assert got_parts[1] == ref_parts[1]
    # an image alone, and several images then text (mteb's only multi-image order): the same parts
    other = media.put_image(random_image(24, 16, 6))
    b64_other = base64.b64encode(media.path(other.ref).read_bytes()).decode()
    for images, text, doc in (([b64], None, [img]), ([b64, b64_other], "two", [img, other, Text("two")])):
        ref.multimodal_embedding(image_base64=images, **({"text_content": text} if text else {}))
        ref_parts = sent[-1][1]["input"]
        got_parts = ours.payload(Document("m", doc), "document", media)["input"]
        assert [p["type"] for p in got_parts] == [p["type"] for p in ref_parts]
        for mine, theirs in zip(got_parts, ref_parts):
            if mine["type"] == "image_url":
                assert mine["image_url"]["url"].split(",", 1)[1] == theirs["image_url"]["url"].split(",", 1)[1]
            else:
                assert mine == theirs


def test_bad_dimensions_and_tiny_images_fail_clearly(ark, tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_ARK_KEY", KEY)
    with pytest.raises(ValueError, match="dimensions must be one of"):
        DoubaoEmbeddingModel(dimensions=512, base_url="http://x")
    media = MediaStore(tmp_path / "media")
    tiny = media.put_image(random_image(4, 4, 1))
    with pytest.raises(EncodeError, match=r"document 'x'.*4x4 px"):
        _model(ark).encode([Document("x", [tiny])], "document", media)
    assert not ark.requests  # refused before anything was sent


def test_missing_key_for_the_hosted_service(monkeypatch):
    monkeypatch.delenv("ARK_API_KEY", raising=False)
    monkeypatch.delenv("ARK_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="ARK_API_KEY"):
        DoubaoEmbeddingModel()


def test_cli_run_on_visual_grounding_respects_the_window(ark, tmp_path, monkeypatch, capsys):
    """`mmbench run --model doubao-seed-1.6-embedding` end to end: images inline, window respected, seen recorded."""
    monkeypatch.setenv("TEST_ARK_KEY", KEY)
    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    ps = tmp_path / "vg"
    assert main(["build", "--task", "visual_grounding", "--out", str(ps), "--param", "lengths=[1024]",
                 "--param", "needles_per_kind=3", "--param", "backgrounds=[mixed]"]) == 0
    window = 600
    out = tmp_path / "res"
    rc = main(["run", "--task", "visual_grounding", "--model", "doubao-seed-1.6-embedding", "--data", str(ps),
               "--limit", "4", "--output", str(out), "--quiet", "--no-cache",
               "--model-option", f"base_url={ark.url}/api/v3", "--model-option", "api_key_env=TEST_ARK_KEY",
               "--model-option", f"max_tokens={window}", "--model-option", "max_attempts=2"])
    assert rc == 0, capsys.readouterr()
    assert not ark.problems and ark.requests
    counter = UnifiedTokenCounter.default()
    for r in ark.requests:
        text = sum(counter.text(p["text"]) for p in r["json"]["input"] if p["type"] == "text")
        images = sum(1 for p in r["json"]["input"] if p["type"] == "image_url")
        assert text <= window
        assert images >= 0
    assert any(p["type"] == "image_url" for r in ark.requests for p in r["json"]["input"])  # images sent inline
    res = load_results(out)
    docs = res.seen[res.seen["role"] == "document"]
    assert (docs["seen_tokens"] <= window).all() and docs["truncated"].any()
    assert res.summary["mmbench"]["model"]["name"] == "doubao-seed-1.6-embedding"


def test_a_key_in_the_base_url_is_written_nowhere(ark, vg_tiny, tmp_path, monkeypatch, capsys):
    """Issue 26 #3: with base_url=http://user:KEY@host the key landed in results.json and mmbench.json (the
    recorded command line), in the model card and under MMBENCH_HOME/model_cards."""
    monkeypatch.setenv("TEST_ARK_KEY", KEY)
    home = tmp_path / "home"
    monkeypatch.setenv("MMBENCH_HOME", str(home))
    secret = "URLSECRET99"
    url = ark.url.replace("http://", f"http://user:{secret}@") + "/api/v3?api_key=" + secret
    out = tmp_path / "res"
    main(["run", "--task", "visual_grounding", "--model", "doubao-seed-1.6-embedding", "--data", str(vg_tiny),
          "--limit", "2", "--output", str(out), "--quiet", "--model-option", f"base_url={url}",
          "--model-option", "api_key_env=TEST_ARK_KEY", "--model-option", "max_attempts=1"])
    written = [p for p in [*out.rglob("*"), *home.rglob("*")] if p.is_file()]
    assert (out / "results.json").exists() and (out / "mmbench.json").exists()
    assert list((home / "model_cards").glob("*.json"))
    assert [p for p in written if secret.encode() in p.read_bytes()] == []
    summary = json.loads((out / "results.json").read_text())
    assert "127.0.0.1" in summary["mmbench"]["provenance"]["command"]
