"""A small JSON-over-HTTP client for API models: retries with backoff, rate limit, bounded concurrency.

Shared by the API embedders and the LLM rankers. Only the standard library is used. Header
values (API keys) never appear in errors or logs; retry decisions are logged by status only.
"""
from __future__ import annotations

import datetime
import email.utils
import json
import logging
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, TypeVar

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
    retry_statuses: frozenset[int] = field(default_factory=lambda: frozenset({408, 409, 425, 429, 500, 502,
                                                                               503, 504}))
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
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.limiter = RateLimiter(requests_per_second)
        self._sleep = sleep
        self.requests_sent = 0
        self._count_lock = threading.Lock()

    def post_json(self, url: str, payload: Any, headers: dict[str, str] | None = None) -> Any:
        """POST `payload` as JSON and return the decoded JSON body, retrying transient failures."""
        body = json.dumps(payload).encode("utf-8")
        hdrs = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
        last = "no attempt made"
        status: int | None = None
        for attempt in range(1, self.retry.max_attempts + 1):
            self.limiter.wait()
            with self._count_lock:
                self.requests_sent += 1
            retry_after = None
            try:
                req = urllib.request.Request(url, data=body, headers=hdrs, method="POST")
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
                status = resp.status
                try:
                    return json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, ValueError):
                    last = f"malformed JSON in the response ({len(raw)} bytes)"
            except urllib.error.HTTPError as exc:
                status = exc.code
                detail = _snippet(exc)
                if exc.code not in self.retry.retry_statuses:
                    raise APIError(f"POST {_safe(url)} failed with HTTP {exc.code}: {detail}", exc.code,
                                   attempt) from None
                retry_after = _retry_after(exc.headers)
                last = f"HTTP {exc.code}: {detail}"
            except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as exc:
                status = None
                reason = getattr(exc, "reason", exc)
                last = f"network error: {type(reason).__name__}: {reason}"
            if attempt < self.retry.max_attempts:
                wait = self.retry.delay(attempt, retry_after)
                log.info("POST %s: %s; retry %d/%d in %.2fs", _safe(url), last.split(":")[0], attempt,
                         self.retry.max_attempts - 1, wait)
                self._sleep(wait)
        raise APIError(f"POST {_safe(url)} failed after {self.retry.max_attempts} attempts: {last}", status,
                       self.retry.max_attempts)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Apply `fn` to every item with at most `max_concurrency` in flight; results keep input order."""
        items = list(items)
        if self.max_concurrency == 1 or len(items) <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            return list(pool.map(fn, items))


def _safe(url: str) -> str:
    """The URL without its query string (which may carry a key)."""
    return url.split("?", 1)[0]


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
