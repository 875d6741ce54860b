"""A small JSON-over-HTTP client for API models: retries with backoff, rate limit, bounded concurrency.

Shared by the API embedders and the LLM rankers. Only the standard library is used: a version on
`requests` still needed this watchdog (its timeouts hold per socket read) and had to switch off its
~/.netrc look-up, cookie jar, redirects and urllib3's query-string log lines, and came out longer
(README, "HTTP transport: why urllib, not requests").

Credentials: every credential a request carries (the values of credential headers such as
`Authorization`, `x-api-key`, `x-goog-api-key`, and key-like query-string parameters) is redacted
from every error message, log line and response body this module hands back, so a server that
echoes the key in an error cannot make it reach results, caches or the terminal. Redirects are
refused, so the key goes to the host the caller named and nowhere else.

Credentials in a URL (`https://user:password@host/v1`, an authenticating proxy or gateway) are taken out
of the URL before the request: `user:password` is sent as HTTP basic auth, and a key alone
(`https://KEY@host/v1` or `https://:KEY@host/v1`) is handed to the adapter, which sends it in the API's own
key header (`URLAuth`). The request goes to the host without the user info; the user info is never shown.

Time: `timeout` bounds each attempt as a whole (connect, headers and body together), not each
socket read: a watchdog shuts the attempt's socket when its time is up, so a server that trickles
bytes cannot stretch a request past it.
"""
from __future__ import annotations

import base64
import binascii
import datetime
import email.utils
import http.client
import json
import logging
import os
import random
import re
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, TypeVar

from mmbench.common.url_redaction import CREDENTIAL_PARAM, public_url, redact_url_text, redact_urls

log = logging.getLogger(__name__)
__all__ = ["APIError", "HttpClient", "RateLimiter", "Redactor", "RetryPolicy", "URLAuth", "api_key", "basic_auth_header",
           "post_json", "public_url", "redact_url_text", "redact_urls", "split_url_credentials"]
T = TypeVar("T")
R = TypeVar("R")
_Sock = TypeVar("_Sock", bound=socket.socket)  # a TCP or TLS socket, handed back as it came


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
    """A request failed for good; `status` is the last HTTP status (None for network errors).
    `unreachable`: no attempt connected to the server (refused, no route, no such host); a server that accepted
    the connection and then timed out is slow, not unreachable."""

    def __init__(self, message: str, status: int | None = None, attempts: int = 0, unreachable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts
        self.unreachable = unreachable


REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8   # shorter values cannot be told apart from ordinary text; real API keys are far longer
_CREDENTIAL_HEADER = re.compile(r"auth|key|token|secret|password|cookie|signature", re.IGNORECASE)


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
                found += [value, *value.split(), *_basic_secrets(value)]
        parts = urllib.parse.urlsplit(url)
        found += [v for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True) if CREDENTIAL_PARAM.search(k)]
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


def _basic_secrets(value: str) -> list[str]:
    """The decoded `user:password` and the password of an HTTP basic-auth header value (none for others)."""
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "basic":
        return []
    try:
        pair = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return []
    return [pair, pair.partition(":")[2]]


@dataclass(frozen=True)
class URLAuth:
    """A base URL split from the credentials in its user info.

    `url`: the URL the requests go to (no user info); `key`: the user info when it is a key alone
    (`https://KEY@host` or `https://:KEY@host`), for the adapter to send in the API's own key header;
    `basic`: the `Authorization: Basic` header when the user info is `user:password`."""

    url: str
    key: str | None = None
    basic: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, url: str) -> "URLAuth":
        user, password, bare = split_url_credentials(url)
        if user is None:
            return cls(bare)
        if password is None or not user:   # the user info is the key itself
            return cls(bare, key=(password if not user else user) or None)
        return cls(bare, basic=basic_auth_header(user, password))

    def headers(self, key_headers: dict[str, str]) -> dict[str, str]:
        """The request's headers: the API's key headers, then basic auth (which takes `Authorization`)."""
        return {**key_headers, **self.basic}


def split_url_credentials(url: str) -> tuple[str | None, str | None, str]:
    """(user, password, the URL without its user info); user is None when the URL has no user info, password
    None when it has no ':'. Both are percent-decoded."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return None, None, url
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, colon, password = userinfo.partition(":")
    bare = urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return urllib.parse.unquote(user), urllib.parse.unquote(password) if colon else None, bare


def basic_auth_header(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode("utf-8")).decode("ascii")
    return {"Authorization": f"Basic {token}"}


class _Deadline:
    """Shuts the sockets of one attempt when its time is up, so that no read can outlive the attempt."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._expired = False
        self._started: float | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    @property
    def expired(self) -> bool:
        """Whether the attempt's time is up: the watchdog fired, or the time has run out and the watchdog's
        thread has not run yet (a busy machine can wake a socket's own read timeout first)."""
        started = self._started
        return self._expired or (started is not None and time.monotonic() - started >= self.seconds)

    @property
    def connected(self) -> bool:
        """Whether this attempt opened a connection (a socket is watched only once it is connected)."""
        return bool(self._sockets)

    def watch(self, sock: _Sock) -> _Sock:
        with self._lock:
            self._sockets.append(sock)
            late = self._expired
        if late:
            _shut(sock)
        return sock

    def _expire(self) -> None:
        with self._lock:
            self._expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def __enter__(self) -> "_Deadline":
        self._started = time.monotonic()
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    """Shut the connection down under whoever reads it, which wakes a blocked read with end-of-file.

    Works through a duplicate descriptor, so neither the socket object nor a TLS wrapper around it is
    touched from this thread; a socket already closed, or handed over to a TLS wrapper, has no
    descriptor (-1) and is skipped (the wrapper is watched itself)."""
    try:
        fd = sock.fileno()
        if fd < 0:
            return
        dup = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    with dup:
        try:
            dup.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _WatchedTLS:
    """An SSL context stand-in whose sockets are watched from before their handshake (a server can trickle
    that too)."""

    def __init__(self, context: ssl.SSLContext, deadline: _Deadline) -> None:
        self._context, self._deadline = context, deadline

    def wrap_socket(self, sock: socket.socket, **kw: Any) -> ssl.SSLSocket:
        handshake = kw.pop("do_handshake_on_connect", True)
        tls = self._deadline.watch(self._context.wrap_socket(sock, do_handshake_on_connect=False, **kw))
        if handshake:
            tls.do_handshake()
        return tls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _watched(connection_class: type, deadline: _Deadline) -> Any:
    """`connection_class` whose sockets (TCP, also one tunnelled through a proxy, and TLS) `deadline` watches
    (a class made at run time: urllib's handlers take it where they take `http.client.HTTPConnection`)."""

    class Watched(connection_class):
        def connect(self) -> None:
            self._create_connection = lambda *a, **k: deadline.watch(socket.create_connection(*a, **k))
            context = getattr(self, "_context", None)
            if isinstance(context, ssl.SSLContext):   # HTTPS
                self._context = _WatchedTLS(context, deadline)
            super().connect()

    return Watched


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuses redirects: urllib would turn the POST into a GET and send every header, the key included,
    to whatever host the Location names. The 3xx reaches the caller as an HTTP error instead."""

    def redirect_request(self, *args: Any, **kw: Any) -> None:
        return None


def _opener(deadline: _Deadline) -> urllib.request.OpenerDirector:
    """urllib's usual opener (proxies from the environment included) with deadline-watched connections
    and no redirects."""

    class HTTP(urllib.request.HTTPHandler):
        def do_open(self, http_class: Any, req: urllib.request.Request, **kw: Any) -> http.client.HTTPResponse:
            return super().do_open(_watched(http_class, deadline), req, **kw)

    class HTTPS(urllib.request.HTTPSHandler):
        def do_open(self, http_class: Any, req: urllib.request.Request, **kw: Any) -> http.client.HTTPResponse:
            return super().do_open(_watched(http_class, deadline), req, **kw)

    return urllib.request.build_opener(HTTP(), HTTPS(), _NoRedirect())


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
        self.retries = 0  # attempts after the first of a call (the efficiency record reports both counts)
        self._count_lock = threading.Lock()

    def post_json(self, url: str, payload: Any, headers: dict[str, str] | None = None) -> Any:
        """POST `payload` as JSON and return the decoded JSON body, retrying transient failures.

        Each attempt ends within `timeout` seconds; the credentials sent are redacted from every error,
        log line and the returned body."""
        body = json.dumps(payload).encode("utf-8")
        hdrs = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
        redact = Redactor.for_request(url, hdrs)
        url, hdrs = _userinfo_as_basic_auth(url, hdrs)
        shown = redact.text(public_url(url))
        last = "no attempt made"
        status: int | None = None
        reached = False   # whether any attempt connected to the server (a slow server is reachable, only slow)
        for attempt in range(1, self.retry.max_attempts + 1):
            self.limiter.wait()
            with self._count_lock:
                self.requests_sent += 1
                self.retries += attempt > 1
            try:
                status, raw, detail, retry_after, connected = self._attempt(url, body, hdrs)
                reached = reached or connected
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
                       self.retry.max_attempts, unreachable=not reached)

    def _attempt(self, url: str, body: bytes, headers: dict[str, str]
                 ) -> tuple[int | None, bytes | None, str, float | None, bool]:
        """One request within the deadline: (status, body on success, error detail, Retry-After seconds,
        whether a connection to the server was made)."""
        deadline = _Deadline(self.timeout)
        with deadline:
            return *self._request(url, body, headers, deadline), deadline.connected

    def _request(self, url: str, body: bytes, headers: dict[str, str], deadline: _Deadline
                 ) -> tuple[int | None, bytes | None, str, float | None]:
        try:
            req = urllib.request.Request(url, data=body, headers=headers, method="POST")
            with _opener(deadline).open(req, timeout=self.timeout) as resp:
                raw = resp.read()
                status = resp.status
            if deadline.expired:   # a body cut short by the watchdog can still look complete
                return None, None, self._late(), None
            return status, raw, "", None
        except urllib.error.HTTPError as exc:
            detail = _snippet(exc)
            if 300 <= exc.code < 400:
                detail = f"redirect to {public_url(exc.headers.get('Location') or '(no Location)')} not followed"
            if deadline.expired:
                return None, None, self._late(), None
            return exc.code, None, detail, _retry_after(exc.headers)
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            if deadline.expired:
                return None, None, self._late(), None
            reason = getattr(exc, "reason", exc)
            return None, None, f"{type(reason).__name__}: {reason}", None

    def _late(self) -> str:
        return f"TimeoutError: no complete response within {self.timeout:g}s (the limit covers the whole request)"

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Apply `fn` to every item with at most `max_concurrency` in flight; results keep input order."""
        items = list(items)
        if self.max_concurrency == 1 or len(items) <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            return list(pool.map(fn, items))


def _userinfo_as_basic_auth(url: str, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
    """`url` without user info, and its `user:password` as basic auth unless an Authorization header is already
    set (urllib would otherwise send the request to a host named 'user:password@host')."""
    user, password, bare = split_url_credentials(url)
    if user is None:
        return url, headers
    if any(k.lower() == "authorization" for k in headers):
        return bare, headers
    return bare, {**headers, **basic_auth_header(user, password or "")}


def _snippet(exc: urllib.error.HTTPError, limit: int = 300) -> str:
    try:
        text = exc.read().decode("utf-8", "replace")
    except Exception:  # the body may already be consumed or the socket closed
        text = ""
    text = " ".join(text.split())
    return text[:limit] + ("..." if len(text) > limit else "") if text else exc.reason or "no body"


def post_json(url: str, payload: Any, headers: dict[str, str] | None = None, *, retry: RetryPolicy | None = None,
              timeout: float = 60.0) -> Any:
    """One-off POST with retries (a fresh client; use `HttpClient` to share limits across calls)."""
    return HttpClient(retry=retry, timeout=timeout, max_concurrency=1).post_json(url, payload, headers)


def api_key(env_var: str, required: bool) -> str | None:
    """The key stored in `env_var`; a clear error when a hosted service needs one and it is unset."""
    value = os.environ.get(env_var, "").strip()
    if not value and required:
        raise ValueError(f"set the environment variable {env_var} to the API key (keys are never passed on the "
                         "command line or written to results)")
    return value or None
