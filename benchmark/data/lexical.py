"""Words for lexical retrieval: the tokenizer and the `bm25s` import that every BM25 in mmbench shares.

The BM25 model (`mmbench.models.bm25`) and the builders' BM25 look-alike index
(`mmbench.builders.parts.lookalikes`) both use these, so the two rank with the same words.
"""
from __future__ import annotations

import logging
import re
from typing import Any

TOKEN = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


def bm25s_module() -> Any:
    """`bm25s`, imported with its logger quietened (it sets DEBUG on import)."""
    import bm25s

    if logging.getLogger("bm25s").level == logging.DEBUG:
        logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s
