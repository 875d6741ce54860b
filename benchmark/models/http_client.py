"""A small JSON-over-HTTP client for API models, built on `requests`: retries with backoff, rate limit,
bounded concurrency, kept-alive connections, and one time limit per attempt.

Shared by the API embedders and the LLM rankers.

Credentials: every credential a request carries (the values of credential headers such as
`Authorization`, `x-api-key`, `x-goog-api-key`, key-like query-string parameters and a password in
the URL) is redacted from every error message, log line and response body this module hands back, so
a server that echoes the key in an error cannot make it reach results, caches or the terminal. Only
those credentials are sent: requests' ~/.netrc look-up is off, cookies are neither kept nor sent back,
redirects are not followed (a POST must not turn into a request elsewhere), and urllib3's debug log
lines lose their query strings.

Time: `timeout` bounds each attempt as a whole (connect, TLS handshake, headers and body together),
not each socket read. requests' own timeouts hold per socket operation, so a server that trickles
bytes could stretch them without end; a watchdog therefore shuts the attempt's connection when its
time is up. It learns of the connection through urllib3's connection class (`_Watched`), and shuts a
duplicate of the socket's descriptor, which ends the TCP connection under whoever reads it (a TLS
layer included) without touching their socket object from the watchdog's thread.

Connections: an attempt borrows a `requests.Session` no other attempt is using and gives it back
only after its watchdog is disarmed, so kept-alive connections are reused from request to request
while one attempt's watchdog can never reach a connection another attempt has taken over.
"""
from __future__ import annotations

import base64
import datetime
import email.utils
import http.client
import http.cookiejar
import json
import logging
import os
import queue
import random
import re
import socket
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, TypeVar

import requests
from requests.adapters import HTTPAdapter
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, poolmanager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import HTTPError as Urllib3Error

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before trying a request again."""

    max_attempts: int = 5
    backoff_base: float = 0.5      # seconds before the 2nd attempt; doubles each time
    backoff_max: float = 30.0
    jitter: float = 0.1            # ± fraction of the delay, spreads out concurrent retries
    # 529: Anthropic's overloaded_error (a transient capacity error, like 503)
    retry_statuses: frozenset[int] = field(default_factory=lambda: frozenset({408, 409, 425, 429, 500, 502,
                                                                               503, 504, 529}))
    max_retry_after: float = 120.0  # a server's Retry-After is honoured up to this many seconds

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        base = min(self.backoff_max, self.backoff_base * (2 ** (attempt - 1)))
        return max(0.0, base * (1 + random.uniform(-self.jitter, self.jitter)))


class APIError(RuntimeError):
    """A request failed for good; `status` is the last HTTP status (None for network errors)."""

    def __init__(self, message: str, status: int | None = None, attempts: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8   # shorter values cannot be told apart from ordinary text; real API keys are far longer
_CREDENTIAL_HEADER = re.compile(r"auth|key|token|secret|password|cookie|signature", re.IGNORECASE)
_CREDENTIAL_PARAM = re.compile(r"key|token|secret|password|auth|sig|credential", re.IGNORECASE)


class Redactor:
    """Removes given secrets (and their URL- and JSON-escaped spellings) from text and bytes."""

    def __init__(self, secrets: Iterable[str]) -> None:
        spellings: set[str] = set()
        for secret in secrets:
            if len(secret) < MIN_SECRET_CHARS:
                continue
            escaped = json.dumps(secret)[1:-1]
            spellings |= {secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret), escaped,
                          escaped.replace("/", "\\/")}   # some servers escape '/' in JSON strings
        self.secrets = sorted(spellings, key=len, reverse=True)   # longest first: a key inside a longer one
        self._bytes = [s.encode("utf-8") for s in self.secrets]

    @classmethod
    def for_request(cls, url: str, headers: dict[str, str]) -> "Redactor":
        """The credentials a request sends: credential header values (each word too, for 'Bearer KEY'),
        the values of key-like query-string parameters, and a password in the URL."""
        found: list[str] = []
        for name, value in headers.items():
            if _CREDENTIAL_HEADER.search(name) and value:
                found += [value, *value.split()]
        parts = urllib.parse.urlsplit(url)
        found += [v for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True) if _CREDENTIAL_PARAM.search(k)]
        if "@" in parts.netloc:   # https://user:password@host/...
            userinfo = parts.netloc.rsplit("@", 1)[0]
            found += [urllib.parse.unquote(x) for x in userinfo.split(":", 1)[1:]] + [userinfo]
        return cls(found)

    def text(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def bytes(self, data: bytes) -> bytes:
        for secret in self._bytes:
            if secret in data:
                data = data.replace(secret, REDACTED.encode())
        return data


_current = threading.local()   # `.deadline`: the deadline of the attempt running on this thread


class _Deadline:
    """Shuts the connections of one attempt when its time is up, so that no read or write outlives it.

    `watch` keeps a duplicate of a socket's descriptor; expiry shuts the duplicates down (which wakes a
    blocked read with end-of-file), and the end of the attempt closes them, after which nothing is shut."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._done = False
        self._twins: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def watch(self, sock: socket.socket) -> None:
        try:
            twin = socket.socket(fileno=os.dup(sock.fileno()))
        except OSError:   # already closed: nothing left to shut
            return
        with self._lock:
            self._twins.append(twin)
            if self.expired:
                _shut(twin)

    def _expire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.expired = True
            for twin in self._twins:
                _shut(twin)

    def __enter__(self) -> "_Deadline":
        _current.deadline = self
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._timer.cancel()
        _current.deadline = None
        with self._lock:
            self._done = True
            for twin in self._twins:
                twin.close()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _watch(sock: socket.socket) -> None:
    deadline = getattr(_current, "deadline", None)
    if deadline is not None:
        deadline.watch(sock)


class _Watched:
    """A urllib3 connection whose sockets the running attempt's deadline watches: the socket it opens (from
    before the TLS handshake) and, for a kept-alive connection, the one it sends a new request on."""

    sock: Any

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()  # type: ignore[misc]
        _watch(sock)
        return sock

    def request(self, *args: Any, **kw: Any) -> None:
        if self.sock is not None:
            _watch(self.sock)
        super().request(*args, **kw)  # type: ignore[misc]


class _HTTPConnection(_Watched, HTTPConnection):
    pass


class _HTTPSConnection(_Watched, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


_POOLS = {"http": _HTTPPool, "https": _HTTPSPool}


class _Adapter(HTTPAdapter):
    """requests' adapter with watched connections, direct and through an HTTP(S) proxy."""

    def init_poolmanager(self, *args: Any, **kw: Any) -> None:
        super().init_poolmanager(*args, **kw)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **kw: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **kw)
        if manager.pool_classes_by_scheme is poolmanager.pool_classes_by_scheme:   # not SOCKS's own classes
            manager.pool_classes_by_scheme = _POOLS
        return manager


def _send_as_is(request: requests.PreparedRequest) -> requests.PreparedRequest:
    """An auth hook that adds nothing: with it set, requests does not look credentials up in ~/.netrc."""
    return request


def _session() -> requests.Session:
    session = requests.Session()   # proxies and REQUESTS_CA_BUNDLE still come from the environment
    session.mount("http://", _Adapter())
    session.mount("https://", _Adapter())
    session.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))   # keep no cookie
    session.auth = _send_as_is
    return session


class _HideQueries(logging.Filter):
    """urllib3 logs request lines and URLs with their query strings, which may carry a key: drop them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(a.split("?", 1)[0] + "?[query hidden]" if isinstance(a, str) and "?" in a else a
                                for a in record.args)
        return True


for _name in ("connection", "connectionpool", "poolmanager", "response", "util.retry"):
    logging.getLogger(f"urllib3.{_name}").addFilter(_HideQueries())


def _basic_auth(url: str) -> dict[str, str]:
    """`Authorization: Basic …` for a user:password in the URL, as a header, so that it is redacted too."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return {}
    pair = f"{urllib.parse.unquote(parts.username or '')}:{urllib.parse.unquote(parts.password or '')}"
    return {"Authorization": "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")}


class RateLimiter:
    """At most `per_second` request starts per second across threads (evenly spaced)."""

    def __init__(self, per_second: float | None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.interval = 1.0 / per_second if per_second else 0.0
        self._next = 0.0
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = self._clock()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            self._sleep(start - now)


def _retry_after(headers: Any, now: Callable[[], float] = time.time) -> float | None:
    """Seconds a server asks us to wait: Retry-After as delay-seconds or as an HTTP date (RFC 9110)."""
    value = headers.get("Retry-After") if headers is not None else None
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None  # unreadable: fall back to exponential backoff
    if when.tzinfo is None:  # HTTP dates are GMT; a date without a zone is read as UTC
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, when.timestamp() - now())


class HttpClient:
    """POST JSON, get JSON, with retries; `map` runs calls with bounded concurrency."""

    def __init__(self, retry: RetryPolicy | None = None, timeout: float = 60.0, max_concurrency: int = 4,
                 requests_per_second: float | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if not (isinstance(timeout, (int, float)) and timeout > 0 and timeout != float("inf")):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.limiter = RateLimiter(requests_per_second)
        self._sleep = sleep
        self.requests_sent = 0
        self._count_lock = threading.Lock()
        self._idle: queue.SimpleQueue[requests.Session] = queue.SimpleQueue()   # sessions no attempt is using

    def post_json(self, url: str, payload: Any, headers: dict[str, str] | None = None) -> Any:
        """POST `payload` as JSON and return the decoded JSON body, retrying transient failures.

        Each attempt ends within `timeout` seconds; the credentials sent are redacted from every error,
        log line and the returned body."""
        body = json.dumps(payload).encode("utf-8")
        hdrs = {"Content-Type": "application/json", "Accept": "application/json", **_basic_auth(url), **(headers or {})}
        redact = Redactor.for_request(url, hdrs)
        shown = redact.text(public_url(url))
        last = "no attempt made"
        status: int | None = None
        for attempt in range(1, self.retry.max_attempts + 1):
            self.limiter.wait()
            with self._count_lock:
                self.requests_sent += 1
            try:
                status, raw, detail, retry_after = self._attempt(url, body, hdrs)
            except ValueError as exc:   # an unusable URL or header: no retry helps, and the URL may hold a key
                raise APIError(f"POST {shown}: invalid request ({redact.text(str(exc))})", None, attempt) from None
            if raw is not None:
                try:
                    return json.loads(redact.bytes(raw).decode("utf-8"))
                except (UnicodeDecodeError, ValueError):
                    last = f"malformed JSON in the response ({len(raw)} bytes)"
            elif status is not None:
                last = f"HTTP {status}: {redact.text(detail)}"
                if status not in self.retry.retry_statuses:
                    raise APIError(f"POST {shown} failed with {last}", status, attempt)
            else:
                last = f"network error: {redact.text(detail)}"
            if attempt < self.retry.max_attempts:
                wait = self.retry.delay(attempt, retry_after)
                log.info("POST %s: %s; retry %d/%d in %.2fs", shown, last.split(":")[0], attempt,
                         self.retry.max_attempts - 1, wait)
                self._sleep(wait)
        raise APIError(f"POST {shown} failed after {self.retry.max_attempts} attempts: {last}", status,
                       self.retry.max_attempts)

    def _attempt(self, url: str, body: bytes, headers: dict[str, str]
                 ) -> tuple[int | None, bytes | None, str, float | None]:
        """One request within the deadline: (status, body on success, error detail, Retry-After seconds)."""
        try:
            session = self._idle.get_nowait()
        except queue.Empty:
            session = _session()
        try:
            with _Deadline(self.timeout) as deadline:
                try:   # the per-operation timeouts only back the watchdog up
                    resp = session.post(url, data=body, headers=headers, timeout=(self.timeout, self.timeout),
                                        allow_redirects=False)
                    raw = resp.content
                except (OSError, ValueError, http.client.HTTPException, Urllib3Error) as exc:
                    if deadline.expired:
                        return None, None, self._late(), None
                    if isinstance(exc, ValueError):   # requests' InvalidURL, InvalidSchema, InvalidHeader …
                        raise
                    return None, None, _reason(exc), None
            if deadline.expired:   # a body cut short by the watchdog can still look complete
                return None, None, self._late(), None
        finally:
            self._idle.put(session)
        if 200 <= resp.status_code < 300:
            return resp.status_code, raw, "", None
        if 300 <= resp.status_code < 400:
            detail = f"redirect to {public_url(resp.headers.get('Location', '(no Location)'))} not followed"
        else:
            detail = _snippet(raw, resp.reason)
        return resp.status_code, None, detail, _retry_after(resp.headers)

    def _late(self) -> str:
        return f"TimeoutError: no complete response within {self.timeout:g}s (the limit covers the whole request)"

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Apply `fn` to every item with at most `max_concurrency` in flight; results keep input order."""
        items = list(items)
        if self.max_concurrency == 1 or len(items) <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            return list(pool.map(fn, items))


def public_url(url: str) -> str:
    """The URL as it may be shown and recorded: no user:password part, no query string, no fragment
    (all of which may carry a credential)."""
    parts = urllib.parse.urlsplit(url.split("?", 1)[0].split("#", 1)[0])
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def _reason(exc: BaseException) -> str:
    """'Kind: message' of a network error, from the innermost reason requests and urllib3 wrap it in."""
    while True:
        inner = getattr(exc, "reason", None)
        if not isinstance(inner, BaseException) and exc.args and isinstance(exc.args[0], BaseException):
            inner = exc.args[0]
        if not isinstance(inner, BaseException):
            return f"{type(exc).__name__}: {exc}"
        exc = inner


def _snippet(raw: bytes, reason: str | None, limit: int = 300) -> str:
    text = " ".join(raw.decode("utf-8", "replace").split())
    return text[:limit] + ("..." if len(text) > limit else "") if text else reason or "no body"


def post_json(url: str, payload: Any, headers: dict[str, str] | None = None, *, retry: RetryPolicy | None = None,
              timeout: float = 60.0) -> Any:
    """One-off POST with retries (a fresh client; use `HttpClient` to share limits across calls)."""
    return HttpClient(retry=retry, timeout=timeout, max_concurrency=1).post_json(url, payload, headers)
