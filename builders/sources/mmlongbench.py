"""MMLongBench-style summarization documents: a summary and a document as page images.

Expected layout (a JSONL next to, or pointing into, a folder of page images)::

    {"id": "gov-0001", "summary": "...", "pages": ["gov-0001/p001.png", ...],
     "extended_pages": ["gov-0001/p031.png", ...]}

`pages` is the document in reading order; `extended_pages` are further, unseen consecutive
pages of the same source document (its extended version), which the Hard variants splice in.
MMLongBench's own summarization files (`summ/gov_K*.jsonl`, `summ/lexsum_K*.jsonl`) are read as
they are: `image_list` stands for `pages`, and `summary` may be GovReport's list of highlight
sections (`{section_title, paragraphs}`; the summary is their paragraphs). `answer` is accepted
for `summary`. Those files list no extended pages; their page images are named
`<folder>/<doc>_page<N>.<ext>` and the image release holds each document's further pages beside
them, so the next consecutive pages found there (N = last listed + 1, + 2, ..., up to as many pages
as the document has) are its extension. A document with none is left out of the Hard variants by
the builder's filter, with that reason. Paths are relative to `image_root` or absolute.

`page_texts` (optional, the project's own field: one string per page, e.g. the text layer of the
PDF the pages came from) lets the builder apply the macro-level summary filter to the document;
without it the filter cannot read the pages, and the build says how many summaries went unchecked.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from PIL import Image as PILImage, UnidentifiedImageError

from mmbench.builders.sources.jsonl import read_jsonl


@dataclass
class PagedDocument:
    id: str
    summary: str
    pages: list[PILImage.Image]
    extension: list[PILImage.Image]
    page_names: list[str]
    extension_names: list[str]
    page_texts: list[str] | None = None   # each page's text, where known (the summary filter reads it)


def read_mmlongbench(path: Path, image_root: Path, limit: int | None = None) -> list[PagedDocument]:
    path, image_root = Path(path), Path(image_root)
    if not path.is_file():
        raise FileNotFoundError(f"MMLongBench summarization JSONL {path} not found")
    out: list[PagedDocument] = []
    for where, lineno, rec in read_jsonl(path, fields={"pages": list, "image_list": list, "extended_pages": list}):
        summary = _summary_text(rec.get("summary", rec.get("answer")))
        if not summary.strip():
            raise ValueError(f"{where}: field 'summary' (or 'answer') missing or empty")
        pages = rec.get("pages", rec.get("image_list"))
        if not isinstance(pages, list) or not pages:
            raise ValueError(f"{where}: field 'pages' (or 'image_list') must be a non-empty list of image paths")
        extended = rec.get("extended_pages")
        if extended is None:
            extended = following_pages(image_root, [str(p) for p in pages])
        if not isinstance(extended, list):
            raise ValueError(f"{where}: field 'extended_pages' must be a list of image paths")
        for name, refs in (("pages", pages), ("extended_pages", extended)):
            bad = next((k for k, p in enumerate(refs) if not isinstance(p, str) or not p), None)
            if bad is not None:
                raise ValueError(f"{where}: field {name!r}[{bad}] must be an image path, not {refs[bad]!r}")
        texts = rec.get("page_texts")
        if texts is not None and (not isinstance(texts, list) or len(texts) != len(pages)
                                  or not all(isinstance(t, str) for t in texts)):
            raise ValueError(f"{where}: field 'page_texts' must be a list of {len(pages)} strings, one per page")
        out.append(PagedDocument(str(rec.get("id", lineno)), " ".join(summary.split()),
                                 [_open(image_root, p, where, "pages") for p in pages],
                                 [_open(image_root, p, where, "extended_pages") for p in extended],
                                 [str(p) for p in pages], [str(p) for p in extended], texts))
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise ValueError(f"{path}: no documents found")
    return out


_PAGE = re.compile(r"^(?P<stem>.*page)(?P<number>\d+)(?P<suffix>\.(?:png|jpe?g|webp))$", re.IGNORECASE)


def following_pages(root: Path, pages: list[str]) -> list[str]:
    """The consecutive pages after the last listed one, when all pages are numbered files of one document
    (`..._page<N>.<ext>`) and the next numbers exist on disk; at most `len(pages)` of them, else []."""
    matches = [_PAGE.match(p) for p in pages]
    if not all(matches) or len({(m["stem"], m["suffix"]) for m in matches}) != 1:
        return []
    stem, suffix = matches[0]["stem"], matches[0]["suffix"]
    found: list[str] = []
    number = max(int(m["number"]) for m in matches) + 1
    while len(found) < len(pages):
        ref = f"{stem}{number}{suffix}"
        if not _page_path(root, ref).is_file():
            break
        found.append(ref)
        number += 1
    return found


def _summary_text(value) -> str:
    """Summary text, or the paragraphs of a list of `{section_title, paragraphs}` sections ("" if neither)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(s, dict) and isinstance(s.get("paragraphs"), list) for s in value):
        return " ".join(str(p) for s in value for p in s["paragraphs"])
    return ""


def _page_path(root: Path, ref: str) -> Path:
    """A page reference: absolute, or relative to the image root."""
    return Path(ref) if Path(ref).is_absolute() else root / ref


def _open(root: Path, ref: str, where: str, field: str) -> PILImage.Image:
    p = _page_path(root, ref)
    if not p.is_file():
        raise FileNotFoundError(f"{where}: page image {p} not found (field {field!r})")
    try:
        with PILImage.open(p) as im:
            return im.convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"{where}: corrupt page image {p} in field {field!r} ({exc})") from exc
