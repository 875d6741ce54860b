"""Queries for Temporal Summarization: ordered event captions rewritten into one description.

The default rewrite is rule-based and deterministic: one sentence per event, joined with
explicit transition words ("First, … Then, … Finally, …"; Chinese captions get 首先/然后/最后).
A caption that already opens with a transition word ("Then the man …", "Finally, she …",
"然后他……") has it removed first, so the rewrite never says "Then, then" or "Finally, finally".
"First", "Next" and "Later" are removed only before a comma or a subject ("Next the man …"),
so "Next to the car …" and "First place …" keep their words.
The optional rewrite sends the captions to an OpenAI-compatible chat API with the project's
prompt (`PROMPT_VERSION`), which also translates non-English captions into English; outputs are
stored with the prompt version and model, and cached in a JSONL file so rebuilds reuse them.
"""
from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from mmbench.data.media import atomic_write_bytes
from mmbench.builders.parts.chat import ChatEndpoint
from mmbench.common.http_client import APIError, HttpClient

RULE_VERSION = "rule-2"
PROMPT_VERSION = "ts-rewrite-1"
SYSTEM_PROMPT = (
    "You write search queries for a video retrieval benchmark. You receive the captions of the events "
    "of one video, already in time order. Retell them as one fluent English paragraph that keeps every "
    "event and keeps their order, linking them with explicit transition words such as 'first', 'then', "
    "'next', 'after that' and 'finally'. Do not add, merge, drop or reorder events, and do not invent "
    "details. If the captions are not in English, translate them into English. Reply with the paragraph only."
)
_EN_MIDDLE = ("Then", "Next", "After that")
_ZH_MIDDLE = ("然后", "接着", "之后")
_CJK = re.compile(r"[\u3400-\u9fff]")
# a transition word opening an English caption: these always connect, with or without a comma ...
_EN_LEAD = re.compile(r"^(?:then|afterwards?|after that|after this|finally|lastly|subsequently|eventually)\b,?\s*",
                      re.IGNORECASE)
# ... and these only with a comma or before a subject ("Next to the car", "First place", "Next day" are no
# transitions; "Next, the man", "First the man", "Next he" are)
_SUBJECT = r"(?:the|a|an|he|she|they|we|it|his|her|their|two|three|several|some|people|someone|more|another)\b"
_EN_LEAD_COMMA = re.compile(r"^(?:first(?:ly)?|next|second(?:ly)?|later|in the end|at last)"
                            r"(?:\s*,\s*|\s+(?=" + _SUBJECT + r"))", re.IGNORECASE)
_ZH_LEAD = re.compile(r"^(?:首先|然后|接着|之后|随后|最后|后来|其次|紧接着)[，,、\s]*")


def story_key(text: str) -> str:
    """Text compared for sameness: NFKC, lower case, letters and digits of any script, single spaces
    (Chinese captions keep their characters; ASCII-only normalisation would make them all equal)."""
    folded = unicodedata.normalize("NFKC", text).lower()
    return " ".join("".join(ch if ch.isalnum() else " " for ch in folded).split())


def language_of(captions: Sequence[str]) -> str:
    """"zh" when most non-space characters are CJK ideographs, else "en"."""
    text = "".join("".join(c.split()) for c in captions)
    return "zh" if text and len(_CJK.findall(text)) / len(text) > 0.3 else "en"


def strip_transition(caption: str, zh: bool) -> str:
    """The caption without a leading transition word of its own (the rewrite adds one)."""
    if zh:
        return _ZH_LEAD.sub("", caption, count=1)
    out = _EN_LEAD.sub("", caption, count=1)
    return _EN_LEAD_COMMA.sub("", out, count=1)


def _clean(caption: str, zh: bool) -> str:
    c = strip_transition(" ".join(caption.split()).strip(), zh).strip()
    return c.rstrip("。．.!！?？,，;；、 ") if zh else c.rstrip(".!?,;: ")


def _lower_first(c: str) -> str:
    """Lower-case the first letter unless the first word is an acronym or 'I'."""
    word = c.split(" ", 1)[0]
    if not c or word == "I" or (len(word) > 1 and word[:2].isupper()):
        return c
    return c[0].lower() + c[1:]


def rule_rewrite(captions: Sequence[str], lang: str | None = None) -> str:
    """One ordered description from event captions, with transition words (deterministic)."""
    lang = lang or language_of(captions)
    zh = lang == "zh"
    parts = [p for p in (_clean(c, zh) for c in captions) if p]
    if not parts:
        raise ValueError("no non-empty caption to rewrite")
    if zh:
        if len(parts) == 1:
            return parts[0] + "。"
        words = ["首先"] + [_ZH_MIDDLE[(i - 1) % 3] for i in range(1, len(parts) - 1)] + ["最后"]
        return "".join(f"{w}，{p}。" for w, p in zip(words, parts))
    if len(parts) == 1:
        return parts[0][0].upper() + parts[0][1:] + "."
    words = ["First"] + [_EN_MIDDLE[(i - 1) % 3] for i in range(1, len(parts) - 1)] + ["Finally"]
    return " ".join(f"{w}, {_lower_first(p)}." for w, p in zip(words, parts))


@dataclass(frozen=True)
class Rewrite:
    text: str
    method: str                 # "rule" or "llm"
    version: str                # RULE_VERSION or PROMPT_VERSION
    model: str | None = None

    def record(self) -> dict:
        return {"method": self.method, "version": self.version, "model": self.model}


def user_prompt(captions: Sequence[str]) -> str:
    return "Event captions in time order:\n" + "\n".join(f"{i + 1}. {' '.join(c.split())}" for i, c in enumerate(captions))


class ChatRewriter:
    """Rewrites (and translates) captions through an OpenAI-compatible `/chat/completions` endpoint."""

    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY",
                 cache: Path | str | None = None, client: HttpClient | None = None) -> None:
        self.chat = ChatEndpoint(base_url, model, api_key_env, client, max_concurrency=1)
        self.model, self.client = model, self.chat.client
        self.cache_path = Path(cache) if cache else None
        self._cache: dict[str, str] = _read_cache(self.cache_path) if self.cache_path else {}

    def key(self, captions: Sequence[str]) -> str:
        payload = json.dumps([PROMPT_VERSION, self.model, list(captions)], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def rewrite(self, captions: Sequence[str], item: str = "?") -> Rewrite:
        k = self.key(captions)
        if k not in self._cache:
            messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user_prompt(captions)}]
            try:
                text = " ".join(self.chat.reply(messages).split())
            except APIError as exc:
                if "malformed chat response" not in str(exc):
                    raise
                raise APIError(f"rewrite of {item}: {exc}") from None
            if not text:
                raise APIError(f"rewrite of {item}: the chat model returned an empty text")
            self._cache[k] = text
            self._append(k, captions, text)
        return Rewrite(self._cache[k], "llm", PROMPT_VERSION, self.model)

    def _append(self, key: str, captions: Sequence[str], text: str) -> None:
        if self.cache_path is None:
            return
        line = json.dumps({"key": key, "prompt_version": PROMPT_VERSION, "model": self.model,
                           "captions": list(captions), "output": text}, ensure_ascii=False)
        old = self.cache_path.read_bytes() if self.cache_path.is_file() else b""
        atomic_write_bytes(self.cache_path, old + line.encode("utf-8") + b"\n")


def _read_cache(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            out[rec["key"]] = rec["output"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}, line {n}: malformed rewrite cache record ({exc})") from exc
    return out
