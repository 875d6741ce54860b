"""The Anthropic Messages API as a listwise ranker: images as base64 `image` blocks.

The key is read from `api_key_env` (default ANTHROPIC_API_KEY) and sent as `x-api-key`. A
reply that stops with `stop_reason: "refusal"` is a recorded failure.
"""
from __future__ import annotations

import base64
from typing import Any, Sequence

from mmbench.rankers.base import Completion, ListwiseRanker
from mmbench.rankers.prompt import RenderedPrompt

ANTHROPIC_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


class AnthropicRanker(ListwiseRanker):
    family = "anthropic"
    default_key_env = "ANTHROPIC_API_KEY"

    def __init__(self, model: str, base_url: str | None = None, **options: Any) -> None:
        super().__init__(model, base_url or "", ANTHROPIC_URL, extra_settings={"anthropic_version": ANTHROPIC_VERSION},
                         **options)

    def url(self) -> str:
        # Accept both https://api.anthropic.com and https://api.anthropic.com/v1 as the base URL.
        return f"{self.base_url}/messages" if self.base_url.endswith("/v1") else f"{self.base_url}/v1/messages"

    def headers(self) -> dict[str, str]:
        key = self._key()
        return self.auth_headers({"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": key} if key else {})})

    def payload(self, prompt: RenderedPrompt, images: Sequence[tuple[bytes, str]]) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": prompt.intro}]
        for label, (data, mime) in zip(prompt.labels, images):
            content += [{"type": "text", "text": label},
                        {"type": "image", "source": {"type": "base64", "media_type": mime,
                                                     "data": base64.b64encode(data).decode("ascii")}}]
        content.append({"type": "text", "text": prompt.outro})
        return {"model": self.model, "system": prompt.system, "max_tokens": self.max_output_tokens,
                "temperature": self.temperature, "messages": [{"role": "user", "content": content}]}

    def read(self, response: Any) -> Completion:
        blocks = response["content"]
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        usage = response.get("usage") or {}
        stop = response.get("stop_reason")
        return Completion(text=text, input_tokens=usage.get("input_tokens"), output_tokens=usage.get("output_tokens"),
                          refusal=(text or "refused") if stop == "refusal" else None, finish_reason=stop)
