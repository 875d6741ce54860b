"""Whole-word matching, the rule every check of "does this text mention that" uses."""
from __future__ import annotations


def occurs(needle: str, text: str) -> bool:
    """`needle` in `text` as whole words, ignoring case; both already lower-cased."""
    start = text.find(needle)
    while start != -1:
        end = start + len(needle)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        start = text.find(needle, start + 1)
    return False
