"""MMDocRAG (dev/evaluation JSONL + image folder) as interleaved image–text reasoning records.

Layout (the MMDocRAG release): one JSON object per line with `q_id`, `question`, `text_quotes`
and `img_quotes` (each item: `quote_id`, `type`, `text` or `img_path`, optional
`img_description`, `page_id`, `layout_id`), `gold_quotes` (quote ids such as "image1", "text2")
and `answer_short`. `img_path` is relative to `image_root` (or absolute). Quotes are put in
document order, (page_id, layout_id), when both are present, else text quotes then images.
Gold quotes are the evidence units, so a candidate interleaves text and image evidence.
"""
from __future__ import annotations

from pathlib import Path

from PIL import Image as PILImage, UnidentifiedImageError

from mmbench.data.media import MediaStore
from mmbench.data.tokens import UnifiedTokenCounter

from mmbench.builders.sources.records import Unit, image_unit, text_unit
from mmbench.builders.sources.hotpotqa import ReasoningRecord
from mmbench.builders.sources.jsonl import read_jsonl

MAX_IMAGE_SIDE = 1024  # larger quote images are downscaled (aspect kept) before storing


def read_mmdocrag(path: Path, image_root: Path, counter: UnifiedTokenCounter, media: MediaStore,
                  limit: int | None = None) -> list[ReasoningRecord]:
    path, image_root = Path(path), Path(image_root)
    if not path.is_file():
        raise FileNotFoundError(f"MMDocRAG JSONL {path} not found")
    out = []
    for where, _, rec in read_jsonl(path):
        out.append(mmdocrag_record(rec, counter, media, image_root, where))
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise ValueError(f"{path}: no MMDocRAG records found")
    return out


def mmdocrag_record(rec: dict, counter: UnifiedTokenCounter, media: MediaStore, image_root: Path | None,
                    where: str = "record", images: dict[str, PILImage.Image] | None = None) -> ReasoningRecord:
    """One record; `images` maps img_path to an in-memory image (the sample source uses it)."""
    qid, question = rec.get("q_id"), rec.get("question")
    if qid is None or not isinstance(question, str) or not question.strip():
        raise ValueError(f"{where}: fields 'q_id' and 'question' are required")
    quotes = []
    for field_name in ("text_quotes", "img_quotes"):
        items = rec.get(field_name)
        if not isinstance(items, list):
            raise ValueError(f"{where}: field {field_name!r} missing or not a list")
        for k, q in enumerate(items):
            if not isinstance(q, dict) or "quote_id" not in q:
                raise ValueError(f"{where}: {field_name}[{k}] has no 'quote_id'")
            quotes.append(q)
    gold = rec.get("gold_quotes")
    if not isinstance(gold, list):
        raise ValueError(f"{where}: field 'gold_quotes' missing or not a list")
    gold = [str(g) for g in gold]
    if all(q.get("page_id") is not None and q.get("layout_id") is not None for q in quotes):
        quotes.sort(key=lambda q: _position(q, where))
    units: list[Unit] = []
    known = set()
    for q in quotes:
        quote_id = str(q["quote_id"])
        known.add(quote_id)
        role = "evidence" if quote_id in gold else "context"
        source = f"mmdocrag:{qid}#{quote_id}"
        is_image = q.get("type") == "image" or "img_path" in q
        if is_image:
            img = _load(q, image_root, images, f"{where}: quote {quote_id}")
            units.append(image_unit(media.put_image(img, format="JPEG"), role=role, source=source,
                                    quote_id=quote_id, description=str(q.get("img_description") or ""),
                                    img_path=str(q.get("img_path"))))
        else:
            text = q.get("text")
            if not isinstance(text, str):
                raise ValueError(f"{where}: text quote {quote_id} has no 'text'")
            units.append(text_unit(counter, text, role=role, source=source, quote_id=quote_id))
    problems = [f"gold quote {g!r} is not among the quotes" for g in gold if g not in known]
    return ReasoningRecord(id=str(qid), dataset="mmdocrag", question=question.strip(),
                           answer=str(rec.get("answer_short", "")), units=units, problems=problems,
                           info={"doc_name": rec.get("doc_name"), "question_type": rec.get("question_type"),
                                 "gold_quotes": gold})


def _position(q: dict, where: str) -> tuple[int, int]:
    """(page_id, layout_id) as integers; an error names the record and the quote otherwise."""
    try:
        return int(q["page_id"]), int(q["layout_id"])
    except (TypeError, ValueError):
        raise ValueError(f"{where}: quote {q.get('quote_id')}: 'page_id'/'layout_id' must be integers, got "
                         f"{q['page_id']!r}/{q['layout_id']!r}") from None


def _load(q: dict, image_root: Path | None, images: dict | None, where: str) -> PILImage.Image:
    ref = q.get("img_path")
    if not isinstance(ref, str) or not ref:
        raise ValueError(f"{where}: image quote has no 'img_path'")
    if images is not None and ref in images:
        img = images[ref]
    else:
        p = Path(ref) if Path(ref).is_absolute() or image_root is None else Path(image_root) / ref
        if not p.is_file():
            raise FileNotFoundError(f"{where}: image file {p} not found")
        try:
            with PILImage.open(p) as im:
                img = im.convert("RGB")
        except (UnidentifiedImageError, OSError) as exc:
            raise ValueError(f"{where}: corrupt image {p} ({exc})") from exc
    if max(img.size) > MAX_IMAGE_SIDE:
        img = img.copy()
        img.thumbnail((MAX_IMAGE_SIDE, MAX_IMAGE_SIDE))
    return img
