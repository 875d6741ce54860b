"""Credentials in a base URL (`http://user:KEY@host/v1`, `http://KEY@host/v1`): sent as HTTP basic auth or as the
API's own key header to the real host, for an embedding run and a `rank` run, and written nowhere."""
from __future__ import annotations

import base64
import hashlib
import json
import logging

import pytest

from fake_llm_server import openai_envelope
from loopback_server import LoopbackServer
from mmbench.cli import main
from mmbench.common.http_client import HttpClient, RetryPolicy, URLAuth
from mmbench.data.documents import Document, Text
from mmbench.models.api_doubao import DoubaoEmbeddingModel
from mmbench.models.api_gemini import GeminiEmbeddingModel
from mmbench.models.api_openai import OpenAIEmbeddingModel
from mmbench.models.output_check import BadModelOutput
from mmbench.rankers import load_ranker
from mmbench.tasks import get_task

KEY = "gw-SECRET-key-0123456789"
USER = "alice"


class AuthServer(LoopbackServer):
    """Answers embeddings and chat completions only to requests carrying `expected` headers; 401 otherwise."""

    def __init__(self, expected: dict[str, str]):
        self.expected, self.seen = expected, []
        super().__init__()

    def handle(self, path, headers, body):
        self.seen.append((path, headers))
        if any(headers.get(k) != v for k, v in self.expected.items()):
            return 401, {}, {"error": {"message": "authentication required"}}
        if path.endswith("/chat/completions"):
            n = sum(1 for p in body["messages"][1]["content"] if p["type"] == "image_url")
            return 200, {}, openai_envelope(json.dumps(list(range(1, n + 1))))
        texts = body["input"] if "input" in body else ["image"]
        vecs = [[b / 255 + 0.01 for b in hashlib.sha256(str(t).encode()).digest()[:8]] for t in texts]
        return 200, {}, {"data": [{"index": i, "embedding": v} for i, v in enumerate(vecs)]}


BASIC = {"authorization": "Basic " + base64.b64encode(f"{USER}:{KEY}".encode()).decode()}
BEARER = {"authorization": f"Bearer {KEY}"}


def test_url_auth_splits_the_user_info():
    assert URLAuth.of("http://h:1/v1") == URLAuth("http://h:1/v1")
    basic = URLAuth.of(f"https://{USER}:{KEY}@h:1/v1")
    assert basic.url == "https://h:1/v1" and basic.key is None and basic.basic == {"Authorization": BASIC["authorization"]}
    assert URLAuth.of(f"https://{KEY}@h/v1") == URLAuth("https://h/v1", key=KEY)
    assert URLAuth.of(f"https://:{KEY}@h/v1") == URLAuth("https://h/v1", key=KEY)
    assert URLAuth.of("https://a%40b:p%3Aw@h/v1").basic["Authorization"] == "Basic " + base64.b64encode(b"a@b:p:w").decode()


def _fast(model):
    model.client = HttpClient(retry=RetryPolicy(max_attempts=1), timeout=5, max_concurrency=1)
    return model


@pytest.mark.parametrize("cls", [OpenAIEmbeddingModel, GeminiEmbeddingModel, DoubaoEmbeddingModel])
def test_every_embedding_adapter_sends_basic_auth_to_the_real_host(cls, monkeypatch):
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "ARK_API_KEY", "OPENAI_BASE_URL", "ARK_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with AuthServer(BASIC) as server:
        url = server.url.replace("http://", f"http://{USER}:{KEY}@") + "/v1"
        model = _fast(cls(base_url=url))
        try:
            model.encode([Document("a", [Text("x")])], "query", None)
        except Exception:
            pass   # the fake answers in the OpenAI layout only: what matters is what it received
        path, headers = server.seen[0]
        assert headers["authorization"] == BASIC["authorization"] and path.startswith("/v1/")
        assert KEY not in json.dumps(model.card.identity())


def test_a_key_alone_goes_in_the_apis_own_header(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with AuthServer({"x-goog-api-key": KEY}) as server:
        model = _fast(GeminiEmbeddingModel(base_url=server.url.replace("http://", f"http://{KEY}@")))
        with pytest.raises(BadModelOutput):
            model.encode([Document("a", [Text("x")])], "query", None)   # the fake answers in the OpenAI layout
        assert server.seen[0][1]["x-goog-api-key"] == KEY and "authorization" not in server.seen[0][1]
    with AuthServer({"x-api-key": KEY, "authorization": BASIC["authorization"]}) as server:
        ranker = load_ranker("anthropic", "m", base_url=server.url.replace("http://", f"http://{USER}:{KEY}@"))
        assert ranker.headers()["Authorization"] == BASIC["authorization"]
        assert ranker.url() == server.url + "/v1/messages"


@pytest.fixture(scope="module")
def fhn(tmp_path_factory):
    out = tmp_path_factory.mktemp("fhn") / "fhn"
    get_task("flickr_hard_negatives").build("sample", out, seed=1, sample_images=30, pool_size=30, n_queries=4,
                                            n_negatives=5, progress=False)
    return out


def _no_key_anywhere(folders, text):
    assert KEY not in text
    for folder in folders:
        for f in folder.rglob("*"):
            if f.is_file() and not f.is_symlink():
                data = f.read_bytes()
                assert KEY.encode() not in data and base64.b64encode(f"{USER}:{KEY}".encode()) not in data, f


@pytest.mark.parametrize("expected, userinfo", [(BASIC, f"{USER}:{KEY}"), (BEARER, KEY)], ids=["basic", "bearer"])
def test_embedding_and_rank_runs_configured_only_through_the_url(expected, userinfo, vg_tiny, fhn, tmp_path,
                                                                 monkeypatch, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    home = tmp_path / "home"
    monkeypatch.setenv("MMBENCH_HOME", str(home))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with AuthServer(expected) as server:
        url = server.url.replace("http://", f"http://{userinfo}@") + "/v1"
        run_out, rank_out = tmp_path / "run", tmp_path / "rank"
        assert main(["run", "--task", "visual_grounding", "--model", "openai-embeddings", "--data", str(vg_tiny),
                     "--limit", "3", "--model-option", f"base_url={url}", "--output", str(run_out), "--quiet"]) == 0
        assert main(["rank", "--task", "flickr_hard_negatives", "--ranker", "openai-chat", "--model", "m",
                     "--data", str(fhn), "--base-url", url, "--output", str(rank_out), "--quiet"]) == 0
        assert server.seen and all(h.get("authorization") == expected["authorization"] for _, h in server.seen)
    summary = json.loads((run_out / "results.json").read_text())
    assert summary["mmbench"]["model"]["settings"]["base_url"] == server.url + "/v1"
    out = capsys.readouterr()
    _no_key_anywhere([run_out, rank_out, home], out.out + out.err + caplog.text)
