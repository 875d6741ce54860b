"""The shared HTTP layer under hostile servers: credentials echoed back are redacted everywhere, a trickled
reply cannot outlast the request's time limit, Anthropic's 529 is retried, nonsense timeouts are refused."""
from __future__ import annotations

import json
import logging
import shutil
import ssl
import subprocess
import threading
import time

import numpy as np
import pytest

from loopback_server import LoopbackServer
from raw_socket_server import RawSocketServer
from mmbench.data.documents import Document, Text
from mmbench.models.api_gemini import GeminiEmbeddingModel
from mmbench.models.api_openai import OpenAIEmbeddingModel
from mmbench.common.http_client import REDACTED, APIError, HttpClient, Redactor, RetryPolicy
from mmbench.running.runner import RunOptions, run_poolset

KEY = "sk-live-ECHOED-0123456789abcdef"


class EchoServer(LoopbackServer):
    """Echoes every credential it received inside its answer (as some real servers do in errors)."""

    def __init__(self, status: int = 401, ok_after: int | None = None):
        self.status, self.ok_after, self.count = status, ok_after, 0
        super().__init__()

    def handle(self, path, headers, body):
        self.count += 1
        creds = {k: v for k, v in headers.items() if k in ("authorization", "x-api-key", "x-goog-api-key")}
        echo = f"Incorrect API key provided: {creds} at {path}"
        if self.ok_after is not None and self.count > self.ok_after:
            if "requests" in body:   # gemini
                return 200, {}, {"embeddings": [{"values": [1.0, 0.0]}] * len(body["requests"]), "note": echo}
            return 200, {}, {"data": [{"index": i, "embedding": [1.0, 0.0]} for i in range(len(body["input"]))],
                             "note": echo}
        return self.status, {}, {"error": {"message": echo, "type": "invalid_request_error"}}


def _client(**kw) -> HttpClient:
    return HttpClient(retry=RetryPolicy(max_attempts=kw.pop("attempts", 2)), timeout=kw.pop("timeout", 5),
                      max_concurrency=1, sleep=lambda s: None, **kw)


@pytest.mark.parametrize("status", [401, 500])   # a final error and a retried one (retry log lines too)
@pytest.mark.parametrize("headers, query", [
    ({"Authorization": f"Bearer {KEY}"}, ""),
    ({"x-api-key": KEY}, ""),
    ({"x-goog-api-key": KEY}, ""),
    ({}, f"?key={KEY}"),
])
def test_echoed_credentials_never_reach_errors_or_logs(status, headers, query, caplog):
    caplog.set_level(logging.DEBUG)
    with EchoServer(status) as server:
        with pytest.raises(APIError) as err:
            _client().post_json(server.url + "/v1/x" + query, {"a": 1}, headers)
    message = str(err.value)
    assert "Incorrect API key provided" in message and REDACTED in message and KEY not in message
    assert KEY not in caplog.text


def test_echoed_credentials_are_redacted_from_a_successful_body():
    with EchoServer(ok_after=0) as server:
        body = _client().post_json(server.url + "/v1/embeddings", {"input": ["a"]}, {"Authorization": f"Bearer {KEY}"})
    assert body["data"][0]["embedding"] == [1.0, 0.0]
    assert KEY not in json.dumps(body) and REDACTED in body["note"]


def test_redactor_covers_escaped_spellings_and_ignores_short_values():
    r = Redactor.for_request("http://h/p?api_key=abc%2Fdefghij&page=2", {"Authorization": "Bearer tok/en+12345",
                                                                        "Accept": "application/json"})
    assert r.text("x abc/defghij y") == f"x {REDACTED} y"
    assert r.text("tok%2Fen%2B12345 and tok\\/en+12345") == f"{REDACTED} and {REDACTED}"
    assert r.text("application/json page=2") == "application/json page=2"   # not credentials
    assert Redactor(["short"]).text("short") == "short"


def test_embedding_run_keeps_an_echoed_key_out_of_results(vg_tiny, tmp_path, monkeypatch):
    from mmbench.data.poolset import load_poolset
    from mmbench.results.mteb_layout import summary_json
    from mmbench.results.store import write_results

    monkeypatch.setenv("ECHO_KEY", KEY)
    ps = load_poolset(vg_tiny)
    for cls, extra in ((OpenAIEmbeddingModel, {}), (GeminiEmbeddingModel, {"model": "gemini-embedding-2"})):
        with EchoServer(401) as server:
            model = cls(base_url=server.url + "/v1", api_key_env="ECHO_KEY", max_attempts=1, **extra)
            per_query, seen, info = run_poolset(ps, model, RunOptions(use_cache=False, progress=False, limit=2))
        out = write_results(tmp_path / cls.__name__, per_query, seen,
                            summary_json(ps.task, ps.task_version, ps.content_hash, model.card.identity(), per_query,
                                         info, 0.0))
        assert per_query["error"].notna().all() and "Incorrect API key" in str(per_query["error"].iloc[0])
        for name in ("results.json", "per_query.parquet", "seen.parquet"):
            assert KEY.encode() not in (out / name).read_bytes(), (cls.__name__, name)


class TrickleServer(RawSocketServer):
    """Sends valid HTTP headers, then the body one byte every `gap` seconds (each read succeeds quickly)."""

    def __init__(self, body: bytes, gap: float, tls: ssl.SSLContext | None = None):
        self.body, self.gap, self.sent, self.hung_up, self.tls = body, gap, 0, threading.Event(), tls
        self.scheme = "https" if tls else "http"
        super().__init__(backlog=4)

    def handle(self, conn):
        if self.tls:
            conn = self.tls.wrap_socket(conn, server_side=True)
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(self.body))
                for i in range(len(self.body)):
                    conn.sendall(self.body[i:i + 1])
                    self.sent += 1
                    time.sleep(self.gap)
                time.sleep(0.2)   # closing with unread bytes (TLS) would reset the connection before it is read
            except OSError:
                self.hung_up.set()


def test_the_timeout_bounds_the_whole_request_not_each_read():
    body = json.dumps({"data": [{"index": 0, "embedding": [0.5] * 40}]}).encode()   # ~ 260 bytes
    server = TrickleServer(body, gap=0.05)      # ~ 13 s to send it all; every single read takes 0.05 s
    try:
        with pytest.raises(APIError, match="within 1s") as err:
            _client(timeout=1, attempts=1).post_json(server.url, {"input": ["a"]})
        assert err.value.status is None
        assert server.hung_up.wait(10) and server.sent < len(body) // 2   # the client hung up early
    finally:
        server.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a test certificate")
def test_the_whole_request_limit_holds_over_tls(tmp_path, monkeypatch):
    """Real APIs are HTTPS: the watchdog must reach the socket under the TLS layer too."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    monkeypatch.setattr(ssl, "_create_default_https_context", ssl._create_unverified_context)  # self-signed
    body = json.dumps({"data": [{"index": 0, "embedding": [0.5] * 40}]}).encode()
    server = TrickleServer(body, gap=0.05, tls=server_tls)
    try:
        with pytest.raises(APIError, match="within 1s"):
            _client(timeout=1, attempts=1).post_json(server.url, {"input": ["a"]})
        assert server.hung_up.wait(10) and server.sent < len(body) // 2
        fast = TrickleServer(body, gap=0.0, tls=server_tls)     # and an ordinary HTTPS reply still works
        try:
            assert _client(timeout=5).post_json(fast.url, {})["data"][0]["index"] == 0
        finally:
            fast.close()
    finally:
        server.close()


class Overloaded(LoopbackServer):
    def __init__(self, failures: int):
        self.failures, self.calls = failures, 0
        super().__init__()

    def handle(self, path, headers, body):
        self.calls += 1
        if self.calls <= self.failures:
            return 529, {}, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return 200, {}, {"ok": True}


def test_anthropic_overloaded_529_is_retried():
    with Overloaded(2) as server:
        assert _client(attempts=3).post_json(server.url, {}) == {"ok": True}
        assert server.calls == 3


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")])
def test_nonsense_timeouts_are_refused(timeout):
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        HttpClient(timeout=timeout)


def test_an_ordinary_reply_still_works_within_the_limit():
    with EchoServer(ok_after=0) as server:
        vec = OpenAIEmbeddingModel(model="m", base_url=server.url).encode([Document("a", [Text("x")])], "query", None)
    assert np.allclose(vec, [[1.0, 0.0]])


def test_unusable_requests_with_a_key_in_them_are_reported_redacted():
    with pytest.raises(APIError, match="unknown url type") as err:
        _client().post_json(f"htp://example.invalid/v1?key={KEY}", {})
    assert KEY not in str(err.value)
    with EchoServer(ok_after=0) as server, pytest.raises(APIError, match="invalid request") as err:
        _client().post_json(server.url, {}, {"x-api-key": KEY + "\nInjected: 1"})   # http.client quotes the value
    assert KEY not in str(err.value) and err.value.attempts == 1


def test_a_password_in_the_url_reaches_neither_cards_nor_errors(monkeypatch):
    from mmbench.common.http_client import public_url
    from mmbench.rankers import load_ranker

    password = "hunter2-VERY-secret"
    url = f"http://someone:{password}@127.0.0.1:9/v1?api_key={KEY}#frag"
    assert public_url(url) == "http://127.0.0.1:9/v1"
    model = OpenAIEmbeddingModel(model="m", base_url=url, max_attempts=1)
    ranker = load_ranker("openai-chat", "m", base_url=url)
    for card in (model.card.identity(), ranker.card.identity()):
        assert password not in json.dumps(card) and KEY not in json.dumps(card)
    with pytest.raises(APIError) as err:
        model.encode([Document("a", [Text("x")])], "query", None)
    assert password not in str(err.value) and KEY not in str(err.value)
