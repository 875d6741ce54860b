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

from pathlib import Path
from typing import Any, Iterable, Sequence

from mmbench.builders.checks import logical_summarization as checks
from mmbench.data.drops import DropLog
from mmbench.builders.parts.validity import write_valid_poolset
from mmbench.data.documents import Text
from mmbench.data.media import MediaStore
from mmbench.data.poolset import build_scratch, PoolSet, source_fingerprint
from mmbench.data.tokens import UnifiedTokenCounter

from mmbench.builders.parts.expansion import Filler, Unit, length_matched_text, pad, text_unit
from mmbench.builders.parts.length_bins import MAX_FILLER_SHARE, Placement, make_bins
from mmbench.builders.parts.lookalikes import LookalikeIndex
from mmbench.builders.parts.pools import LENGTHS, check_pool_params, default_filler
from mmbench.builders.parts.seeding import seeded_rng
from mmbench.builders.parts.query_filter import SUMMARY_RULES_VERSION, Decision, decision_summary, summary_rule
from mmbench.builders.sources.govreport import Report, govreport_fingerprint, read_govreport
from mmbench.builders.sources.mmlongbench import PagedDocument, read_mmlongbench
from mmbench.builders.parts.summary_pages import page_pools, page_span  # noqa: F401  (page_span: part of this module's interface)
from mmbench.builders.parts.summary_pools import (LENGTH_MEANING, PARTS, Placed, PoolOptions, assemble, bin_members, duplicate_of,
                            query_doc, rule_reason, vet)
from mmbench.builders.designs.logical_summarization import TASK_NAME, TASK_VERSION

DATASETS = ("govreport", "mmlongbench")
LENGTH_CONTROLS = ("natural", "padding")
LENGTH_TOLERANCE = 0.01          # padding mode: text candidates ±1 % of nominal; pages at most one row short
HARD_EASY_TOLERANCE = 0          # Hard variants have exactly their undamaged counterpart's unified length
QUERIES_PER_DATASET = {"natural": 8,    # per dataset and bin (= the default C/Q, so every bin is full)
                       "padding": 12}    # per dataset, spread over the bins it fits (version 1's default)


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
    opts = PoolOptions(length_control, float(max_filler_share), bins, queries_per_dataset, candidates_per_query,
                    lookalikes, seed, progress)
    with build_scratch(out) as scratch:
        media = MediaStore(scratch)
        sources: dict[str, str] = {}
        if source == "sample":
            from mmbench.builders.sources.sample_reasoning import encyclopedia_text

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
            q, c, p, d, info = page_pools(docs, fill, counter, media, opts, drops)
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
        write_valid_poolset(ps, out, checks, media_from=scratch, drops=drops)
    return ps

# ---- sources ------------------------------------------------------------------------------

def _reports(source, path, max_reports, o: PoolOptions, counter, sources) -> list[Report]:
    if source == "sample" and o.mode == "padding":     # version 1's sample: short reports, padded to every bin
        from mmbench.builders.sources.sample_reports import pydoc_reports

        sources["govreport"] = "mmbench sample: Python Language Reference topics as reports, templated summaries"
        return list(pydoc_reports())
    if source == "sample":
        from mmbench.builders.sources.sample_reports import natural_reports

        sources["govreport"] = ("mmbench sample: consecutive runs of Python's own documentation (Language Reference "
                                "topics, then standard-library docstrings) of natural lengths for each bin, "
                                "templated summaries")
        return natural_reports([(b.lo, b.nominal) for b in o.bins], o.per_bin, counter.text)
    if not path:
        raise ValueError("source 'real' with dataset govreport needs --param govreport=<parquet|jsonl|json|folder>")
    sources["govreport"] = govreport_fingerprint(path)   # a local path or hf:<id>@<revision>
    return read_govreport(path, max_reports)


def _paged(source, path, image_root, max_reports, o: PoolOptions, sources) -> Iterable[PagedDocument]:
    if source == "sample" and o.mode == "padding":
        from mmbench.builders.sources.sample_reports import paged_documents

        sources["mmlongbench"] = "mmbench sample: Language Reference reports rendered as page images"
        return paged_documents(o.per_bin + -(-o.per_bin // 4) + 2)
    if source == "sample":
        from mmbench.builders.sources.sample_reports import natural_paged_documents

        sources["mmlongbench"] = ("mmbench sample: runs of Python's own documentation rendered as page images, "
                                  "page counts of natural lengths for each bin, each with its own unseen extension")
        return natural_paged_documents([(b.lo, b.nominal) for b in o.bins], o.per_bin)
    if not path or not image_root:
        raise ValueError("source 'real' with dataset mmlongbench needs --param mmlongbench=<jsonl> "
                         "--param mmlongbench_images=<folder>")
    sources["mmlongbench"] = source_fingerprint(path)
    return read_mmlongbench(Path(path), Path(image_root), max_reports)

# ---- text reports -------------------------------------------------------------------------

def _text_pools(reports: list[Report], fill: Filler, counter, o: PoolOptions, shuffle: bool, drops: dict[str, DropLog]):
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
            log.drop(rule_reason(d), r.id)
            continue
        units = [text_unit(counter, p, source=f"{ds}:{r.id}#p{j}") for j, p in enumerate(r.paragraphs)]
        n = sum(u.tokens for u in units)
        placements, why = o.placements(n)
        o.measure(log, n, placements)
        if not placements:
            decisions.append(Decision(r.id, ds, False, "rules", f"report of {n} tokens: {why}", d.details))
            log.drop(why, f"{r.id} ({n} tokens)")
            continue
        if not o.room(counts, placements):
            log.drop("not needed: its bin already has queries_per_dataset reports", r.id)
            continue
        twin = duplicate_of(kept, r.summary, [u.segment.text for u in units])
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
        vet(p, vlog, "look-alikes cannot fill the part to the token")

    def padded(p: Placed, pl: Placement) -> list[Unit]:
        if pl.filler == 0:
            return list(p.units)
        return pad(p.units, pl.target, fill, seeded_rng(o.seed, "pad", ds, p.rid, pl.bin.nominal))

    candidates, pools = assemble(ds, kept, o, padded, fill.name, ("pad", "replace_part"), log)
    info = {"lookalike_index": index.params, "selected": [p.rid for p in kept], "bins": bin_members(kept, o),
            "failed_variants": {p.rid: [k for k, v in p.variants.items() if v is None] for p in kept
                                if any(v is None for v in p.variants.values())}}
    return [query_doc(ds, p, counter) for p in kept], candidates, pools, decisions, info

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
    """(a, b, replacement units, provenance) or None when the look-alikes cannot fill the span exactly.

    Every part draws the look-alikes' paragraphs from their start, so a report's three variants share one replacement
    text (the quarter variants the same, the half variant it and more): they overlap each other as much as they overlap
    the report, which is then no centre of its family (issue 33); each still lacks its own part of the report."""
    a, b = part_span(units, lo, hi)
    need = sum(u.tokens for u in units[a:b])
    own = {u.segment.text for u in units}        # never bring back text the document itself has
    repl: list[Unit] = []
    used: list[dict[str, Any]] = []
    for la in near:
        paras = by_id[la.doc_id].paragraphs
        for j in range(len(paras)):
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

