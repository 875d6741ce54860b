"""API embedders and the HTTP client against a scripted HTTP server on the loopback interface."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

from mmbench.data.documents import Document, Text
from mmbench.data.media import MediaStore
from mmbench.models.api_gemini import GeminiEmbeddingModel
from mmbench.models.api_openai import OpenAIEmbeddingModel
from mmbench.models.output_check import BadModelOutput
from mmbench.common.http_client import APIError, HttpClient, RateLimiter, RetryPolicy
from loopback_server import LoopbackServer
from tiny_models import random_image

KEY = "sk-test-SECRET-123"


class Server(LoopbackServer):
    """Answers POSTs from a script of (status, headers, body, delay); then falls back to `default`."""

    def __init__(self):
        self.script: list[tuple[int, dict, object, float]] = []
        self.default = None  # callable(request_json) -> body
        self.requests: list[dict] = []
        super().__init__()

    def handle(self, path, headers, body):
        with self.lock:
            self.requests.append({"path": path, "headers": headers, "json": body})
            step = self.script.pop(0) if self.script else None
        status, extra, payload, delay = (200, {}, self.default(body), 0.0) if step is None else step
        if delay:
            time.sleep(delay)
        return status, extra, payload


def _vec(text: str, dim: int = 8) -> list[float]:
    rng = np.random.default_rng(abs(hash(text)) % (2 ** 32))
    return rng.normal(size=dim).tolist()


def openai_default(body):
    if "input" in body:
        data = [{"index": i, "embedding": _vec(t)} for i, t in enumerate(body["input"])]
        return {"data": data[::-1]}  # out of order on purpose: the client must sort by index
    return {"data": [{"index": 0, "embedding": _vec(json.dumps(body["messages"]))}]}


@pytest.fixture()
def server():
    s = Server()
    s.default = openai_default
    yield s
    s.close()


def _fast(model, sleeps=None, **kw):
    model.client = HttpClient(retry=RetryPolicy(max_attempts=kw.pop("max_attempts", 3)), timeout=kw.pop("timeout", 2),
                              max_concurrency=kw.pop("max_concurrency", 2),
                              sleep=(sleeps.append if sleeps is not None else (lambda s: None)))
    return model


def test_openai_batches_order_and_images(server, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_KEY", KEY)
    model = _fast(OpenAIEmbeddingModel(model="m", base_url=server.url + "/v1", api_key_env="MY_KEY", batch_size=2,
                                       query_prefix="query: "))
    media = MediaStore(tmp_path / "media")
    img = media.put_image(random_image(8, 8, 1))
    docs = [Document(f"t{i}", [Text(f"text {i}")]) for i in range(3)] + [Document("im", [Text("cap"), img])]
    vecs = model.encode(docs, "query", media)
    assert vecs.shape == (4, 8) and np.allclose(np.linalg.norm(vecs, axis=1), 1)
    expected = np.array(_vec("query: text 0")) / np.linalg.norm(_vec("query: text 0"))
    np.testing.assert_allclose(vecs[0], expected, rtol=1e-5)
    assert len(server.requests) == 3  # two text batches, one image document
    assert all(r["path"] == "/v1/embeddings" and r["headers"]["authorization"] == f"Bearer {KEY}"
               for r in server.requests)
    msg = [r for r in server.requests if "messages" in r["json"]][0]["json"]["messages"][0]["content"]
    assert msg[0] == {"type": "text", "text": "query: "} and msg[2]["image_url"]["url"].startswith("data:image/png;base64,")
    assert KEY not in json.dumps(model.card.identity()) and KEY not in model.card.notes


def test_retries_500_and_429_retry_after(server):
    sleeps: list[float] = []
    model = _fast(OpenAIEmbeddingModel(model="m", base_url=server.url), sleeps)
    server.script = [(500, {}, {"error": "boom"}, 0), (429, {"Retry-After": "0.05"}, {"error": "slow down"}, 0)]
    vecs = model.encode([Document("a", [Text("hello")])], "document", None)
    assert vecs.shape == (1, 8) and len(server.requests) == 3
    assert len(sleeps) == 2 and sleeps[1] == pytest.approx(0.05)
    assert 0.4 <= sleeps[0] <= 0.6  # first exponential backoff step, with jitter


def test_timeout_malformed_and_client_errors(server, monkeypatch):
    model = _fast(OpenAIEmbeddingModel(model="m", base_url=server.url), timeout=0.5, max_attempts=2)
    server.script = [(200, {}, {"data": []}, 1.5), (200, {}, {"data": []}, 1.5)]
    with pytest.raises(APIError, match="after 2 attempts: network error"):
        model.encode([Document("a", [Text("x")])], "document", None)
    server.script = [(200, {}, b"{not json", 0), (200, {}, b"<html>", 0)]
    with pytest.raises(APIError, match="malformed JSON"):
        model.encode([Document("a", [Text("x")])], "document", None)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = _fast(OpenAIEmbeddingModel(model="m", base_url=server.url), max_attempts=4)
    n = len(server.requests)
    server.script = [(400, {}, {"error": {"message": "bad input"}}, 0)]
    with pytest.raises(APIError, match="HTTP 400: .*bad input") as err:
        model.encode([Document("a", [Text("x")])], "document", None)
    assert len(server.requests) == n + 1 and KEY not in str(err.value) and err.value.status == 400


def test_wrong_shapes(server):
    model = _fast(OpenAIEmbeddingModel(model="m", base_url=server.url, dimensions=8))
    docs = [Document("a", [Text("x")]), Document("b", [Text("y")])]
    server.script = [(200, {}, {"data": [{"index": 0, "embedding": [1.0] * 8}]}, 0)]
    with pytest.raises(BadModelOutput, match="'a'.*expected a 'data' list of 2 items, got 1 items"):
        model.encode(docs, "document", None)
    server.script = [(200, {}, {"data": [{"index": 0, "embedding": [1.0] * 8}, {"index": 1, "embedding": [1.0] * 3}]},
                      0)]
    with pytest.raises(BadModelOutput, match="rows of different lengths"):   # a whole batch of garbage stops the run
        model.encode(docs, "document", None)
    server.script = [(200, {}, {"data": [{"index": 0, "embedding": [1.0] * 8}, {"index": 1, "embedding": "nan"}]}, 0)]
    with pytest.raises(BadModelOutput, match="not numbers"):
        model.encode(docs, "document", None)
    server.script = [(200, {}, {"data": [{"index": 0, "embedding": [1.0] * 3}, {"index": 1, "embedding": [2.0] * 3}]},
                      0)]
    with pytest.raises(BadModelOutput, match="3-dimensional vectors; expected 8"):
        model.encode(docs, "document", None)
    server.script = [(200, {}, {"result": "ok"}, 0)]
    with pytest.raises(BadModelOutput, match="'data' list of 2 items, got none"):
        model.encode(docs, "document", None)


def test_gemini_parts_task_type_and_header(tmp_path, monkeypatch):
    s = Server()
    s.default = lambda body: {"embeddings": [{"values": _vec(json.dumps(r["content"]))} for r in body["requests"]]}
    try:
        monkeypatch.setenv("GEMINI_API_KEY", KEY)
        model = _fast(GeminiEmbeddingModel(model="g", base_url=s.url + "/v1beta", batch_size=2, dimensions=8))
        media = MediaStore(tmp_path / "media")
        img = media.put_image(random_image(8, 8, 2))
        docs = [Document("a", [Text("before"), img, Text("after")]), Document("b", [Text("x")]),
                Document("c", [Text("y")])]
        vecs = model.encode(docs, "query", media)
        assert vecs.shape == (3, 8)
        assert len(s.requests) == 2 and s.requests[0]["path"] == "/v1beta/models/g:batchEmbedContents"
        assert s.requests[0]["headers"]["x-goog-api-key"] == KEY and KEY not in s.requests[0]["path"]
        req = [r for r in s.requests if len(r["json"]["requests"]) == 2][0]["json"]["requests"][0]
        assert req["taskType"] == "RETRIEVAL_QUERY" and req["outputDimensionality"] == 8
        parts = req["content"]["parts"]
        assert [list(p) for p in parts] == [["text"], ["inline_data"], ["text"]]
        assert parts[1]["inline_data"]["mime_type"] == "image/png"
    finally:
        s.close()
    with pytest.raises(ValueError, match="GEMINI_API_KEY"):
        monkeypatch.delenv("GEMINI_API_KEY")
        GeminiEmbeddingModel()


def test_cache_and_concurrency(server, tmp_path):
    model = _fast(OpenAIEmbeddingModel(model="m", base_url=server.url, batch_size=1, cache_dir=str(tmp_path / "c")),
                  max_concurrency=2)
    server.default = lambda body: (time.sleep(0.05), openai_default(body))[1]
    docs = [Document(f"d{i}", [Text(f"t{i}")]) for i in range(6)]
    first = model.encode(docs, "document", None)
    assert len(server.requests) == 6 and 1 <= server.max_in_flight <= 2
    again = model.encode(docs, "document", None)
    assert len(server.requests) == 6  # every document came from the cache
    np.testing.assert_allclose(first, again)


def test_rate_limiter_spacing():
    now = [0.0]
    slept: list[float] = []
    limiter = RateLimiter(4.0, clock=lambda: now[0], sleep=lambda s: slept.append(s))
    for _ in range(3):
        limiter.wait()
    assert slept == pytest.approx([0.25, 0.5])


def test_retry_after_http_date_is_honoured(server):
    from email.utils import formatdate

    from mmbench.common.http_client import _retry_after

    now = 1_700_000_000.0
    assert _retry_after({"Retry-After": formatdate(now + 45, usegmt=True)}, now=lambda: now) == pytest.approx(45)
    assert _retry_after({"Retry-After": formatdate(now - 10, usegmt=True)}, now=lambda: now) == 0.0
    assert _retry_after({"Retry-After": "soon"}, now=lambda: now) is None
    sleeps: list[float] = []
    model = _fast(OpenAIEmbeddingModel(model="m", base_url=server.url), sleeps)
    server.script = [(503, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, {"error": "busy"}, 0),
                     (429, {"Retry-After": formatdate(time.time() + 60, usegmt=True)}, {"error": "slow"}, 0)]
    model.encode([Document("a", [Text("hello")])], "document", None)
    assert sleeps[0] == 0.0  # a date in the past: retry at once, not after an exponential backoff step
    assert 50 <= sleeps[1] <= 60  # a date a minute ahead: wait about a minute


def _word_tokenizer(path, words):
    """A whitespace word-level tokenizer.json over `words` (unknown words map to [UNK])."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))
    return str(path)


def test_cache_identity_covers_budget_tokenizer_and_endpoint(tmp_path, monkeypatch):
    from mmbench.data.embedding_cache import model_key

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    tok_a = _word_tokenizer(tmp_path / "a.json", ["alpha", "beta"])
    tok_b = _word_tokenizer(tmp_path / "b.json", ["alpha", "beta", "gamma"])
    for cls, url in ((OpenAIEmbeddingModel, "http://127.0.0.1:9/v1"), (GeminiEmbeddingModel, "http://127.0.0.1:9")):
        keys = {model_key(cls(base_url=url, tokenizer=t, max_tokens=16).card.identity()) for t in (tok_a, tok_b)}
        assert len(keys) == 2, cls.__name__  # another tokenizer cuts texts elsewhere: its vectors must not be reused
        other = cls(base_url="http://127.0.0.1:10/v1", tokenizer=tok_a, max_tokens=16)
        assert model_key(other.card.identity()) not in keys, cls.__name__  # another server, other vectors


def test_openai_budget_leaves_room_for_the_prefix(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    tok = _word_tokenizer(tmp_path / "w.json", ["query", "passage", "alpha"])
    model = OpenAIEmbeddingModel(base_url="http://127.0.0.1:9/v1", tokenizer=tok, max_tokens=16,
                                 query_prefix="query alpha alpha ", document_prefix="passage ")
    assert model.card.max_tokens == 13  # the 3-token query prefix goes in front of a document cut to the window
    plain = OpenAIEmbeddingModel(base_url="http://127.0.0.1:9/v1", tokenizer=tok, max_tokens=16)
    assert plain.card.max_tokens == 16
    assert OpenAIEmbeddingModel(base_url="http://127.0.0.1:9/v1", max_tokens=16).card.max_tokens is None


def test_gemini_text_only_model_records_images_as_unseen(tmp_path, monkeypatch):
    from mmbench.models.registry import model_specs
    from mmbench.running.views import model_view

    s = Server()
    s.default = lambda body: {"embeddings": [{"values": _vec(json.dumps(r["content"]))} for r in body["requests"]]}
    try:
        monkeypatch.setenv("GEMINI_API_KEY", KEY)
        media = MediaStore(tmp_path / "media")
        doc = Document("a", [Text("before"), media.put_image(random_image(8, 8, 3)), Text("after")])
        text_model = _fast(GeminiEmbeddingModel(model="gemini-embedding-001", base_url=s.url))
        assert text_model.card.modalities == {"text"}  # the API counts only text parts for this model
        view, seen = model_view(doc, text_model)
        assert seen.unseen_modalities == ["image"] and seen.unseen_images == 1
        text_model.encode([view], "document", media)
        assert [list(p) for p in s.requests[-1]["json"]["requests"][0]["content"]["parts"]] == [["text"], ["text"]]
        multimodal = GeminiEmbeddingModel(model="gemini-embedding-2", base_url=s.url)
        assert multimodal.card.modalities == {"text", "image"}
        assert GeminiEmbeddingModel(model="gemini-embedding-001", base_url=s.url, images=True).images
    finally:
        s.close()
    spec = {m.name: m for m in model_specs()}["gemini-embedding"]
    assert spec.modalities == ("text",)  # the registered default model is gemini-embedding-001


def test_api_cache_never_answers_the_runners_cache(server, tmp_path):
    from mmbench.data.poolset import PoolItem, PoolSet
    from mmbench.running.runner import RunOptions, run_poolset

    cache = tmp_path / "embeddings"
    model = _fast(OpenAIEmbeddingModel(model="m", base_url=server.url, images=False, cache_dir=str(cache)))
    # the text model's view of a document with text and an image, encoded in an earlier run
    model.encode([Document("mixed-view", [Text("shared words")])], "document", None)
    plain = Document("plain", [Text("shared words")])  # same content as that view, in another pool set
    ps = PoolSet(task="t", task_version="1", queries=[Document("q", [Text("words")])],
                 candidates=[plain, Document("other", [Text("other words")])],
                 pools=[PoolItem("i", "q", "s", ["plain", "other"], ["plain"])])
    per_query, seen, _ = run_poolset(ps, model, RunOptions(cache_dir=cache, progress=False))
    assert per_query["error"].isna().all() and set(seen["doc_id"]) == {"q", "plain", "other"}


def test_openai_hosted_endpoint_defaults_to_text_only(server, monkeypatch):
    """api.openai.com's embedding models take text only: images are recorded unseen there by default,
    while another OpenAI-compatible server (vLLM) gets them."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    hosted = OpenAIEmbeddingModel(model="text-embedding-3-small")
    assert not hosted.images and hosted.card.modalities == frozenset({"text"})
    assert OpenAIEmbeddingModel(model="text-embedding-3-small", images=True).images
    assert OpenAIEmbeddingModel(model="m", base_url=server.url).card.modalities == frozenset({"text", "image"})
