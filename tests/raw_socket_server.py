"""A raw TCP test server on 127.0.0.1 (port 0): accepts connections in its own thread and hands each
one to `self.handle(conn)` in a thread of its own, for tests that need byte-level control of a reply
(stalls, trickles, redirects) that http.server would not give. Subclasses write `handle`; `close`
(or leaving a `with` block) stops accepting. `connections` counts the connections accepted.
"""
from __future__ import annotations

import socket
import threading


class RawSocketServer:
    scheme = "http"

    def __init__(self, backlog: int = 8) -> None:
        self.connections = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.url = f"{self.scheme}://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.connections += 1
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
