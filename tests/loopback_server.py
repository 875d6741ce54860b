"""A JSON-over-HTTP test server on 127.0.0.1 (port 0, own thread) that counts requests in flight.

Subclasses say how to answer a POST (`handle`); this class reads the JSON body, keeps the
in-flight count (for concurrency bounds) and sends the answer. The fake embedding, chat and
auditor servers of the tests are built on it.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoopbackServer:
    def __init__(self) -> None:
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with outer.lock:
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                try:
                    status, extra_headers, payload = outer.handle(self.path, headers, body)
                finally:
                    # Leave the in-flight count before answering: once the client has its answer it may
                    # send the next request, which must not overlap this one in the count.
                    with outer.lock:
                        outer.in_flight -= 1
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    for k, v in extra_headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout under test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def handle(self, path: str, headers: dict[str, str], body: Any) -> tuple[int, dict[str, str], Any]:
        """(status, extra response headers, JSON-able payload or raw bytes) for one POST."""
        raise NotImplementedError

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
