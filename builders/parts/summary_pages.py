"""Logical Summarization, page-image documents (MMLongBench): filter, store, vary, pool.

A document's pages are stored once; it is binned by the sum of its pages' unified tokens. The
summary filter reads the page text where the source gives it. Hard variants replace the pages of
a part with unseen consecutive pages of the document's own extension, resized to the replaced
pages' pixels; a document just short of a bin gets rendered filler pages (the last one cropped).
"""
from __future__ import annotations

from typing import Iterable

from mmbench.data.documents import Image
from mmbench.data.media import MediaStore
from mmbench.data.tokens import image_tokens

from mmbench.builders.parts.expansion import Filler, Unit, image_unit, pad_pages
from mmbench.builders.parts.length_bins import Placement
from mmbench.builders.parts.seeding import seeded_rng
from mmbench.builders.parts.query_filter import Decision, summary_rule
from mmbench.builders.sources.mmlongbench import PagedDocument
from mmbench.builders.parts.summary_pools import (PARTS, Placed, PoolOptions, assemble, bin_members, duplicate_of, query_doc, rule_reason,
                            vet)
from mmbench.data.drops import DropLog

FILLER_PAGES = 48                # distinct filler pages, reused across documents


def page_pools(docs: Iterable[PagedDocument], fill: Filler, counter, media: MediaStore, o: PoolOptions,
                drops: dict[str, DropLog]):
    ds = "mmlongbench"
    log = drops[ds] = DropLog(f"{ds} documents")
    vlog = drops[f"{ds}_hard_variants"] = DropLog(f"{ds} Hard variants")
    kept: list[Placed] = []
    decisions: list[Decision] = []
    counts: dict[str, int] = {}
    unchecked: list[str] = []
    for d in docs:                       # the sample draws its documents one at a time: store each, then let go
        if o.full(counts):
            break
        words = len(d.summary.split())
        if len(d.pages) < 4 or not d.extension or words < 8:
            decisions.append(Decision(d.id, ds, False, "rules", f"{len(d.pages)} pages (need 4), "
                                      f"{len(d.extension)} extension pages (need 1), {words} summary words (need 8)"))
            log.drop("too few pages, extension pages or summary words", d.id)
            continue
        if d.page_texts is not None:
            dec = summary_rule(d.id, ds, d.summary, d.page_texts)
            if not dec.kept:
                decisions.append(dec)
                log.drop(rule_reason(dec), d.id)
                continue
        else:
            dec = Decision(d.id, ds, True, "rules", "page text unknown: the macro-level rule was not applied",
                           {"rule": "unchecked"})
        n = sum(image_tokens(*page.size) for page in d.pages)
        placements, why = o.placements(n, step=-(-d.pages[0].width // 32))
        o.measure(log, n, placements)
        if not placements:
            decisions.append(Decision(d.id, ds, False, "rules", f"{len(d.pages)} pages of {n} tokens: {why}",
                                      dec.details))
            log.drop(why, f"{d.id} ({len(d.pages)} pages, {n} tokens)")
            continue
        if not o.room(counts, placements):
            log.drop("not needed: its bin already has queries_per_dataset documents", d.id)
            continue
        units = [image_unit(media.put_image(pg), source=f"{ds}:{d.id}#{name}")
                 for pg, name in zip(d.pages, d.page_names)]
        twin = duplicate_of(kept, d.summary, [u.segment.ref for u in units])
        if twin:
            decisions.append(Decision(d.id, ds, False, "rules", f"duplicate of {twin}", dec.details))
            log.drop("duplicate: same summary as, or pages within, a kept document", f"{d.id} ~ {twin}")
            continue
        decisions.append(Decision(d.id, ds, True, "rules", f"{len(d.pages)} pages, {len(d.extension)} extension "
                                  f"pages; {dec.reason}", dec.details))
        o.count(counts, placements)
        log.keep()
        if d.page_texts is None:
            unchecked.append(d.id)
        p = Placed(d.id, d.summary, units, placements, decision=dec.details)
        ext: dict[tuple[int, int, int], Image] = {}
        p.variants = {part: page_variant(d, units, lo, hi, media, o.seed, ext) for part, (lo, hi) in PARTS.items()}
        vet(p, vlog, "extension has too few pages")
        kept.append(p)
    if unchecked:
        note = drops[f"{ds}_unchecked"] = DropLog(f"{ds} summaries kept without page text "
                                                  "(macro-level rule not applied)")
        note.keep(len(unchecked))
    make_page = filler_pages(fill, media)

    def padded(p: Placed, pl: Placement) -> list[Unit]:
        if pl.filler == 0:
            return list(p.units)
        size = (p.units[0].segment.width, p.units[0].segment.height)
        return pad_pages(p.units, pl.target, make_page, size, seeded_rng(o.seed, "pad", ds, p.rid, pl.bin.nominal))

    candidates, pools = assemble(ds, kept, o, padded, fill.name, ("pad_pages", "replace_pages"), log)
    info = {"selected": [p.rid for p in kept], "bins": bin_members(kept, o), "macro_level_unchecked": unchecked,
            "failed_variants": {p.rid: [k for k, v in p.variants.items() if v is None] for p in kept
                                if any(v is None for v in p.variants.values())}}
    return [query_doc(ds, p, counter) for p in kept], candidates, pools, decisions, info


def page_span(n_pages: int, lo: float, hi: float) -> tuple[int, int]:
    """Pages [a, b) for a part: a quarter is round(n/4) pages, at least one; the middle half is
    its own centred span of ceil(n/2) pages (not what the rounded quarters leave, e.g. 2 of 6)."""
    q = max(1, round(n_pages / 4))
    if lo == 0:
        return 0, q
    if hi == 1:
        return n_pages - q, n_pages
    half = max(1, (n_pages + 1) // 2)
    a = (n_pages - half) // 2
    return a, a + half


def page_variant(d: PagedDocument, units: list[Unit], lo: float, hi: float, media: MediaStore, seed: int,
                  stored: dict[tuple[int, int, int], Image] | None = None):
    """(a, b, replacement units, provenance) or None; `stored` keeps each extension page encoded once
    per document and size, as the three variants of a document draw the same pages: one start per document, so
    they share their extension pages and the document is not the centre of its family (issue 33)."""
    stored = {} if stored is None else stored
    a, b = page_span(len(units), lo, hi)
    k = b - a
    if len(d.extension) < k:
        return None
    start = int(seeded_rng(seed, "extension", d.id).random() * (len(d.extension) - k + 1))   # shared (issue 33)
    repl = []
    for off, u in enumerate(units[a:b]):
        page = d.extension[start + off]
        seg = u.segment
        key = (start + off, seg.width, seg.height)
        if key not in stored:
            stored[key] = media.put_image(page if page.size == (seg.width, seg.height)
                                          else page.resize((seg.width, seg.height)))
        repl.append(image_unit(stored[key], role="replacement",
                               source=f"mmlongbench:{d.id}#ext:{d.extension_names[start + off]}"))
    return a, b, repl, {"kind": "pages", "from": "extended version of the same document",
                        "extension_pages": d.extension_names[start:start + k], "pages": k}


def filler_pages(fill: Filler, media: MediaStore):
    """make_page(index, w, h): a page of filler prose, rendered once per (index mod FILLER_PAGES, w, h)."""
    from mmbench.builders.sources.sample_reports import render_pages

    text = fill.head_text(FILLER_PAGES * 900)
    cache: dict[tuple[int, int, int], Image] = {}

    def make(index: int, w: int, h: int) -> Image:
        key = (index % FILLER_PAGES, w, h)
        if key not in cache:
            chunk = text[key[0] * 3000:key[0] * 3000 + 4000]
            cache[key] = media.put_image(render_pages(chunk[chunk.find(" ") + 1:], (w, h))[0])
        return cache[key]

    return make
