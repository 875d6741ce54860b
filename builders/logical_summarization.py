"""Logical Summarization builder (MMLongEmbed Task 3): a summary retrieves its whole report.

Text (GovReport): the relevant candidate is the report padded with unrelated filler to the pool
length. Its Hard variants replace the first 25 %, the last 25 % or the middle 50 % of the report
(cut at paragraph boundaries) with paragraphs of BM25 look-alike reports: other reports of the
whole corpus that BM25 ranks highest for the summary, taken from the same relative position and
length-matched to the unified token. Multimodal (MMLongBench page images): the document is a
sequence of pages, and the replaced pages come from unseen consecutive pages of the same
source document's extended version, resized to the replaced pages' pixels. Pools are composed
as in Multi-Source Reasoning (constant candidates per query).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from tqdm.auto import tqdm

from mmbench.documents import Document, Image, Text
from mmbench.media import MediaStore
from mmbench.builders.validity import write_valid_poolset
from mmbench.poolset import build_scratch, PoolSet, source_fingerprint
from mmbench.tokens import UnifiedTokenCounter

from .expansion import Filler, Unit, image_unit, length_matched_text, pad, pad_pages, replace_units, text_unit
from .lookalikes import LookalikeIndex
from .multi_source_reasoning import (LENGTHS, candidate_doc, candidate_meta, check_pool_params, default_filler,
                                     easy_hard_pools, seeded_rng, unit_log)
from .query_filter import SUMMARY_RULES_VERSION, Decision, decision_summary, summary_rule
from .sources.govreport import Report, govreport_fingerprint, read_govreport
from .sources.mmlongbench import PagedDocument, read_mmlongbench
from .visual_grounding import length_label

TASK_NAME = "logical_summarization"
TASK_VERSION = "1.0"
DATASETS = ("govreport", "mmlongbench")
PARTS = {"first_25": (0.0, 0.25), "last_25": (0.75, 1.0), "middle_50": (0.25, 0.75)}
LENGTH_TOLERANCE = 0.01          # text candidates: ±1 % of nominal; page documents: at most one visual-token row short
HARD_EASY_TOLERANCE = 0          # Hard variants have exactly their undamaged counterpart's unified length
FILLER_PAGES = 48                # distinct filler pages, reused across documents


def build(source: str, out: Path, seed: int = 0, lengths: Sequence[int] = LENGTHS,
          datasets: Sequence[str] = DATASETS, queries_per_dataset: int = 12, candidates_per_query: int = 8,
          lookalikes: int = 5, govreport: str | None = None, mmlongbench: str | None = None,
          mmlongbench_images: str | None = None, filler: str | None = None, max_reports: int | None = None,
          tokenizer_json: str | None = None, progress: bool = True) -> PoolSet:
    """Build from `source` ("sample", or "real" with `govreport` / `mmlongbench` paths) into `out`."""
    lengths, datasets = check_pool_params(lengths, datasets, DATASETS, queries_per_dataset, candidates_per_query)
    counter = UnifiedTokenCounter.default(tokenizer_json)
    out = Path(out)
    with build_scratch(out) as scratch:
        media = MediaStore(scratch)
        sources: dict[str, str] = {}
        if source == "sample":
            from .sources.sample_reasoning import encyclopedia_text

            fill = Filler.from_text(encyclopedia_text(seed), counter.tokenizer, "sample-encyclopedia")
            sources["filler"] = "mmbench sample: templated encyclopedic prose (fictional entities)"
        elif source == "real":
            fill = default_filler(filler, counter, sources)
        else:
            raise ValueError(f"unknown source {source!r} for {TASK_NAME}; use 'sample' or 'real'")
        queries, candidates, pools, decisions, record = [], [], [], [], {}
        if "govreport" in datasets:
            reports = _reports(source, govreport, max_reports, sources)
            q, c, p, d, info = _text_pools(reports, lengths, fill, counter, queries_per_dataset, candidates_per_query,
                                           lookalikes, seed, source != "sample", progress)
            queries, candidates, pools, decisions = queries + q, candidates + c, pools + p, decisions + d
            record["govreport"] = info
        if "mmlongbench" in datasets:
            docs = _paged(source, mmlongbench, mmlongbench_images, max_reports, queries_per_dataset, sources)
            q, c, p, d, info = _page_pools(docs, lengths, fill, counter, media, queries_per_dataset, candidates_per_query,
                                           seed, progress)
            queries, candidates, pools, decisions = queries + q, candidates + c, pools + p, decisions + d
            record["mmlongbench"] = info
        ps = PoolSet(task=TASK_NAME, task_version=TASK_VERSION, queries=queries, candidates=candidates, pools=pools,
                     seed=seed, sources=sources)
        ps.builder = {"name": "mmbench.builders.logical_summarization", "source": source,
                      "params": {"lengths": list(lengths), "datasets": list(datasets),
                                 "queries_per_dataset": queries_per_dataset,
                                 "candidates_per_query": candidates_per_query, "lookalikes": lookalikes,
                                 "parts": {k: list(v) for k, v in PARTS.items()}},
                      "candidates_per_query": candidates_per_query, "length_tolerance": LENGTH_TOLERANCE,
                      "hard_easy_tolerance_tokens": HARD_EASY_TOLERANCE, "filler": fill.name,
                      "token_counter": getattr(counter.tokenizer, "name", "qwen3"), "datasets": record,
                      "query_filter": {"rules_version": SUMMARY_RULES_VERSION, "summary": decision_summary(decisions),
                                       "decisions": [d.to_dict() for d in decisions]}}
        write_valid_poolset(ps, out, media_from=scratch)
    return ps


# ---- sources ------------------------------------------------------------------------------

def _reports(source, path, max_reports, sources) -> list[Report]:
    if source == "sample":
        from .sources.sample_reports import pydoc_reports

        sources["govreport"] = "mmbench sample: Python Language Reference topics as reports, templated summaries"
        return list(pydoc_reports())
    if not path:
        raise ValueError("source 'real' with dataset govreport needs --param govreport=<parquet|jsonl|json|folder>")
    sources["govreport"] = govreport_fingerprint(path)   # a local path or hf:<id>@<revision>
    return read_govreport(path, max_reports)


def _paged(source, path, image_root, max_reports, n, sources) -> list[PagedDocument]:
    if source == "sample":
        from .sources.sample_reports import paged_documents

        sources["mmlongbench"] = "mmbench sample: Language Reference reports rendered as page images"
        return paged_documents(n + math.ceil(n / 4) + 2)
    if not path or not image_root:
        raise ValueError("source 'real' with dataset mmlongbench needs --param mmlongbench=<jsonl> "
                         "--param mmlongbench_images=<folder>")
    sources["mmlongbench"] = source_fingerprint(path)
    return read_mmlongbench(Path(path), Path(image_root), max_reports)


# ---- text reports -------------------------------------------------------------------------

def _text_pools(reports: list[Report], lengths, fill: Filler, counter, n: int, C: int, k: int, seed: int,
                shuffle: bool, progress: bool):
    ds = "govreport"
    index = LookalikeIndex([r.id for r in reports], [r.text for r in reports])
    by_id = {r.id: r for r in reports}
    order = list(seeded_rng(seed, "order", ds).permutation(len(reports))) if shuffle else range(len(reports))
    kept, decisions = [], []
    for i in order:
        r = reports[i]
        d = summary_rule(r.id, ds, r.summary, r.paragraphs)
        units = [text_unit(counter, p, source=f"{ds}:{r.id}#p{j}") for j, p in enumerate(r.paragraphs)] if d.kept else []
        if d.kept and sum(u.tokens for u in units) > lengths[-1]:
            d = Decision(r.id, ds, False, "rules", f"report of {sum(u.tokens for u in units)} tokens exceeds the "
                         f"largest bin ({lengths[-1]})", d.details)
        decisions.append(d)
        if d.kept:
            kept.append((r, units))
        if len(kept) >= n:
            break
    queries = [Document(id=f"q-{ds}-{r.id}", segments=[Text(r.summary)], tokens=counter.text(r.summary),
                        meta={"dataset": ds, "record_id": r.id}) for r, _ in kept]
    variants = {}
    for r, units in kept:
        near = index.nearest(r.summary, k, exclude=[r.id])
        variants[r.id] = {part: _text_variant(units, lo, hi, near, by_id, counter) for part, (lo, hi) in PARTS.items()}
    candidates, pools = [], []
    for length in tqdm(lengths, desc=f"{ds} lengths", disable=not progress):
        label = length_label(length)
        relevant, hard, eligible = {}, {}, []
        for r, units in kept:
            if sum(u.tokens for u in units) > length:
                continue
            eligible.append(r.id)
            padded = pad(units, length, fill, seeded_rng(seed, "pad", ds, r.id, length))
            base = f"ls-{ds}-{label}-{r.id}"
            candidates.append(candidate_doc(base, padded, {**candidate_meta(ds, length, "easy", r.id), "provenance": {
                "original": f"{ds}:{r.id}", "operation": "pad", "filler": fill.name,
                "report_tokens": sum(u.tokens for u in units), "units": unit_log(padded)}}))
            relevant[r.id], hard[r.id] = base, []
            for part, variant in variants[r.id].items():
                if variant is None:
                    continue
                a, b, repl, info = variant
                broken = replace_units(padded, a, b, repl)
                cid = f"{base}-hard-{part}"
                candidates.append(candidate_doc(cid, broken, {**candidate_meta(ds, length, "hard", r.id), "provenance": {
                    "original": f"{ds}:{r.id}", "operation": "replace_part", "part": part, "counterpart": base,
                    "replaced": {"segments": [a, b], "tokens": sum(u.tokens for u in padded[a:b]),
                                 "units": [u.source for u in padded[a:b]]},
                    "replacement": info, "units": unit_log(broken)}}))
                hard[r.id].append(cid)
        if len(eligible) >= C:
            pools += easy_hard_pools(ds, length, eligible, relevant, hard, C, seed)
    info = {"lookalike_index": index.params, "selected": [r.id for r, _ in kept],
            "failed_variants": {rid: [p for p, v in vs.items() if v is None] for rid, vs in variants.items()
                                if any(v is None for v in vs.values())}}
    return queries, candidates, pools, decisions, info


def part_span(units: Sequence[Unit], lo: float, hi: float) -> tuple[int, int]:
    """Unit indices [a, b) whose boundaries lie nearest to fractions lo and hi of the tokens."""
    cum = [0]
    for u in units:
        cum.append(cum[-1] + u.tokens)
    total = cum[-1]

    def nearest(frac: float) -> int:
        return min(range(len(cum)), key=lambda i: (abs(cum[i] - frac * total), i))

    a, b = nearest(lo), nearest(hi)
    if b <= a:
        b = min(len(units), a + 1)
    return a, b


def _text_variant(units: list[Unit], lo: float, hi: float, near, by_id: dict[str, Report], counter):
    """(a, b, replacement units, provenance) or None when the look-alikes cannot fill the span exactly."""
    a, b = part_span(units, lo, hi)
    need = sum(u.tokens for u in units[a:b])
    repl: list[Unit] = []
    used: list[dict[str, Any]] = []
    for la in near:
        paras = by_id[la.doc_id].paragraphs
        for j in range(int(lo * len(paras)), len(paras)):
            left = need - sum(u.tokens for u in repl)
            if left <= 0:
                break
            unit = text_unit(counter, paras[j], role="replacement", source=f"govreport:{la.doc_id}#p{j}")
            trimmed = unit.tokens > left
            if trimmed:
                text, count = length_matched_text(counter.tokenizer, [paras[j]], left)
                if count != left:
                    continue
                unit = Unit(Text(text), count, "replacement", unit.source)
            repl.append(unit)
            used.append({"from": la.doc_id, "bm25_rank": la.rank, "bm25_score": round(la.score, 4), "paragraph": j,
                         "tokens": unit.tokens, "trimmed": trimmed})
        if sum(u.tokens for u in repl) == need:
            return a, b, repl, {"kind": "text", "tokens": need, "lookalikes": [
                {"doc": x.doc_id, "bm25_rank": x.rank, "bm25_score": round(x.score, 4)} for x in near],
                "paragraphs": used}
    return None


# ---- page-image documents -----------------------------------------------------------------

def _page_pools(docs: list[PagedDocument], lengths, fill: Filler, counter, media: MediaStore, n: int, C: int, seed: int,
                progress: bool):
    ds = "mmlongbench"
    kept, decisions = [], []
    for d in docs:
        words = len(d.summary.split())
        if len(d.pages) < 4 or not d.extension or words < 8:
            decisions.append(Decision(d.id, ds, False, "rules", f"{len(d.pages)} pages (need 4), "
                                      f"{len(d.extension)} extension pages (need 1), {words} summary words (need 8)"))
            continue
        decisions.append(Decision(d.id, ds, True, "rules", f"{len(d.pages)} pages, {len(d.extension)} extension pages"))
        kept.append(d)
        if len(kept) >= n:
            break
    make_page = _filler_pages(fill, media)
    queries = [Document(id=f"q-{ds}-{d.id}", segments=[Text(d.summary)], tokens=counter.text(d.summary),
                        meta={"dataset": ds, "record_id": d.id}) for d in kept]
    stored = {d.id: [image_unit(media.put_image(p), source=f"{ds}:{d.id}#{name}")
                     for p, name in zip(d.pages, d.page_names)] for d in kept}
    variants = {d.id: {part: _page_variant(d, stored[d.id], lo, hi, media, seed) for part, (lo, hi) in PARTS.items()}
                for d in kept}
    candidates, pools = [], []
    for length in tqdm(lengths, desc=f"{ds} lengths", disable=not progress):
        label = length_label(length)
        relevant, hard, eligible = {}, {}, []
        for d in kept:
            units = stored[d.id]
            if sum(u.tokens for u in units) > length:
                continue
            eligible.append(d.id)
            size = (units[0].segment.width, units[0].segment.height)
            padded = pad_pages(units, length, make_page, size, seeded_rng(seed, "pad", ds, d.id, length))
            base = f"ls-{ds}-{label}-{d.id}"
            candidates.append(candidate_doc(base, padded, {**candidate_meta(ds, length, "easy", d.id), "provenance": {
                "original": f"{ds}:{d.id}", "operation": "pad_pages", "filler": fill.name, "units": unit_log(padded)}}))
            relevant[d.id], hard[d.id] = base, []
            for part, variant in variants[d.id].items():
                if variant is None:
                    continue
                a, b, repl, info = variant
                broken = replace_units(padded, a, b, repl)
                cid = f"{base}-hard-{part}"
                candidates.append(candidate_doc(cid, broken, {**candidate_meta(ds, length, "hard", d.id), "provenance": {
                    "original": f"{ds}:{d.id}", "operation": "replace_pages", "part": part, "counterpart": base,
                    "replaced": {"segments": [a, b], "units": [u.source for u in padded[a:b]]},
                    "replacement": info, "units": unit_log(broken)}}))
                hard[d.id].append(cid)
        if len(eligible) >= C:
            pools += easy_hard_pools(ds, length, eligible, relevant, hard, C, seed)
    info = {"selected": [d.id for d in kept], "failed_variants": {
        k: [p for p, v in vs.items() if v is None] for k, vs in variants.items() if any(v is None for v in vs.values())}}
    return queries, candidates, pools, decisions, info


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


def _page_variant(d: PagedDocument, units: list[Unit], lo: float, hi: float, media: MediaStore, seed: int):
    a, b = page_span(len(units), lo, hi)
    k = b - a
    if len(d.extension) < k:
        return None
    start = int(seeded_rng(seed, "extension", d.id, lo, hi).integers(len(d.extension) - k + 1))
    repl = []
    for off, u in enumerate(units[a:b]):
        page = d.extension[start + off]
        seg = u.segment
        resized = page if page.size == (seg.width, seg.height) else page.resize((seg.width, seg.height))
        repl.append(image_unit(media.put_image(resized), role="replacement",
                               source=f"mmlongbench:{d.id}#ext:{d.extension_names[start + off]}"))
    return a, b, repl, {"kind": "pages", "from": "extended version of the same document",
                        "extension_pages": d.extension_names[start:start + k], "pages": k}


def _filler_pages(fill: Filler, media: MediaStore):
    """make_page(index, w, h): a page of filler prose, rendered once per (index mod FILLER_PAGES, w, h)."""
    from .sources.sample_reports import render_pages

    text = fill.head_text(FILLER_PAGES * 900)
    cache: dict[tuple[int, int, int], Image] = {}

    def make(index: int, w: int, h: int) -> Image:
        key = (index % FILLER_PAGES, w, h)
        if key not in cache:
            chunk = text[key[0] * 3000:key[0] * 3000 + 4000]
            cache[key] = media.put_image(render_pages(chunk[chunk.find(" ") + 1:], (w, h))[0])
        return cache[key]

    return make
