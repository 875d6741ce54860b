"""OpenAI-compatible chat completions (OpenAI, vLLM, most hosted services) as a listwise ranker.

Images go as `image_url` parts holding base64 data URLs, each after its number label.
The key is read from `api_key_env` (default OPENAI_API_KEY); servers on other base URLs may
run without one.
"""
from __future__ import annotations

import base64
from typing import Any, Sequence

from mmbench.rankers.base import Completion, ListwiseRanker
from mmbench.rankers.prompt import RenderedPrompt

OPENAI_URL = "https://api.openai.com/v1"


class OpenAIChatRanker(ListwiseRanker):
    family = "openai-chat"
    default_key_env = "OPENAI_API_KEY"

    def __init__(self, model: str, base_url: str | None = None, image_detail: str | None = None,
                 token_limit_field: str = "max_tokens", **options: Any) -> None:
        if token_limit_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("token_limit_field must be max_tokens or max_completion_tokens")
        self.image_detail, self.token_limit_field = image_detail, token_limit_field
        super().__init__(model, base_url or "", OPENAI_URL, extra_settings={"image_detail": image_detail,
                                                                           "token_limit_field": token_limit_field},
                         **options)

    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def headers(self) -> dict[str, str]:
        key = self._key()
        return self.auth_headers({"Authorization": f"Bearer {key}"} if key else {})

    def payload(self, prompt: RenderedPrompt, images: Sequence[tuple[bytes, str]]) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": prompt.intro}]
        for label, (data, mime) in zip(prompt.labels, images):
            image: dict[str, Any] = {"url": f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"}
            if self.image_detail:
                image["detail"] = self.image_detail
            content += [{"type": "text", "text": label}, {"type": "image_url", "image_url": image}]
        content.append({"type": "text", "text": prompt.outro})
        return {"model": self.model, "temperature": self.temperature, self.token_limit_field: self.max_output_tokens,
                "messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": content}]}

    def read(self, response: Any) -> Completion:
        choice = response["choices"][0]
        message = choice["message"]
        text = message.get("content")
        if isinstance(text, list):  # some servers return content parts
            text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        usage = response.get("usage") or {}
        return Completion(text=text, input_tokens=usage.get("prompt_tokens"), output_tokens=usage.get("completion_tokens"),
                          refusal=message.get("refusal") or None, finish_reason=choice.get("finish_reason"))
