"""Query filtering: keep questions whose evidence is strongly linked, and say why for each.

Two stages. The rule filter is deterministic and always runs: 2–5 evidence spans, all of them
found in the context, the context fits the smallest length bin, and every evidence span is
lexically linked (shares a content word) with the question or with another evidence span,
while the evidence as a whole shares at least `min_question_overlap` content words with the
question. The optional LLM auditor asks a chat model, through an OpenAI-compatible
`/chat/completions` endpoint, whether the evidence forms a chain that answers the question.
Every decision and its reason is returned as a `Decision` and stored in the pool set.

For summarization, `summary_rule` keeps summaries that need the whole report (macro-level):
their content must be spread over the report rather than copied from one paragraph.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from mmbench.data.documents import Text
from mmbench.builders.parts.chat import ChatEndpoint
from mmbench.common.http_client import APIError, HttpClient

from mmbench.builders.sources.hotpotqa import ReasoningRecord

RULES_VERSION = "reasoning-rules/1"
SUMMARY_RULES_VERSION = "summary-rules/1"
AUDITOR_PROMPT_VERSION = "reasoning-auditor/1"

STOPWORDS = frozenset("""a an and are as at be been by did do does for from had has have he her his how in into is it
its of on or she that the their them they this to was were what when where which who whom whose why with would
according say says said about after before than then there these those while also other""".split())
WORD = re.compile(r"\w+", re.UNICODE)


def content_words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if len(w) > 2 and w not in STOPWORDS}


@dataclass
class Decision:
    query_id: str
    dataset: str
    kept: bool
    stage: str                      # "rules" or "auditor"
    reason: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _evidence_text(record: ReasoningRecord, index: int) -> str:
    u = record.units[index]
    if isinstance(u.segment, Text):
        return f"{u.info.get('title', '')} {u.segment.text}".strip()
    return str(u.info.get("description", ""))


@dataclass(frozen=True)
class RuleFilter:
    min_evidence: int = 2
    max_evidence: int = 5
    min_question_overlap: int = 2
    max_context_tokens: int | None = None   # the smallest length bin; a longer context cannot be expanded

    def check(self, record: ReasoningRecord) -> Decision:
        ev = record.evidence_indices
        details: dict[str, Any] = {"evidence": len(ev), "context_tokens": record.tokens}

        def drop(reason: str) -> Decision:
            return Decision(record.id, record.dataset, False, "rules", reason, details)

        if record.problems:
            return drop("; ".join(record.problems))
        if not self.min_evidence <= len(ev) <= self.max_evidence:
            return drop(f"{len(ev)} evidence spans (need {self.min_evidence}-{self.max_evidence})")
        if self.max_context_tokens is not None and record.tokens > self.max_context_tokens:
            return drop(f"context of {record.tokens} tokens exceeds the smallest bin ({self.max_context_tokens})")
        q = content_words(record.question)
        words = [content_words(_evidence_text(record, i)) for i in ev]
        overlap = q & set().union(*words)
        details["question_overlap"] = sorted(overlap)
        if len(overlap) < self.min_question_overlap:
            return drop(f"evidence shares {len(overlap)} content words with the question "
                        f"(need {self.min_question_overlap})")
        unlinked = [record.units[i].source for k, i in enumerate(ev)
                    if not (words[k] & q) and not any(words[k] & w for j, w in enumerate(words) if j != k)]
        if unlinked:
            details["unlinked"] = unlinked
            return drop(f"evidence not linked to the question or to other evidence: {', '.join(unlinked)}")
        return Decision(record.id, record.dataset, True, "rules",
                        f"{len(ev)} linked evidence spans; question overlap {sorted(overlap)}", details)


def summary_rule(query_id: str, dataset: str, summary: str, paragraphs: Sequence[str], max_local: float = 0.6,
                 min_spread: float = 0.5, min_words: int = 8) -> Decision:
    """Keep a summary that needs the whole report: no single paragraph covers more than `max_local`
    of its content words, and the paragraphs that best match its sentences span at least
    `min_spread` of the report. `paragraphs` may be a page document's page texts. `details["rule"]`
    names the outcome: too_short, local_excerpt, narrow_spread or macro_level; `best_paragraphs`
    lists, per summary sentence, the paragraph that matches it best."""
    words = content_words(summary)
    details: dict[str, Any] = {"summary_words": len(words), "paragraphs": len(paragraphs)}
    if len(words) < min_words or len(paragraphs) < 4:
        details["rule"] = "too_short"
        return Decision(query_id, dataset, False, "rules", f"too short: {len(words)} summary content words, "
                        f"{len(paragraphs)} paragraphs", details)
    para_words = [content_words(p) for p in paragraphs]
    local = max(len(words & pw) / len(words) for pw in para_words)
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", summary) if content_words(s)]
    best = [max(range(len(para_words)), key=lambda i: (len(content_words(s) & para_words[i]), -i)) for s in sentences]
    spread = (max(best) - min(best)) / max(1, len(paragraphs) - 1)
    details.update({"max_local_coverage": round(local, 3), "spread": round(spread, 3), "best_paragraphs": best})
    if local > max_local:
        details["rule"] = "local_excerpt"
        return Decision(query_id, dataset, False, "rules", f"local excerpt: one paragraph covers {local:.0%} "
                        "of the summary", details)
    if spread < min_spread:
        details["rule"] = "narrow_spread"
        return Decision(query_id, dataset, False, "rules", f"summary matches only {spread:.0%} of the report's "
                        "extent", details)
    details["rule"] = "macro_level"
    return Decision(query_id, dataset, True, "rules", f"macro-level: spread {spread:.2f}, "
                    f"max local coverage {local:.2f}", details)


# ---- LLM auditor -------------------------------------------------------------------------

AUDITOR_SYSTEM = """You check items for a retrieval benchmark about multi-step reasoning over long documents.
You get a question and the evidence passages that annotators marked as needed to answer it. Decide
whether the evidence is strongly linked: every passage is needed, the passages connect to each other
or to the question through shared entities, and together they answer the question without outside
knowledge. Reject vague questions, questions answerable from one passage alone, and evidence that
does not mention what the question asks about.
Reply with one JSON object and nothing else: {"keep": true or false, "reason": "<one sentence>"}"""


def auditor_messages(record: ReasoningRecord) -> list[dict[str, str]]:
    lines = [f"Question: {record.question}", "", "Evidence:"]
    for k, i in enumerate(record.evidence_indices, 1):
        u = record.units[i]
        kind = "text" if isinstance(u.segment, Text) else "image, described as"
        lines.append(f"[{k}] ({kind}) {_evidence_text(record, i)}")
    return [{"role": "system", "content": AUDITOR_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


@dataclass
class LLMAuditor:
    """Asks an OpenAI-compatible chat model to confirm the rule filter's keeps."""

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    client: HttpClient | None = None

    def __post_init__(self) -> None:
        self.chat = ChatEndpoint(self.base_url, self.model, self.api_key_env, self.client, max_concurrency=4)
        self.base_url, self.client = self.chat.base_url, self.chat.client

    def describe(self) -> dict[str, Any]:
        return {"prompt_version": AUDITOR_PROMPT_VERSION, "model": self.model, "base_url": self.base_url,
                "system_prompt": AUDITOR_SYSTEM}

    def audit(self, record: ReasoningRecord) -> Decision:
        try:
            verdict = _parse_verdict(self.chat.reply(auditor_messages(record)))
        except (APIError, ValueError) as exc:
            return Decision(record.id, record.dataset, False, "auditor", f"auditor failed: {exc}",
                            {"prompt_version": AUDITOR_PROMPT_VERSION, "error": True})
        return Decision(record.id, record.dataset, bool(verdict["keep"]), "auditor", str(verdict.get("reason", "")),
                        {"prompt_version": AUDITOR_PROMPT_VERSION, "model": self.model})

    def audit_all(self, records: Sequence[ReasoningRecord]) -> list[Decision]:
        return self.client.map(self.audit, records)


def _parse_verdict(content: str) -> dict[str, Any]:
    match = re.search(r"\{.*\}", content or "", re.S)
    if not match:
        raise ValueError(f"no JSON object in the auditor reply {content[:120]!r}")
    verdict = json.loads(match.group(0))
    if not isinstance(verdict, dict) or not isinstance(verdict.get("keep"), bool):
        raise ValueError(f"auditor reply lacks a boolean 'keep': {content[:120]!r}")
    return verdict


def filter_records(records: Sequence[ReasoningRecord], rules: RuleFilter, auditor: LLMAuditor | None,
                   n_keep: int | None) -> tuple[list[ReasoningRecord], list[Decision]]:
    """Rules on every record, then the auditor (if any) in record order until `n_keep` are kept."""
    decisions = [rules.check(r) for r in records]
    passed = [r for r, d in zip(records, decisions) if d.kept]
    if auditor is None:
        kept = passed[:n_keep] if n_keep is not None else passed
        return kept, decisions
    kept: list[ReasoningRecord] = []
    step = max(1, auditor.client.max_concurrency)
    pos = 0
    while pos < len(passed) and (n_keep is None or len(kept) < n_keep):
        batch = passed[pos:pos + step]
        pos += step
        for rec, dec in zip(batch, auditor.audit_all(batch)):
            decisions.append(dec)
            if dec.kept and (n_keep is None or len(kept) < n_keep):
                kept.append(rec)
    return kept, decisions


def decision_summary(decisions: Sequence[Decision]) -> dict[str, Any]:
    """Counts by stage and outcome (the full list is stored alongside)."""
    out: dict[str, Any] = {}
    for d in decisions:
        key = f"{d.dataset}/{d.stage}/{'kept' if d.kept else 'dropped'}"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))
