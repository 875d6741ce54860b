"""One OpenAI-compatible chat call for the builders' LLM steps: caption rewriting, query audits, Hard-variant audits.

Each step builds its own messages and reads its own answer; this module only sends them to
`<base_url>/chat/completions` (key from an environment variable, never from the command line) and
returns the first choice's text, or raises `APIError` for a reply without one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mmbench.common.http_client import APIError, HttpClient, api_key


@dataclass
class ChatEndpoint:
    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    client: HttpClient | None = None
    max_concurrency: int = 1
    key: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        self.key = api_key(self.api_key_env, required=False)
        self.client = self.client or HttpClient(max_concurrency=self.max_concurrency)

    def reply(self, messages: list[dict[str, Any]], temperature: float = 0) -> str:
        """The chat model's answer to `messages`; `APIError` when the call fails or the reply holds no text."""
        payload = {"model": self.model, "messages": messages, "temperature": temperature}
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        body = self.client.post_json(f"{self.base_url}/chat/completions", payload, headers)
        try:
            content = body["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise APIError(f"malformed chat response (missing {exc})") from None
        return "" if content is None else str(content)
