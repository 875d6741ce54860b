"""The reference listwise ranker of the reproduction matrix: a fixed function behind a loopback chat server.

`ReferenceServer` answers OpenAI-compatible chat completions on 127.0.0.1 (a free port, its own thread), and
`reference_ranker` points the ordinary `openai-chat` adapter at it, so a run goes through everything a real
ranker run does: the prompt, the images read from the pool set and sent as data URLs in the stored order, the
HTTP client, the reply's parsing and repairs, the metrics, tokens and the results' layout. Only the model is
replaced, by `reference_reply`: a pure function of the request.

Its ranking orders the images by the SHA-256 of the request's introduction (which holds the query) and each
image's bytes, so it is chance-level by design and moves with any change to what is sent. One request in
eight of each kind (by the body's digest) answers with a flaw the parser must repair: the array inside prose,
an image left out, a number repeated, numbers as strings. Token counts are the request's and reply's lengths
in bytes over four.
"""
from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mmbench.rankers.openai_chat import OpenAIChatRanker

MODEL = "mmbench-reference"
SHOWN_URL = "loopback: mmbench reference server"   # what results record instead of the port-bearing URL
FLAWS = ("prose", "missing", "duplicate", "strings")   # digest byte % 8 below len(FLAWS): that flaw; else none


def _parts(body: dict[str, Any]) -> tuple[str, list[bytes]]:
    """The introduction and the images' bytes in presented order, from an openai-chat request body."""
    content = body["messages"][1]["content"]
    intro = next(p["text"] for p in content if p.get("type") == "text")
    images = [base64.b64decode(p["image_url"]["url"].split(",", 1)[1]) for p in content
              if p.get("type") == "image_url"]
    return intro, images


def reference_order(intro: str, images: list[bytes]) -> list[int]:
    """Image numbers (1-based) by the SHA-256 of the introduction and each image's bytes."""
    head = intro.encode("utf-8") + b"\0"
    return sorted(range(1, len(images) + 1), key=lambda i: hashlib.sha256(head + images[i - 1]).digest())


def reference_reply(body: dict[str, Any]) -> dict[str, Any]:
    """The chat-completion response the reference server gives for one request body."""
    intro, images = _parts(body)
    order: list[Any] = reference_order(intro, images)
    canonical = json.dumps(body, sort_keys=True).encode("utf-8")
    flaw_index = hashlib.sha256(canonical).digest()[0] % 8
    flaw = FLAWS[flaw_index] if flaw_index < len(FLAWS) else None
    if flaw == "missing" and len(order) > 1:
        order = order[:-1]
    elif flaw == "duplicate" and order:
        order = [*order, order[0]]
    elif flaw == "strings":
        order = [str(i) for i in order]
    text = json.dumps(order)
    if flaw == "prose":
        text = f"Here is my ranking, best match first:\n{text}\nI hope this helps."
    return {"id": "reference", "object": "chat.completion", "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text, "refusal": None}}],
            "usage": {"prompt_tokens": len(canonical) // 4, "completion_tokens": len(text.encode()) // 4 + 1}}


class ReferenceServer:
    """`reference_reply` over HTTP on 127.0.0.1; use as a context manager (`url` is the API base URL)."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                    status, answer = 200, reference_reply(body)
                except (ValueError, KeyError, IndexError, TypeError, StopIteration) as exc:
                    status, answer = 400, {"error": {"message": f"not a listwise ranking request ({exc})"}}
                raw = json.dumps(answer).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "ReferenceServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def reference_ranker(server: ReferenceServer, **options: Any) -> OpenAIChatRanker:
    """The `openai-chat` adapter pointed at `server`, its card naming the reference server instead of the port
    (so the run's protocol id is the same on every run), never caching."""
    ranker = OpenAIChatRanker(MODEL, base_url=server.url, cache_dir=None, api_key_env="MMBENCH_REFERENCE_NO_KEY",
                              **options)
    ranker.card = replace(ranker.card, name=f"openai-chat:{MODEL}",
                          settings={**ranker.card.settings, "base_url": SHOWN_URL})
    return ranker
