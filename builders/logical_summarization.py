"""Logical Summarization builder (MMLongEmbed Task 3): a summary retrieves its whole report.

Length is the candidate's own length. Bins are stated ranges (builders/length_bins.py): a
document goes into the one bin its own length falls in, (L/2, L] for L = 8K, 16K, 32K, and only a
document just short of the smallest bin is padded, with filler never more than `max_filler_share`
of the candidate (recorded per candidate). So each pool holds documents that are long in
themselves, and no document appears in two bins. `length_control="padding"` keeps the earlier
behaviour instead: every report that fits a bin is padded at its end with unrelated filler to the
bin's nominal length, so one report appears in every bin it fits.

Text (GovReport): Hard variants replace the first 25 %, the last 25 % or the middle 50 % of the
report (cut at paragraph boundaries) with paragraphs of BM25 look-alike reports: other reports of
the whole corpus that BM25 ranks highest for the summary, taken from the same relative position
and length-matched to the unified token. Multimodal (MMLongBench page images): the document is a
sequence of pages, binned by its pages' tokens, and the replaced pages come from unseen
consecutive pages of the same source document's extended version, resized to the replaced
pages' pixels. Hard variants keep the document's own length exactly. Summaries must be
macro-level (query_filter.summary_rule) on text reports and, where the page text is known, on
page documents. Pools are composed as in Multi-Source Reasoning (constant candidates per query).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from tqdm.auto import tqdm

from mmbench.documents import Document, Image, Text
from mmbench.media import MediaStore
from mmbench.builders.validity import DropLog, write_valid_poolset
from mmbench.poolset import build_scratch, PoolSet, source_fingerprint
from mmbench.tokens import UnifiedTokenCounter

from .expansion import Filler, Unit, image_unit, length_matched_text, pad, pad_pages, replace_units, text_unit
from .length_bins import MAX_FILLER_SHARE, Bin, Placement, make_bins, no_bin_reason, place
from .lookalikes import LookalikeIndex
from .multi_source_reasoning import (LENGTHS, candidate_doc, candidate_meta, check_pool_params, default_filler,
                                     easy_hard_pools, seeded_rng, unit_log)
from .query_filter import SUMMARY_RULES_VERSION, Decision, decision_summary, summary_rule
from .sources.govreport import Report, govreport_fingerprint, read_govreport
from .sources.mmlongbench import PagedDocument, read_mmlongbench

TASK_NAME = "logical_summarization"
TASK_VERSION = "2.0"
DATASETS = ("govreport", "mmlongbench")
PARTS = {"first_25": (0.0, 0.25), "last_25": (0.75, 1.0), "middle_50": (0.25, 0.75)}
LENGTH_CONTROLS = ("natural", "padding")
LENGTH_TOLERANCE = 0.01          # padding mode: text candidates ±1 % of nominal; pages at most one row short
HARD_EASY_TOLERANCE = 0          # Hard variants have exactly their undamaged counterpart's unified length
FILLER_PAGES = 48                # distinct filler pages, reused across documents
QUERIES_PER_DATASET = {"natural": 8,    # per dataset and bin (= the default C/Q, so every bin is full)
                       "padding": 12}    # per dataset, spread over the bins it fits (version 1's default)


@dataclass
class Placed:
    """A kept document: its query, its own units, where it goes, and its Hard variants."""

    rid: str
    summary: str
    units: list[Unit]
    placements: list[Placement]
    variants: dict[str, Any] = field(default_factory=dict)
    decision: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return sum(u.tokens for u in self.units)


def build(source: str, out: Path, seed: int = 0, lengths: Sequence[int] = LENGTHS,
          datasets: Sequence[str] = DATASETS, queries_per_dataset: int | None = None,
          candidates_per_query: int = 8, lookalikes: int = 5, length_control: str = "natural",
          max_filler_share: float = MAX_FILLER_SHARE, govreport: str | None = None, mmlongbench: str | None = None,
          mmlongbench_images: str | None = None, filler: str | None = None, max_reports: int | None = None,
          tokenizer_json: str | None = None, progress: bool = True) -> PoolSet:
    """Build from `source` ("sample", or "real" with `govreport` / `mmlongbench` paths) into `out`."""
    if length_control not in LENGTH_CONTROLS:
        raise ValueError(f"length_control must be one of {', '.join(LENGTH_CONTROLS)}, not {length_control!r}")
    if queries_per_dataset is None:
        queries_per_dataset = QUERIES_PER_DATASET[length_control]
    lengths, datasets = check_pool_params(lengths, datasets, DATASETS, queries_per_dataset, candidates_per_query)
    if not 0 <= float(max_filler_share) < 1:
        raise ValueError(f"max_filler_share must be in [0, 1), not {max_filler_share!r}")
    bins = make_bins(lengths)
    counter = UnifiedTokenCounter.default(tokenizer_json)
    out = Path(out)
    opts = _Options(length_control, float(max_filler_share), bins, queries_per_dataset, candidates_per_query,
                    lookalikes, seed, progress)
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
        queries, candidates, pools, decisions, record, drops = [], [], [], [], {}, {}
        if "govreport" in datasets:
            reports = _reports(source, govreport, max_reports, opts, counter, sources)
            q, c, p, d, info = _text_pools(reports, fill, counter, opts, source != "sample", drops)
            queries, candidates, pools, decisions = queries + q, candidates + c, pools + p, decisions + d
            record["govreport"] = info
        if "mmlongbench" in datasets:
            docs = _paged(source, mmlongbench, mmlongbench_images, max_reports, opts, sources)
            q, c, p, d, info = _page_pools(docs, fill, counter, media, opts, drops)
            queries, candidates, pools, decisions = queries + q, candidates + c, pools + p, decisions + d
            record["mmlongbench"] = info
        ps = PoolSet(task=TASK_NAME, task_version=TASK_VERSION, queries=queries, candidates=candidates, pools=pools,
                     seed=seed, sources=sources)
        ps.builder = {"name": "mmbench.builders.logical_summarization", "source": source,
                      "params": {"lengths": list(lengths), "datasets": list(datasets),
                                 "queries_per_dataset": queries_per_dataset,
                                 "candidates_per_query": candidates_per_query, "lookalikes": lookalikes,
                                 "length_control": length_control, "max_filler_share": float(max_filler_share),
                                 "parts": {k: list(v) for k, v in PARTS.items()}},
                      "length_control": {"mode": length_control, "bins": {b.label: [b.lo, b.nominal] for b in bins},
                                         "max_filler_share": float(max_filler_share),
                                         "meaning": LENGTH_MEANING[length_control]},
                      "candidates_per_query": candidates_per_query, "length_tolerance": LENGTH_TOLERANCE,
                      "hard_easy_tolerance_tokens": HARD_EASY_TOLERANCE, "filler": fill.name,
                      "token_counter": getattr(counter.tokenizer, "name", "qwen3"), "datasets": record,
                      "query_filter": {"rules_version": SUMMARY_RULES_VERSION, "summary": decision_summary(decisions),
                                       "decisions": [d.to_dict() for d in decisions]}}
        write_valid_poolset(ps, out, media_from=scratch, drops=drops)
    return ps


LENGTH_MEANING = {
    "natural": "a candidate's own document length lies in its bin's range (lo, L]; filler only lifts a document "
               "just short of a bin past its lower bound, at most max_filler_share of the candidate",
    "padding": "every document that fits a bin is padded at its end with unrelated filler to the bin's nominal "
               "length L; one document appears in every bin it fits",
}


@dataclass(frozen=True)
class _Options:
    mode: str
    max_filler_share: float
    bins: list[Bin]
    per_bin: int
    C: int
    lookalikes: int
    seed: int
    progress: bool

    def placements(self, n: int, step: int = 1) -> tuple[list[Placement], str]:
        """Where a document of `n` own tokens goes ([] and the reason when nowhere)."""
        if self.mode == "padding":
            got = [Placement(b, b.nominal, b.nominal - n) for b in self.bins if n <= b.nominal]
            return got, "" if got else f"longer than the largest bin ({self.bins[-1].nominal} tokens)"
        p = place(n, self.bins, self.max_filler_share, step)
        return ([p], "") if p else ([], no_bin_reason(n, self.bins, self.max_filler_share))

    def room(self, counts: dict[str, int], placements: list[Placement]) -> bool:
        """Natural mode caps each bin at `per_bin` documents; padding mode caps the dataset."""
        if self.mode == "padding":
            return counts.get("all", 0) < self.per_bin
        return counts.get(placements[0].bin.label, 0) < self.per_bin

    def full(self, counts: dict[str, int]) -> bool:
        if self.mode == "padding":
            return counts.get("all", 0) >= self.per_bin
        return all(counts.get(b.label, 0) >= self.per_bin for b in self.bins)

    def count(self, counts: dict[str, int], placements: list[Placement]) -> None:
        key = "all" if self.mode == "padding" else placements[0].bin.label
        counts[key] = counts.get(key, 0) + 1


# ---- sources ------------------------------------------------------------------------------

def _reports(source, path, max_reports, o: _Options, counter, sources) -> list[Report]:
    if source == "sample" and o.mode == "padding":     # version 1's sample: short reports, padded to every bin
        from .sources.sample_reports import pydoc_reports

        sources["govreport"] = "mmbench sample: Python Language Reference topics as reports, templated summaries"
        return list(pydoc_reports())
    if source == "sample":
        from .sources.sample_reports import natural_reports

        sources["govreport"] = ("mmbench sample: consecutive runs of Python's own documentation (Language Reference "
                                "topics, then standard-library docstrings) of natural lengths for each bin, "
                                "templated summaries")
        return natural_reports([(b.lo, b.nominal) for b in o.bins], o.per_bin, counter.text)
    if not path:
        raise ValueError("source 'real' with dataset govreport needs --param govreport=<parquet|jsonl|json|folder>")
    sources["govreport"] = govreport_fingerprint(Path(path))
    return read_govreport(Path(path), max_reports)


def _paged(source, path, image_root, max_reports, o: _Options, sources) -> Iterable[PagedDocument]:
    if source == "sample" and o.mode == "padding":
        from .sources.sample_reports import paged_documents

        sources["mmlongbench"] = "mmbench sample: Language Reference reports rendered as page images"
        return paged_documents(o.per_bin + -(-o.per_bin // 4) + 2)
    if source == "sample":
        from .sources.sample_reports import natural_paged_documents

        sources["mmlongbench"] = ("mmbench sample: runs of Python's own documentation rendered as page images, "
                                  "page counts of natural lengths for each bin, each with its own unseen extension")
        return natural_paged_documents([(b.lo, b.nominal) for b in o.bins], o.per_bin)
    if not path or not image_root:
        raise ValueError("source 'real' with dataset mmlongbench needs --param mmlongbench=<jsonl> "
                         "--param mmlongbench_images=<folder>")
    sources["mmlongbench"] = source_fingerprint(path)
    return read_mmlongbench(Path(path), Path(image_root), max_reports)


def _query(ds: str, p: Placed, counter) -> Document:
    return Document(id=f"q-{ds}-{p.rid}", segments=[Text(p.summary)], tokens=counter.text(p.summary),
                    meta={"dataset": ds, "record_id": p.rid, "length_bins": [x.bin.label for x in p.placements],
                          "summary_filter": p.decision})


def _rule_reason(d: Decision) -> str:
    return "summary: " + str(d.details.get("rule", "rules")).replace("_", " ")


# ---- text reports -------------------------------------------------------------------------

def _text_pools(reports: list[Report], fill: Filler, counter, o: _Options, shuffle: bool, drops: dict[str, DropLog]):
    ds = "govreport"
    log = drops[ds] = DropLog(f"{ds} reports")
    vlog = drops[f"{ds}_hard_variants"] = DropLog(f"{ds} Hard variants")
    index = LookalikeIndex([r.id for r in reports], [r.text for r in reports])
    by_id = {r.id: r for r in reports}
    order = list(seeded_rng(o.seed, "order", ds).permutation(len(reports))) if shuffle else range(len(reports))
    kept: list[Placed] = []
    decisions: list[Decision] = []
    counts: dict[str, int] = {}
    for i in order:
        if o.full(counts):
            break
        r = reports[i]
        d = summary_rule(r.id, ds, r.summary, r.paragraphs)
        if not d.kept:
            decisions.append(d)
            log.drop(_rule_reason(d), r.id)
            continue
        units = [text_unit(counter, p, source=f"{ds}:{r.id}#p{j}") for j, p in enumerate(r.paragraphs)]
        n = sum(u.tokens for u in units)
        placements, why = o.placements(n)
        if not placements:
            decisions.append(Decision(r.id, ds, False, "rules", f"report of {n} tokens: {why}", d.details))
            log.drop(why, f"{r.id} ({n} tokens)")
            continue
        if not o.room(counts, placements):
            log.drop("not needed: its bin already has queries_per_dataset reports", r.id)
            continue
        twin = _duplicate_of(kept, r.summary, [u.segment.text for u in units])
        if twin:
            decisions.append(Decision(r.id, ds, False, "rules", f"duplicate of {twin}", d.details))
            log.drop("duplicate: same summary as, or text within, a kept report", f"{r.id} ~ {twin}")
            continue
        decisions.append(d)
        o.count(counts, placements)
        log.keep()
        kept.append(Placed(r.id, r.summary, units, placements, decision=d.details))
    for p in kept:
        near = index.nearest(p.summary, o.lookalikes, exclude=[p.rid])
        p.variants = {part: _text_variant(p.units, lo, hi, near, by_id, counter) for part, (lo, hi) in PARTS.items()}
        _vet(p, vlog, "look-alikes cannot fill the part to the token")

    def padded(p: Placed, pl: Placement) -> list[Unit]:
        if pl.filler == 0:
            return list(p.units)
        return pad(p.units, pl.target, fill, seeded_rng(o.seed, "pad", ds, p.rid, pl.bin.nominal))

    candidates, pools = _assemble(ds, kept, o, padded, fill.name, ("pad", "replace_part"))
    info = {"lookalike_index": index.params, "selected": [p.rid for p in kept], "bins": _bin_members(kept, o),
            "failed_variants": {p.rid: [k for k, v in p.variants.items() if v is None] for p in kept
                                if any(v is None for v in p.variants.values())}}
    return [_query(ds, p, counter) for p in kept], candidates, pools, decisions, info


MISSES_SUMMARY = "the replaced part holds none of the paragraphs (pages) that best match the summary's sentences"


def _vet(p: Placed, vlog: DropLog, failed: str) -> None:
    """Count each variant; drop one whose replaced part takes away nothing the summary describes (its
    sentences' best-matching paragraphs all survive), as it would still answer the query."""
    best = p.decision.get("best_paragraphs")
    for part, v in p.variants.items():
        if v is None:
            vlog.drop(failed, f"{p.rid}/{part}")
        elif best is not None and not any(v[0] <= i < v[1] for i in best):
            p.variants[part] = None
            vlog.drop(MISSES_SUMMARY, f"{p.rid}/{part}")
        else:
            vlog.keep()


def _duplicate_of(kept: list[Placed], summary: str, keys: list) -> str | None:
    """The kept document this one duplicates: the same summary, or one's segments all within the other's
    (a query would then have two answers)."""
    from .validity import normalise_question

    text, mine = normalise_question(summary), set(keys)
    for p in kept:
        theirs = {u.segment.text if isinstance(u.segment, Text) else u.segment.ref for u in p.units}
        if normalise_question(p.summary) == text or mine <= theirs or theirs <= mine:
            return p.rid
    return None


def _bin_members(kept: list[Placed], o: _Options) -> dict[str, list[str]]:
    return {b.label: [p.rid for p in kept if any(x.bin == b for x in p.placements)] for b in o.bins}


# ---- candidates and pools -----------------------------------------------------------------

def _assemble(ds: str, kept: list[Placed], o: _Options, padded, filler_name: str, ops: tuple[str, str]):
    """Each kept document's Easy candidate and Hard variants in each bin it is placed in, and the pools."""
    candidates, pools = [], []
    for b in tqdm(o.bins, desc=f"{ds} bins", disable=not o.progress):
        here = [(p, pl) for p in kept for pl in p.placements if pl.bin == b]
        if len(here) < o.C:
            raise ValueError(f"{ds} bin {b.describe()}: {len(here)} documents fit, {o.C} are needed "
                             f"(candidates_per_query); add documents, lower candidates_per_query or leave the bin "
                             "out of lengths")
        relevant, hard = {}, {}
        for p, pl in here:
            units = padded(p, pl)
            total = sum(u.tokens for u in units)
            meta = {**candidate_meta(ds, b.nominal, "easy", p.rid), "length_range": [b.lo, b.nominal],
                    "length_control": o.mode, "document_tokens": p.tokens, "filler_tokens": total - p.tokens,
                    "filler_share": round((total - p.tokens) / total, 4)}
            base = f"ls-{ds}-{b.label}-{p.rid}"
            candidates.append(candidate_doc(base, units, {**meta, "provenance": {
                "original": f"{ds}:{p.rid}", "operation": ops[0] if total > p.tokens else "whole_document",
                "filler": filler_name if total > p.tokens else None, "units": unit_log(units)}}))
            relevant[p.rid], hard[p.rid] = base, []
            for part, variant in p.variants.items():
                if variant is None:
                    continue
                a, b_, repl, info = variant
                broken = replace_units(units, a, b_, repl)
                cid = f"{base}-hard-{part}"
                candidates.append(candidate_doc(cid, broken, {**meta, "difficulty": "hard", "provenance": {
                    "original": f"{ds}:{p.rid}", "operation": ops[1], "part": part, "counterpart": base,
                    "replaced": {"segments": [a, b_], "tokens": sum(u.tokens for u in units[a:b_]),
                                 "units": [u.source for u in units[a:b_]]},
                    "replacement": info, "units": unit_log(broken)}}))
                hard[p.rid].append(cid)
        items = easy_hard_pools(ds, b.nominal, [p.rid for p, _ in here], relevant, hard, o.C, o.seed)
        for item in items:
            item.meta["length_range"] = [b.lo, b.nominal]
        pools += items
    return candidates, pools


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
    own = {u.segment.text for u in units}        # never bring back text the document itself has
    repl: list[Unit] = []
    used: list[dict[str, Any]] = []
    for la in near:
        paras = by_id[la.doc_id].paragraphs
        for j in range(int(lo * len(paras)), len(paras)):
            left = need - sum(u.tokens for u in repl)
            if left <= 0:
                break
            if paras[j] in own:
                continue
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

def _page_pools(docs: Iterable[PagedDocument], fill: Filler, counter, media: MediaStore, o: _Options,
                drops: dict[str, DropLog]):
    from mmbench.tokens import image_tokens

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
                log.drop(_rule_reason(dec), d.id)
                continue
        else:
            dec = Decision(d.id, ds, True, "rules", "page text unknown: the macro-level rule was not applied",
                           {"rule": "unchecked"})
        n = sum(image_tokens(*page.size) for page in d.pages)
        placements, why = o.placements(n, step=-(-d.pages[0].width // 32))
        if not placements:
            decisions.append(Decision(d.id, ds, False, "rules", f"{len(d.pages)} pages of {n} tokens: {why}",
                                      dec.details))
            log.drop(why, f"{d.id} ({len(d.pages)} pages, {n} tokens)")
            continue
        if not o.room(counts, placements):
            log.drop("not needed: its bin already has queries_per_dataset documents", d.id)
            continue
        units = [image_unit(media.put_image(pg), source=f"{ds}:{d.id}#{name}") for pg, name in zip(d.pages, d.page_names)]
        twin = _duplicate_of(kept, d.summary, [u.segment.ref for u in units])
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
        p.variants = {part: _page_variant(d, units, lo, hi, media, o.seed, ext) for part, (lo, hi) in PARTS.items()}
        _vet(p, vlog, "extension has too few pages")
        kept.append(p)
    if unchecked:
        note = drops[f"{ds}_unchecked"] = DropLog(f"{ds} summaries kept without page text (macro-level rule not applied)")
        note.keep(len(unchecked))
    make_page = _filler_pages(fill, media)

    def padded(p: Placed, pl: Placement) -> list[Unit]:
        if pl.filler == 0:
            return list(p.units)
        size = (p.units[0].segment.width, p.units[0].segment.height)
        return pad_pages(p.units, pl.target, make_page, size, seeded_rng(o.seed, "pad", ds, p.rid, pl.bin.nominal))

    candidates, pools = _assemble(ds, kept, o, padded, fill.name, ("pad_pages", "replace_pages"))
    info = {"selected": [p.rid for p in kept], "bins": _bin_members(kept, o), "macro_level_unchecked": unchecked,
            "failed_variants": {p.rid: [k for k, v in p.variants.items() if v is None] for p in kept
                                if any(v is None for v in p.variants.values())}}
    return [_query(ds, p, counter) for p in kept], candidates, pools, decisions, info


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


def _page_variant(d: PagedDocument, units: list[Unit], lo: float, hi: float, media: MediaStore, seed: int,
                  stored: dict[tuple[int, int, int], Image] | None = None):
    """(a, b, replacement units, provenance) or None; `stored` keeps each extension page encoded once
    per document and size, as the three variants of a document mostly draw the same pages."""
    stored = {} if stored is None else stored
    a, b = page_span(len(units), lo, hi)
    k = b - a
    if len(d.extension) < k:
        return None
    start = int(seeded_rng(seed, "extension", d.id, lo, hi).integers(len(d.extension) - k + 1))
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
