"""Multi-Source Reasoning builder (MMLongEmbed Task 2): evidence chains in expanded contexts.

For each dataset (HotpotQA, MMDocRAG) and pool length, a query's relevant candidate is its own
context expanded with unrelated filler to the pool length, every unit keeping its relative
position. Its Hard variants are that same expanded context with one key evidence span (the
first, the last, or a random middle one) swapped for coherent text of exactly the same unified
length taken from another record (an image evidence is swapped for another record's image
resized to the same pixels). Easy pools rank the relevant candidate among other queries'
undamaged candidates; Hard pools among its own broken variants, topped up with other queries'
broken variants. Every pool has the same number of candidates.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from tqdm.auto import tqdm

from mmbench.documents import Document, Image, Text
from mmbench.media import MediaStore
from mmbench.builders.validity import write_valid_poolset
from mmbench.poolset import build_scratch, PoolItem, PoolSet, source_fingerprint
from mmbench.tokens import UnifiedTokenCounter

from .expansion import Filler, Unit, expand, image_unit, length_matched_text, replace_units, start_positions
from .query_filter import RULES_VERSION, LLMAuditor, RuleFilter, decision_summary, filter_records
from .sources.hotpotqa import ReasoningRecord, hotpot_record, read_hotpotqa
from .sources.mmdocrag import mmdocrag_record, read_mmdocrag
from .visual_grounding import length_label

TASK_NAME = "multi_source_reasoning"
TASK_VERSION = "1.0"
LENGTHS = (8192, 16384, 32768)
DATASETS = ("hotpotqa", "mmdocrag")
VARIANTS = ("first", "last", "middle")
LENGTH_TOLERANCE = 0.01      # every candidate is within ±1 % of its pool's nominal length
HARD_EASY_TOLERANCE = 0      # a Hard variant has exactly its undamaged counterpart's unified length
POSITION_TOLERANCE_TOKENS = 32  # each unit starts within this many tokens of its proportional position


def check_pool_params(lengths: Sequence[int], datasets: Sequence[str], known: Sequence[str],
                      queries_per_dataset: int, candidates_per_query: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Validate the parameters both real-data tasks share; lengths come back sorted."""
    datasets = tuple(datasets)
    if set(datasets) - set(known) or not datasets:
        raise ValueError(f"datasets must be among {tuple(known)}")
    if candidates_per_query < 2 or queries_per_dataset < candidates_per_query:
        raise ValueError("need 2 <= candidates_per_query <= queries_per_dataset")
    return tuple(sorted(int(x) for x in lengths)), datasets


def build(source: str, out: Path, seed: int = 0, lengths: Sequence[int] = LENGTHS,
          datasets: Sequence[str] = DATASETS, queries_per_dataset: int = 12, candidates_per_query: int = 8,
          hotpotqa: str | None = None, mmdocrag: str | None = None, mmdocrag_images: str | None = None,
          filler: str | None = None, max_records: int | None = None, auditor_model: str | None = None,
          auditor_base_url: str | None = None, auditor_api_key_env: str = "OPENAI_API_KEY",
          tokenizer_json: str | None = None, progress: bool = True) -> PoolSet:
    """Build from `source` ("sample", or "real" with `hotpotqa` / `mmdocrag` paths) into `out`."""
    lengths, datasets = check_pool_params(lengths, datasets, DATASETS, queries_per_dataset, candidates_per_query)
    counter = UnifiedTokenCounter.default(tokenizer_json)
    out = Path(out)
    with build_scratch(out) as scratch:
        media = MediaStore(scratch)
        records, sources = _load(source, datasets, counter, media, seed, queries_per_dataset, hotpotqa, mmdocrag,
                                 mmdocrag_images, max_records)
        fill = default_filler(filler, counter, sources)
        auditor = LLMAuditor(auditor_base_url, auditor_model, auditor_api_key_env) \
            if auditor_model and auditor_base_url else None
        rules = RuleFilter(max_context_tokens=lengths[0])
        queries, candidates, pools, decisions, selected = [], [], [], [], {}
        for ds in datasets:
            recs = records[ds]
            order = seeded_rng(seed, "order", ds).permutation(len(recs)) if source != "sample" else range(len(recs))
            kept, dec = filter_records([recs[i] for i in order], rules, auditor, queries_per_dataset)
            decisions += dec
            if len(kept) < candidates_per_query:
                raise ValueError(f"{ds}: only {len(kept)} queries pass the filter; need at least "
                                 f"candidates_per_query={candidates_per_query}")
            selected[ds] = [r.id for r in kept]
            q, c, p = _dataset_pools(ds, kept, recs, lengths, fill, counter, media, candidates_per_query, seed,
                                     progress)
            queries += q
            candidates += c
            pools += p
        ps = PoolSet(task=TASK_NAME, task_version=TASK_VERSION, queries=queries, candidates=candidates, pools=pools,
                     seed=seed, sources=sources)
        ps.builder = {"name": "mmbench.builders.multi_source_reasoning", "source": source,
                      "params": {"lengths": list(lengths), "datasets": list(datasets),
                                 "queries_per_dataset": queries_per_dataset,
                                 "candidates_per_query": candidates_per_query, "variants": list(VARIANTS)},
                      "candidates_per_query": candidates_per_query, "length_tolerance": LENGTH_TOLERANCE,
                      "hard_easy_tolerance_tokens": HARD_EASY_TOLERANCE, "position_tolerance_tokens": POSITION_TOLERANCE_TOKENS,
                      "filler": fill.name, "token_counter": getattr(counter.tokenizer, "name", "qwen3"),
                      "query_filter": {"rules_version": RULES_VERSION, "rule_params": asdict(rules),
                                       "auditor": auditor.describe() if auditor else None,
                                       "summary": decision_summary(decisions), "selected": selected,
                                       "decisions": [d.to_dict() for d in decisions]}}
        write_valid_poolset(ps, out, media_from=scratch)
    return ps


def seeded_rng(seed: int, *parts: Any) -> np.random.Generator:
    digest = hashlib.sha256(":".join(map(str, (seed, *parts))).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _load(source, datasets, counter, media, seed, n, hotpotqa, mmdocrag, mmdocrag_images, max_records):
    records: dict[str, list[ReasoningRecord]] = {}
    if source == "sample":
        from .sources import sample_reasoning as sr

        n_sample = n + math.ceil(n / 4) + 2   # the weak records the filter drops, plus a margin
        if "hotpotqa" in datasets:
            records["hotpotqa"] = [hotpot_record(r, counter, f"sample record {r['_id']}")
                                   for r in sr.hotpot_records(seed, n_sample)]
        if "mmdocrag" in datasets:
            recs, images = sr.mmdocrag_records(seed, n_sample)
            records["mmdocrag"] = [mmdocrag_record(r, counter, media, None, f"sample record {r['q_id']}", images)
                                   for r in recs]
        sources = {"hotpotqa": "mmbench sample: templated HotpotQA-layout records",
                   "mmdocrag": "mmbench sample: templated annual reports with rendered charts (MMDocRAG layout)"}
        return records, {k: v for k, v in sources.items() if k in datasets}
    if source != "real":
        raise ValueError(f"unknown source {source!r} for {TASK_NAME}; use 'sample' or 'real'")
    sources = {}
    if "hotpotqa" in datasets:
        if not hotpotqa:
            raise ValueError("source 'real' with dataset hotpotqa needs --param hotpotqa=<json|jsonl|parquet>")
        records["hotpotqa"] = read_hotpotqa(Path(hotpotqa), counter, max_records)
        sources["hotpotqa"] = source_fingerprint(hotpotqa)
    if "mmdocrag" in datasets:
        if not mmdocrag or not mmdocrag_images:
            raise ValueError("source 'real' with dataset mmdocrag needs --param mmdocrag=<jsonl> "
                             "--param mmdocrag_images=<folder>")
        records["mmdocrag"] = read_mmdocrag(Path(mmdocrag), Path(mmdocrag_images), counter, media, max_records)
        sources["mmdocrag"] = source_fingerprint(mmdocrag)
    return records, sources


def default_filler(path: str | None, counter: UnifiedTokenCounter, sources: dict[str, str]) -> Filler:
    """Unrelated filler text: a given plain-text file, else Python's Language Reference."""
    if path:
        sources["filler"] = source_fingerprint(path)
        return Filler.from_text(Path(path).read_text(encoding="utf-8"), counter.tokenizer, Path(path).name)
    from .sources.needles import sample_background_text

    sources["filler"] = "pydoc_data.topics (Python Language Reference)"
    return Filler.from_text(sample_background_text(), counter.tokenizer, "pydoc")


def _dataset_pools(ds: str, kept: list[ReasoningRecord], all_records: list[ReasoningRecord], lengths, fill: Filler,
                   counter: UnifiedTokenCounter, media: MediaStore, C: int, seed: int, progress: bool):
    queries = [Document(id=f"q-{ds}-{r.id}", segments=[Text(r.question)], tokens=counter.text(r.question),
                        meta={"dataset": ds, "record_id": r.id, "answer": r.answer}) for r in kept]
    replacements = {r.id: _replacements(r, all_records, counter, media, seed) for r in kept}
    candidates: list[Document] = []
    pools: list[PoolItem] = []
    for length in tqdm(lengths, desc=f"{ds} lengths", disable=not progress):
        label = length_label(length)
        relevant: dict[str, str] = {}
        hard: dict[str, list[str]] = {}
        for r in kept:
            expanded, where = _expand(r, length, fill, seed)
            base = f"msr-{ds}-{label}-{r.id}"
            orig_pos = start_positions(r.units)
            new_pos = start_positions(expanded)
            evidence = [{"source": r.units[i].source, "original_start": round(orig_pos[i], 6),
                         "expanded_start": round(new_pos[where[i]], 6), "segment_index": where[i]}
                        for i in r.evidence_indices]
            meta = candidate_meta(ds, length, "easy", r.id)
            meta["provenance"] = {"original": f"{ds}:{r.id}", "operation": "expand", "filler": fill.name,
                                  "context_tokens": r.tokens, "evidence": evidence, "units": unit_log(expanded)}
            candidates.append(candidate_doc(base, expanded, meta))
            relevant[r.id] = base
            hard[r.id] = []
            for which, (ev_index, repl, info) in replacements[r.id].items():
                k = where[ev_index]
                broken = replace_units(expanded, k, k + 1, repl)
                m = candidate_meta(ds, length, "hard", r.id)
                m["provenance"] = {"original": f"{ds}:{r.id}", "operation": "replace_evidence", "which": which,
                                   "counterpart": base, "replaced": {"unit": expanded[k].source,
                                                                     "segment_index": k,
                                                                     "tokens": expanded[k].tokens,
                                                                     "content": _describe(expanded[k])},
                                   "replacement": info, "units": unit_log(broken)}
                cid = f"{base}-hard-{which}"
                candidates.append(candidate_doc(cid, broken, m))
                hard[r.id].append(cid)
        pools += easy_hard_pools(ds, length, [r.id for r in kept], relevant, hard, C, seed)
    return queries, candidates, pools


def candidate_meta(ds: str, length: int, difficulty: str, rid: str) -> dict[str, Any]:
    return {"dataset": ds, "length_bin": length_label(length), "length_tokens": length, "difficulty": difficulty,
            "record_id": rid}


def candidate_doc(cid: str, units: list[Unit], meta: dict) -> Document:
    return Document(id=cid, segments=[u.segment for u in units], tokens=sum(u.tokens for u in units), meta=meta)


def unit_log(units: list[Unit]) -> list[list]:
    """[role, source, tokens] per segment: how the candidate was assembled."""
    return [[u.role, u.source, u.tokens] for u in units]


def _describe(u: Unit) -> str:
    return u.segment.text if isinstance(u.segment, Text) else f"image {u.segment.ref}"


def _expand(r: ReasoningRecord, length: int, fill: Filler, seed: int) -> tuple[list[Unit], dict[int, int]]:
    """The expanded units and where each original unit landed."""
    expanded = expand(r.units, length, fill, seeded_rng(seed, "expand", r.dataset, r.id, length))
    where, k = {}, 0
    for i, u in enumerate(expanded):
        if k < len(r.units) and u is r.units[k]:
            where[k] = i
            k += 1
    return expanded, where


def _replacements(r: ReasoningRecord, pool: list[ReasoningRecord], counter: UnifiedTokenCounter,
                  media: MediaStore, seed: int) -> dict[str, tuple[int, list[Unit], dict]]:
    """For each variant: (evidence unit index, replacement units, provenance). Same at every length."""
    ev = r.evidence_indices
    chosen = {"first": ev[0], "last": ev[-1]}
    if len(ev) >= 3:
        chosen["middle"] = ev[1 + int(seeded_rng(seed, "middle", r.dataset, r.id).integers(len(ev) - 2))]
    donors = [d for d in pool if d.id != r.id]
    out = {}
    for which, i in chosen.items():
        rng = seeded_rng(seed, "donor", r.dataset, r.id, which)
        target = r.units[i]
        if isinstance(target.segment, Image):
            unit, info = _image_replacement(target, donors, media, rng)
        else:
            unit, info = _text_replacement(target, donors, counter, rng)
        out[which] = (i, [unit], info)
    return out


def _text_replacement(target: Unit, donors: list[ReasoningRecord], counter, rng) -> tuple[Unit, dict]:
    """Coherent text from another record's non-evidence context, exactly `target.tokens` long."""
    for _ in range(10):
        d = donors[int(rng.integers(len(donors)))]
        texts = [(u.source, u.segment.text) for u in d.units if not u.is_evidence and isinstance(u.segment, Text)]
        if not texts:
            continue
        start = int(rng.integers(len(texts)))
        span = texts[start:] + texts[:start]
        text, count = length_matched_text(counter.tokenizer, [t.strip() for _, t in span], target.tokens)
        if count == target.tokens:
            return (Unit(Text(text), count, "replacement", span[0][0]),
                    {"kind": "text", "from_record": f"{d.dataset}:{d.id}", "from_units": _used_sources(span, text),
                     "tokens": count, "text": text})
    raise ValueError(f"record {target.source}: no donor text matches {target.tokens} tokens exactly")


def _used_sources(span: list[tuple[str, str]], text: str) -> list[str]:
    """Sources of the donor units whose text the replacement begins with (in order)."""
    used, pos = [], 0
    for source, t in span:
        if pos >= len(text):
            break
        used.append(source)
        pos += len(t.strip()) + 1
    return used


def _image_replacement(target: Unit, donors: list[ReasoningRecord], media: MediaStore, rng) -> tuple[Unit, dict]:
    """Another record's non-evidence image, resized to the target's pixels (identical token count)."""
    pool = [(d, u) for d in donors for u in d.units if isinstance(u.segment, Image) and not u.is_evidence]
    if not pool:
        raise ValueError(f"record {target.source}: no donor images to replace an image evidence span")
    d, u = pool[int(rng.integers(len(pool)))]
    seg = target.segment
    img = media.load_image(u.segment.ref, item=u.source).resize((seg.width, seg.height))
    stored = media.put_image(img, format="JPEG")
    return (image_unit(stored, role="replacement", source=u.source),
            {"kind": "image", "from_record": f"{d.dataset}:{d.id}", "from_units": [u.source],
             "tokens": target.tokens, "resized_from": [u.segment.width, u.segment.height],
             "description": u.info.get("description", "")})


def easy_hard_pools(ds: str, length: int, order: list[str], relevant: dict[str, str], hard: dict[str, list[str]],
                    C: int, seed: int) -> list[PoolItem]:
    """Easy and Hard items with exactly C candidates each (the same other queries at every length)."""
    label = length_label(length)
    items = []
    for q in order:
        others = [o for o in order if o != q]
        if len(others) < C - 1:
            raise ValueError(f"{ds}/{label}: {len(order)} queries cannot fill {C} candidates per query")
        rng = seeded_rng(seed, "pool", ds, q)
        picked = [others[i] for i in sorted(rng.choice(len(others), C - 1, replace=False))]
        meta = {"dataset": ds, "length_bin": label, "length_tokens": length}
        easy = [relevant[q]] + [relevant[o] for o in picked]
        items.append(PoolItem(id=f"{ds}/easy/{label}/{q}", query_id=f"q-{ds}-{q}", subset=f"{ds}/easy/{label}",
                              candidate_ids=easy, relevant_ids=[relevant[q]], meta={**meta, "difficulty": "easy"}))
        own = hard[q][:C - 1]
        fill = [c for o in picked for c in hard[o]]
        if len(own) + len(fill) < C - 1:
            fill = [c for o in others for c in hard[o]]
        if len(own) + len(fill) < C - 1:
            raise ValueError(f"{ds}/{label}: not enough Hard variants to fill {C} candidates for {q}")
        extra = [fill[i] for i in sorted(rng.choice(len(fill), C - 1 - len(own), replace=False))]
        items.append(PoolItem(id=f"{ds}/hard/{label}/{q}", query_id=f"q-{ds}-{q}", subset=f"{ds}/hard/{label}",
                              candidate_ids=[relevant[q]] + own + extra, relevant_ids=[relevant[q]],
                              meta={**meta, "difficulty": "hard", "own_variants": len(own)}))
    return items
