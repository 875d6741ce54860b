"""Natural order of group labels: numbers and length bins by size ("256" < "1k" < "32k"), then text."""
from __future__ import annotations

from typing import Any


def label_key(value: Any) -> tuple[int, float, str]:
    text = str(value).strip().lower()
    try:
        return (0, float(text[:-1]) * 1024 if text.endswith("k") else float(text), text)
    except ValueError:
        return (1, 0.0, text)


def subset_key(value: Any) -> tuple[tuple[int, float, str], ...]:
    """Natural order of slash-separated subset names, part by part ("hotpotqa/easy/8k" < ".../16k")."""
    return tuple(label_key(part) for part in str(value).split("/"))
