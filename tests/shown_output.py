"""A docs page's printed output, compared with what the command above it prints (tests/snippets.py runs it).

Each line the page shows must be printed by the command, in the page's order (lines in between may be left
out, and `...` marks where). A shown line is paired with the next printed line of the same *shape* (the line
with its numbers and hex ids masked), and the two must then be equal once the volatile parts of both are
normalised: durations, rates, memory, dates, the workspace's absolute path and runs of spaces (table columns
widen with their numbers). A stale number therefore fails naming the page line, what it shows and what the
command printed. `MMBENCH_DOCS_REFRESH=1` rewrites each stale line with the printed one instead of failing
(`python ci/refresh_docs.py` runs that; CONTRIBUTING, Docs).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

REFRESH = os.environ.get("MMBENCH_DOCS_REFRESH") == "1"
ELIDED = {"...", "…"}
VOLATILE = [
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"), "<date>"),
    (re.compile(r"\b\d[\d,]*(?:\.\d+)?\s?(?:s|ms|min)\b"), "<time>"),
    (re.compile(r"\b\d[\d,]*(?:\.\d+)?(?= (?:documents|tokens|items)/s\b)"), "<rate>"),
    (re.compile(r"\b\d[\d,]*(?:\.\d+)?\s?(?:MB|GB|MiB|GiB|KB)\b"), "<memory>"),
    # a submission's id: a hash of the files and the submission time
    (re.compile(r"(?<=\bas )[0-9a-f]{16}\b"), "<submission>"),
    (re.compile(r"\b[0-9a-f]{16}-[0-9a-f]{8}\b"), "<submission folder>"),
]
NUMBERS = re.compile(r"[0-9a-f]*\d[0-9a-f]*(?:[.,]\d+)*")


def normalise(line: str, work: str = "") -> str:
    if work:
        line = line.replace(work.rstrip("/") + "/", "").replace(work, ".")
    for pattern, placeholder in VOLATILE:
        line = pattern.sub(placeholder, line)
    return " ".join(line.split())


def shape(line: str) -> str:
    """The line with every number and hex id masked: what pairs a shown line with a printed one."""
    return NUMBERS.sub("#", line)


@dataclass
class Stale:
    line: int          # the page's line number
    shown: str
    printed: str | None  # the printed line of the same shape; None when none was printed

    def message(self, where: str) -> str:
        if self.printed is None:
            return f"{where} line {self.line} shows {self.shown.strip()!r}, which the command above it does not print"
        return f"{where} line {self.line} shows {self.shown.strip()!r}; the command printed {self.printed.strip()!r}"


def stale_lines(shown: list[tuple[int, str]], printed: str | Sequence[str], work: str = "") -> list[Stale]:
    """The shown lines the printed text does not bear out (in order, by shape, then equal once normalised).
    `printed` may be several streams (stdout, stderr): their interleaving is lost, so each keeps its own order and
    a shown line is looked for in each."""
    streams = [printed] if isinstance(printed, str) else list(printed)
    lines = [[(raw, normalise(raw, work)) for raw in text.splitlines() if raw.strip()] for text in streams]
    at = [0] * len(lines)
    out = []
    for number, text in shown:
        if not text.strip() or text.strip() in ELIDED:
            continue
        want = normalise(text, work)
        found = _find(lines, at, lambda x: x == want) or _find(lines, at, lambda x: shape(x) == shape(want))
        if found is None:
            out.append(Stale(number, text, None))
            continue
        k, j = found
        if lines[k][j][1] != want:
            out.append(Stale(number, text, lines[k][j][0]))
        at[k] = j + 1
    return out


def _find(lines, at, match) -> tuple[int, int] | None:
    for k, stream in enumerate(lines):
        j = next((j for j in range(at[k], len(stream)) if match(stream[j][1])), None)
        if j is not None:
            return k, j
    return None


def refresh(path: Path, stale: list[Stale], work: str = "") -> int:
    """Rewrite each stale line of `path` that has a printed counterpart (keeping the line's indentation)."""
    text = path.read_text(encoding="utf-8").split("\n")
    done = 0
    for s in stale:
        if s.printed is None:
            continue
        indent = text[s.line - 1][: len(text[s.line - 1]) - len(text[s.line - 1].lstrip())]
        printed = s.printed.replace(work.rstrip("/") + "/", "") if work else s.printed
        text[s.line - 1] = indent + printed.rstrip()
        done += 1
    path.write_text("\n".join(text), encoding="utf-8")
    return done
