"""Offline summarization sources: reports cut from Python's Language Reference, and page images.

Reports are runs of consecutive `pydoc_data.topics` entries (real prose that ships with Python)
of roughly `report_chars` characters, split into paragraphs. Each report gets a project-written
summary that draws on its opening, middle and closing parts, so it needs the whole report; every
ninth summary (the 5th, 14th, ...) instead quotes one paragraph, a local excerpt the filter drops.
Page-image documents render a report onto pages with PIL; the next report in reading order,
rendered the same way, is the document's unseen extended version.
"""
from __future__ import annotations

import re
import textwrap
from functools import lru_cache

from PIL import Image as PILImage, ImageDraw, ImageFont

from .govreport import Report
from .mmlongbench import PagedDocument

PAGE_SIZE = (512, 640)       # 16 × 20 = 320 unified tokens per page
CHAR_WIDTH = 6
LINE_HEIGHT = 16
MARGIN = 32


def _topics() -> list[tuple[str, str]]:
    import pydoc_data.topics as topics

    return [(k, topics.topics[k]) for k in sorted(topics.topics)]


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def _first_sentence(paragraph: str, max_words: int = 28) -> str:
    sentences = re.split(r"(?<=[.!?])\s+", paragraph.strip())
    sentence = next((s for s in sentences if len(s.split()) >= 6), sentences[0])
    sentence = sentence[0].lower() + sentence[1:] if sentence[:2].istitle() else sentence
    words = sentence.split()
    return " ".join(words[:max_words]).rstrip(".:;,") + ("" if len(words) <= max_words else " ...")


def _prose(paragraphs: list[str]) -> list[int]:
    """Indices of paragraphs that read as prose (not grammar rules or code)."""
    return [i for i, p in enumerate(paragraphs) if len(p.split()) >= 12 and "::=" not in p and not p.startswith(">>>")]


@lru_cache(maxsize=4)
def pydoc_reports(report_chars: int = 9000) -> tuple[Report, ...]:
    """Consecutive Language Reference topics grouped into reports with templated summaries."""
    chunks: list[tuple[list[str], list[str]]] = []   # (topic names, paragraphs)
    names: list[str] = []
    paras: list[str] = []
    for name, text in _topics():
        for p in _paragraphs(text):
            if not names or names[-1] != name:
                names.append(name)
            paras.append(p)
            if sum(len(x) for x in paras) >= report_chars:
                chunks.append((names, paras))
                names, paras = [name], []
    if paras:
        chunks.append((names, paras))
    reports = []
    for k, (topic_names, ps) in enumerate(chunks):
        prose = _prose(ps)
        if len(ps) < 4 or len(prose) < 3:
            continue
        rid = f"pydoc-r{k:02d}"
        topics_txt = ", ".join(f"'{t}'" for t in topic_names[:-1]) + \
            (f" and '{topic_names[-1]}'" if len(topic_names) > 1 else f"'{topic_names[0]}'")
        if k % 9 == 4:
            p = ps[prose[len(prose) // 2]]
            summary = f"This report quotes the Language Reference: {' '.join(p.split()[:60])}"
        else:
            first, mid, last = prose[0], prose[len(prose) // 2], prose[-1]
            summary = (f"This report from the Python Language Reference covers {topics_txt}. "
                       f"It opens by explaining that {_first_sentence(ps[first])}. "
                       f"Its middle part turns to how {_first_sentence(ps[mid])}. "
                       f"It closes by noting that {_first_sentence(ps[last])}.")
        reports.append(Report(rid, summary, ps))
    return tuple(reports)


_ASCII = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "--",
                        "\u2026": "...", "\u2022": "*", "\u2192": "->"})


def _latin1(text: str) -> str:
    """What PIL's bitmap font can draw: typographic punctuation simplified, the rest as '?'."""
    return text.translate(_ASCII).encode("latin-1", "replace").decode("latin-1")


def render_pages(text: str, size: tuple[int, int] = PAGE_SIZE) -> list[PILImage.Image]:
    """Typeset plain text onto white pages: wrapped lines, blank line between paragraphs."""
    text = _latin1(text)
    w, h = size
    font = ImageFont.load_default_imagefont()   # PIL's bitmap font: 6 px per character, fast to draw
    chars = max(20, (w - 2 * MARGIN) // CHAR_WIDTH)
    per_page = max(1, (h - 2 * MARGIN) // LINE_HEIGHT)
    lines: list[str] = []
    for p in _paragraphs(text) or [text]:
        lines.extend(textwrap.wrap(p, chars) + [""])
    pages = []
    for start in range(0, len(lines), per_page):
        img = PILImage.new("RGB", size, (255, 255, 255))
        d = ImageDraw.Draw(img)
        for i, line in enumerate(lines[start:start + per_page]):
            d.text((MARGIN, MARGIN + i * LINE_HEIGHT), line, fill=(20, 20, 20), font=font)
        d.text((w // 2 - 8, h - MARGIN + 4), str(start // per_page + 1), fill=(90, 90, 90), font=font)
        pages.append(img)
    return pages


def paged_documents(n: int | None = None, reports: tuple[Report, ...] | None = None) -> list[PagedDocument]:
    """Up to `n` documents: even-numbered reports as page images, the next report's pages as extension."""
    reports = reports or pydoc_reports()
    out: list[PagedDocument] = []
    for i in range(0, len(reports) - 1, 2):
        if n is not None and len(out) >= n:
            break
        r, nxt = reports[i], reports[i + 1]
        pages, ext = render_pages(r.text), render_pages(nxt.text)
        out.append(PagedDocument(f"pages-{r.id}", r.summary, pages, ext,
                                 [f"{r.id}/p{k + 1}" for k in range(len(pages))],
                                 [f"{nxt.id}/p{k + 1}" for k in range(len(ext))]))
    return out
