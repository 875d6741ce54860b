"""The listwise ranker protocol: one query and its numbered images in, a complete order out.

`ListwiseRanker.rank` renders the prompt, sends one request (retries, backoff and the rate
limit live in `mmbench.common.http_client`), reads the reply through an on-disk response
cache, parses it with `parse_ranking`, and returns a `RankResult` with the repairs, tokens,
cost and time. API keys are read from the environment when a request is sent and never
stored on the ranker's card, in the cache, or in results.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from mmbench.data.media import MediaStore, atomic_write_bytes
from mmbench.models.api_common import image_bytes
from mmbench.common.http_client import APIError, HttpClient, RetryPolicy, URLAuth, public_url
from mmbench.rankers.parse import parse_ranking
from mmbench.rankers.prompt import DEFAULT_PROMPT, PromptTemplate, RenderedPrompt


@dataclass(frozen=True)
class RankerCard:
    """Identity of a ranker as results record it (what `ModelCard` is for embedders)."""

    name: str
    family: str
    model: str
    revision: str = "api"
    settings: dict[str, Any] = field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        return {"kind": "llm_ranker", "modalities": ["image", "text"], **asdict(self)}


@dataclass(frozen=True)
class Prices:
    """USD per million input / output tokens; None leaves the cost unknown."""

    input_per_mtok: float | None = None
    output_per_mtok: float | None = None

    def cost(self, input_tokens: int | None, output_tokens: int | None) -> float | None:
        if self.input_per_mtok is None or self.output_per_mtok is None:
            return None
        return ((input_tokens or 0) * self.input_per_mtok + (output_tokens or 0) * self.output_per_mtok) / 1e6


@dataclass
class Completion:
    """What an adapter reads from an API response."""

    text: str | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    refusal: str | None = None
    finish_reason: str | None = None


@dataclass
class RankResult:
    """One query's outcome; `ranked_ids` is a full permutation, or [] when `failed`."""

    ranked_ids: list[str]
    repairs: dict[str, int] = field(default_factory=dict)
    failed: bool = False
    error: str | None = None
    raw_text: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    seconds: float = 0.0          # the API call's latency (for a cache hit: the original call's)
    cached: bool = False
    finish_reason: str | None = None
    unreachable: bool = False     # no attempt connected to the server (refused, no route, no such host)

    @property
    def n_repairs(self) -> int:
        return sum(self.repairs.values())


class ResponseCache:
    """Raw API responses on disk, one JSON file per request hash (atomic writes)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            return None  # a damaged entry is treated as a miss and rewritten

    def put(self, key: str, record: dict[str, Any]) -> None:
        atomic_write_bytes(self._path(key), json.dumps(record, sort_keys=True).encode("utf-8"))


def request_key(url: str, payload: Any) -> str:
    """Hash of everything that determines the reply (never the headers, which carry the key)."""
    blob = json.dumps({"url": url.split("?", 1)[0], "payload": payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ListwiseRanker(ABC):
    """Base of the API adapters; subclasses build the payload and read the response."""

    family = "llm"
    default_key_env = ""

    def __init__(self, model: str, base_url: str, default_url: str, api_key_env: str | None = None,
                 prompt: PromptTemplate | None = None, temperature: float = 0.0, max_output_tokens: int = 1024,
                 timeout: float = 120.0, max_attempts: int = 5, max_concurrency: int = 4,
                 requests_per_second: float | None = None, cache_dir: str | Path | None = None,
                 prices: Prices | None = None, name: str | None = None, extra_settings: dict[str, Any] | None = None):
        self.model = model
        self._auth = URLAuth.of((base_url or default_url).rstrip("/"))
        self.base_url = self._auth.url
        self.api_key_env = api_key_env or self.default_key_env
        if self.base_url == default_url.rstrip("/") and not self._key():
            raise ValueError(f"set the environment variable {self.api_key_env} to the API key (keys are never "
                             "passed on the command line or written to results)")
        self.prompt = prompt or DEFAULT_PROMPT
        self.temperature, self.max_output_tokens = temperature, max_output_tokens
        self.client = HttpClient(retry=RetryPolicy(max_attempts=max_attempts), timeout=timeout,
                                 max_concurrency=max_concurrency, requests_per_second=requests_per_second)
        self.cache = ResponseCache(Path(cache_dir)) if cache_dir else None
        self.prices = prices or Prices()
        self.card = RankerCard(
            name=name or f"{self.family}:{model}", family=f"llm-ranker:{self.family}", model=model,
            settings={"base_url": public_url(self.base_url), "temperature": temperature,
                      "max_output_tokens": max_output_tokens, "prompt_version": self.prompt.version,
                      "prices_usd_per_mtok": asdict(self.prices), "api_key_env": self.api_key_env,
                      **(extra_settings or {})})

    def _key(self) -> str | None:
        """The key the base URL carries (`https://KEY@host`), else the one in the environment variable."""
        return self._auth.key or os.environ.get(self.api_key_env, "").strip() or None

    def auth_headers(self, key_headers: dict[str, str]) -> dict[str, str]:
        """`key_headers` plus the basic auth of a base URL holding `user:password`."""
        return self._auth.headers(key_headers)

    @abstractmethod
    def url(self) -> str: ...

    @abstractmethod
    def headers(self) -> dict[str, str]: ...

    @abstractmethod
    def payload(self, prompt: RenderedPrompt, images: Sequence[tuple[bytes, str]]) -> dict[str, Any]:
        """The request body; `images` are (file bytes, MIME type) in presented order."""

    @abstractmethod
    def read(self, response: Any) -> Completion: ...

    def rank(self, query: str, candidate_ids: Sequence[str], image_refs: Sequence[str], media: MediaStore | None,
             item: str = "?") -> RankResult:
        """Rank the images (presented as numbers 1..n in the given order) for `query`.

        Only replies that give a ranking are cached: a failed request, a refusal, a malformed or an
        unparseable reply is never stored, and one found in a cache written before this rule is asked again."""
        n = len(candidate_ids)
        images = [image_bytes(media, ref, f"{item}/{cid}") for cid, ref in zip(candidate_ids, image_refs)]
        body = self.payload(self.prompt.render(query, n), images)
        url = self.url()
        key = request_key(url, body)
        record = self.cache.get(key) if self.cache else None
        if record is not None:
            result = self._result(record, candidate_ids, cached=True)
            if not result.failed:
                return result
        start = time.perf_counter()
        try:
            response = self.client.post_json(url, body, self.headers())
        except APIError as exc:
            return RankResult([], failed=True, error=f"API error: {exc}", seconds=time.perf_counter() - start,
                              unreachable=exc.unreachable)
        record = {"response": response, "seconds": round(time.perf_counter() - start, 4), "model": self.model}
        result = self._result(record, candidate_ids, cached=False)
        if self.cache and not result.failed:
            self.cache.put(key, record)
        return result

    def _result(self, record: dict[str, Any], candidate_ids: Sequence[str], cached: bool) -> RankResult:
        """The ranking a stored or fresh reply gives (a failed result when it gives none)."""
        n = len(candidate_ids)
        seconds = record.get("seconds", 0.0) if isinstance(record, dict) else 0.0
        try:
            comp = self.read(record["response"])
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            return RankResult([], failed=True, error=f"unexpected response shape ({type(exc).__name__}: {exc})",
                              seconds=seconds, cached=cached)
        base = {"raw_text": comp.text, "input_tokens": comp.input_tokens, "output_tokens": comp.output_tokens,
                "cost_usd": self.prices.cost(comp.input_tokens, comp.output_tokens), "seconds": seconds,
                "cached": cached, "finish_reason": comp.finish_reason}
        if comp.refusal:
            return RankResult([], failed=True, error=f"refused: {comp.refusal[:200]}", **base)
        try:
            parsed = parse_ranking(comp.text, n)
        except Exception as exc:  # the call was made and paid for: a parser bug must not lose tokens and cost
            return RankResult([], failed=True, error=f"parse error ({type(exc).__name__}: {exc})", **base)
        if parsed.failed:
            return RankResult([], failed=True, error=parsed.error, **base)
        return RankResult([candidate_ids[i - 1] for i in parsed.order], repairs=parsed.repairs, **base)
