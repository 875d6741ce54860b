"""A fake OpenAI-compatible / Anthropic chat server on 127.0.0.1 for ranker tests (port 0, own thread).

The server decodes each request into (intro text, labels, image bytes in presented order) and
asks `responder(request) -> (status, reply text or full JSON body)`; text replies are wrapped in
the API's envelope with fake token usage. Every request is recorded.
"""
from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class ChatRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    system: str
    intro: str
    labels: list[str]
    images: list[bytes]
    mimes: list[str] = field(default_factory=list)


def _decode(path: str, headers: dict[str, str], body: dict[str, Any]) -> ChatRequest:
    if "system" in body:  # Anthropic
        system, parts = body["system"], body["messages"][0]["content"]
        texts = [p["text"] for p in parts if p["type"] == "text"]
        imgs = [p["source"] for p in parts if p["type"] == "image"]
        images = [base64.b64decode(s["data"]) for s in imgs]
        mimes = [s["media_type"] for s in imgs]
    else:
        system, parts = body["messages"][0]["content"], body["messages"][1]["content"]
        texts = [p["text"] for p in parts if p["type"] == "text"]
        urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
        mimes = [u.split(";")[0][len("data:"):] for u in urls]
        images = [base64.b64decode(u.split(",", 1)[1]) for u in urls]
    return ChatRequest(path, headers, body, system, texts[0], texts[1:-1], images, mimes)


def openai_envelope(text: str | None, refusal: str | None = None, finish: str = "stop") -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": text, "refusal": refusal}}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}}


def anthropic_envelope(text: str, stop: str = "end_turn") -> dict[str, Any]:
    return {"id": "m", "type": "message", "role": "assistant", "content": [{"type": "text", "text": text}],
            "stop_reason": stop, "usage": {"input_tokens": 2000, "output_tokens": 40}}


class FakeLLMServer:
    def __init__(self, responder: Callable[[ChatRequest], tuple[int, Any]], kind: str = "openai", delay: float = 0.0):
        self.responder, self.kind, self.delay = responder, kind, delay
        self.requests: list[ChatRequest] = []
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                req = _decode(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with outer.lock:
                    outer.requests.append(req)
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                try:
                    if outer.delay:
                        time.sleep(outer.delay)
                    status, reply = outer.responder(req)
                    if isinstance(reply, str) or reply is None:
                        reply = openai_envelope(reply) if outer.kind == "openai" else anthropic_envelope(reply)
                    raw = json.dumps(reply).encode()
                finally:
                    # Leave the in-flight count before answering, so the client's next request never
                    # overlaps this one in the count.
                    with outer.lock:
                        outer.in_flight -= 1
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "FakeLLMServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
