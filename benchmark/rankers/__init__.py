"""LLM listwise rankers: a query and all its candidate images in one prompt, a ranking back.

`load_ranker(kind, model, **options)` builds an adapter by its short name; `rank_poolset`
(in `mmbench.rankers.run`) evaluates one on a pool set and returns results in the same
layout as embedding runs, so `mmbench compare` puts both side by side.

Imports: `mmbench.common`, `mmbench.data`, the pure evaluators and `mmbench.models` (the HTTP helpers).
"""
from __future__ import annotations

import importlib
from typing import Any

from mmbench.common.names import did_you_mean
from mmbench.rankers.base import Completion, ListwiseRanker, Prices, RankerCard, RankResult, ResponseCache
from mmbench.rankers.parse import REPAIRS, ParsedRanking, parse_ranking
from mmbench.rankers.prompt import DEFAULT_PROMPT, PROMPT_VERSION, PromptTemplate, load_prompt

RANKERS = {"openai-chat": "mmbench.rankers.openai_chat:OpenAIChatRanker",
           "anthropic": "mmbench.rankers.anthropic:AnthropicRanker"}


def load_ranker(kind: str, model: str, **options: Any) -> ListwiseRanker:
    if kind not in RANKERS:
        raise ValueError(f"unknown ranker {kind!r}{did_you_mean(kind, RANKERS)}; known: {', '.join(sorted(RANKERS))}")
    module, cls = RANKERS[kind].split(":")
    return getattr(importlib.import_module(module), cls)(model, **options)


__all__ = ["Completion", "ListwiseRanker", "Prices", "RankerCard", "RankResult", "ResponseCache", "REPAIRS",
           "ParsedRanking", "parse_ranking", "DEFAULT_PROMPT", "PROMPT_VERSION", "PromptTemplate", "load_prompt",
           "RANKERS", "load_ranker"]
