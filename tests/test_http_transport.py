"""The HTTP client's transport against raw socket servers: the per-attempt limit holds whatever part of
the reply stalls or trickles, and a redirect is refused rather than followed (with the key) elsewhere."""
from __future__ import annotations

import threading
import time

import pytest

from raw_socket_server import RawSocketServer
from mmbench.common import http_client
from mmbench.common.http_client import APIError, HttpClient, RetryPolicy

KEY = "sk-live-TRANSPORT-0123456789abcdef"


class RawServer(RawSocketServer):
    """Answers every connection with `reply(conn)`; notes what it received, when the client hung up on it and
    whether a reply ran to its end."""

    def __init__(self, reply):
        self.reply, self.hung_up, self.finished = reply, threading.Event(), threading.Event()
        self.received: list[bytes] = []
        super().__init__(backlog=8)

    def handle(self, conn):
        with conn:
            try:
                self.received.append(conn.recv(65536))
                self.reply(conn)
                self.finished.set()
            except OSError:
                self.hung_up.set()


def _client(timeout=1.0, attempts=1) -> HttpClient:
    return HttpClient(retry=RetryPolicy(max_attempts=attempts), timeout=timeout, max_concurrency=1,
                      sleep=lambda s: None)


def _stall_after_headers(conn):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\"")
    time.sleep(10)


def _trickle_headers(conn):
    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Padding: ")
    for _ in range(400):          # a header line that never ends, one byte every 50 ms (20 s in all)
        conn.sendall(b"a")
        time.sleep(0.05)


@pytest.mark.parametrize("reply", [_stall_after_headers, _trickle_headers], ids=["stalled-body", "trickled-headers"])
def test_the_limit_holds_whichever_part_of_the_reply_is_slow(reply):
    with RawServer(reply) as server:
        with pytest.raises(APIError, match=r"network error: TimeoutError: no complete response within 1s") as err:
            _client(timeout=1).post_json(server.url + "/v1/embeddings", {"input": ["a"]})
        # the client gave up while the reply was still going (it takes 10 s stalled, 20 s trickled); not timed
        assert not server.finished.is_set()
        assert err.value.status is None and err.value.attempts == 1


def test_a_late_watchdog_still_reports_the_whole_request_limit(monkeypatch):
    # On a busy machine the socket's own read timeout can wake before the watchdog's thread runs (CI saw
    # "TimeoutError: timed out"); the attempt is still past its limit and must say so.
    monkeypatch.setattr(http_client._Deadline, "_expire", lambda self: None)   # a watchdog that never runs
    with RawServer(_stall_after_headers) as server:
        with pytest.raises(APIError, match=r"network error: TimeoutError: no complete response within 1s"):
            _client(timeout=1).post_json(server.url + "/v1/embeddings", {"input": ["a"]})


@pytest.mark.parametrize("status", [302, 308])   # urllib followed 301/302/303 as a GET with every header
def test_a_redirect_is_refused_and_the_key_goes_nowhere_else(status):
    with RawServer(lambda conn: None) as elsewhere:
        def redirect(conn):
            conn.sendall(b"HTTP/1.1 %d Moved\r\nLocation: " % status + elsewhere.url.encode() + b"/steal?key=" + KEY.encode()
                         + b"\r\nContent-Length: 0\r\n\r\n")
        with RawServer(redirect) as server:
            with pytest.raises(APIError, match=rf"HTTP {status}: redirect to http://127\.0\.0\.1:\d+/steal not followed") as err:
                _client(attempts=3).post_json(server.url + "/v1/embeddings", {"input": ["a"]},
                                              {"Authorization": f"Bearer {KEY}"})
        time.sleep(0.2)
        assert err.value.status == status and err.value.attempts == 1   # not retried
        assert elsewhere.connections == 0 and KEY not in str(err.value)


def _never_answer(conn):
    time.sleep(10)   # accepts the connection, reads the request, says nothing


def test_a_slow_server_is_reachable_and_a_closed_port_is_not():
    """`unreachable` (which stops `mmbench rank` as offline) means no attempt connected: a server that accepts
    and then times out every attempt is slow, not offline, and must not be reported as unreachable."""
    with RawServer(_never_answer) as server:
        with pytest.raises(APIError, match="TimeoutError") as slow:
            _client(timeout=0.5, attempts=2).post_json(server.url + "/v1/chat/completions", {"m": 1})
    assert server.connections == 2 and slow.value.unreachable is False
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # closed when the block ends: connecting is refused
    with pytest.raises(APIError, match="network error") as closed:
        _client(timeout=0.5, attempts=2).post_json(f"http://127.0.0.1:{port}/v1/chat/completions", {"m": 1})
    assert closed.value.unreachable is True
