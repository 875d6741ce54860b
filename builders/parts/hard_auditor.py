"""The optional LLM check on Multi-Source Reasoning Hard variants: can the question still be answered?

It uses the query auditor's endpoint, model, key and HTTP client (`query_filter.LLMAuditor`) with
its own versioned prompt. The model sees the question and the variant's own context (the record's
units after the replacement, without the filler) and answers with one JSON object,
``{"answerable": true|false, "reason": "..."}``. A variant is kept only on an explicit
``false``; an unreadable reply or an API failure drops it, with that reason.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from mmbench.data.documents import Text
from mmbench.common.http_client import APIError

from mmbench.builders.parts.expansion import Unit
from mmbench.builders.parts.query_filter import LLMAuditor
from mmbench.builders.sources.hotpotqa import ReasoningRecord

HARD_PROMPT_VERSION = "hard-variant-auditor/1"

HARD_SYSTEM = """You check distractors for a retrieval benchmark about multi-step reasoning. You get a
question and a document. One passage of the document that the answer depended on was replaced.
Decide whether the question can still be answered from this document alone, without outside
knowledge: the facts needed are all still stated somewhere (perhaps in other words). Images are
shown as their descriptions.
Reply with one JSON object and nothing else: {"answerable": true or false, "reason": "<one sentence>"}"""


@dataclass(frozen=True)
class HardVerdict:
    answerable: bool | None     # None: the auditor could not judge
    reason: str


def hard_messages(record: ReasoningRecord, units: Sequence[Unit]) -> list[dict[str, str]]:
    lines = [f"Question: {record.question}", "", "Document:"]
    for u in units:
        if isinstance(u.segment, Text):
            lines.append(u.segment.text)
        else:
            lines.append(f"[image: {u.info.get('description') or 'no description'}]")
    return [{"role": "system", "content": HARD_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


class HardAuditor:
    def __init__(self, auditor: LLMAuditor) -> None:
        self.auditor = auditor

    def describe(self) -> dict[str, Any]:
        return {"prompt_version": HARD_PROMPT_VERSION, "model": self.auditor.model,
                "base_url": self.auditor.base_url, "system_prompt": HARD_SYSTEM}

    def audit(self, record: ReasoningRecord, units: Sequence[Unit]) -> HardVerdict:
        try:
            content = self.auditor.chat.reply(hard_messages(record, units))
            match = re.search(r"\{.*\}", content or "", re.S)
            verdict = json.loads(match.group(0)) if match else None
            if not isinstance(verdict, dict) or not isinstance(verdict.get("answerable"), bool):
                raise ValueError(f"reply lacks a boolean 'answerable': {str(content)[:120]!r}")
        except (APIError, ValueError) as exc:
            return HardVerdict(None, f"auditor failed: {exc}")
        return HardVerdict(verdict["answerable"], str(verdict.get("reason", "")))
