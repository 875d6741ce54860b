"""A fake OpenAI-compatible / Anthropic chat server on 127.0.0.1 for ranker tests (port 0, own thread).

The server decodes each request into (intro text, labels, image bytes in presented order) and
asks `responder(request) -> (status, reply text or full JSON body)`; text replies are wrapped in
the API's envelope with fake token usage. Every request is recorded.
"""
from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from loopback_server import LoopbackServer


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


class FakeLLMServer(LoopbackServer):
    def __init__(self, responder: Callable[[ChatRequest], tuple[int, Any]], kind: str = "openai", delay: float = 0.0):
        self.responder, self.kind, self.delay = responder, kind, delay
        self.requests: list[ChatRequest] = []
        super().__init__()

    def handle(self, path: str, headers: dict[str, str], body: Any) -> tuple[int, dict[str, str], Any]:
        req = _decode(path, headers, body)
        with self.lock:
            self.requests.append(req)
        if self.delay:
            time.sleep(self.delay)
        status, reply = self.responder(req)
        if isinstance(reply, str) or reply is None:
            reply = openai_envelope(reply) if self.kind == "openai" else anthropic_envelope(reply)
        return status, {"Content-Type": "application/json"}, reply
