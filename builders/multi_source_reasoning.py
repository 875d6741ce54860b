"""Multi-Source Reasoning builder (MMLongEmbed Task 2): evidence chains in expanded contexts.

For each dataset (HotpotQA, MMDocRAG) and pool length, a query's relevant candidate is its own
context expanded with unrelated filler to the pool length, every unit keeping its relative
position. Its Hard variants are that same expanded context with one key evidence span (the
first, the last, or a random middle one) swapped for coherent text of exactly the same unified
length taken from another record (an image evidence is swapped for another record's image
resized to the same pixels). Units that restate the replaced fact are replaced too, and a variant that
would still answer its question is rebuilt or dropped (`hard_variants`, `evidence_chain`); every
drop is counted, and the finished records are checked (`checks.multi_source_reasoning`) before
they are written. Easy pools rank the relevant candidate among other queries'
undamaged candidates; Hard pools among its own broken variants, topped up with other queries'
broken variants. Every pool has the same number of candidates.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from tqdm.auto import tqdm

from mmbench.builders.checks import multi_source_reasoning as checks
from mmbench.data.documents import Document, Text
from mmbench.data.media import MediaStore
from mmbench.data.drops import DropLog
from mmbench.builders.parts.validity import normalise_question, write_valid_poolset
from mmbench.data.poolset import build_scratch, PoolItem, PoolSet, source_fingerprint
from mmbench.data.tokens import UnifiedTokenCounter

from mmbench.builders.parts.evidence_chain import chain_leaks
from mmbench.builders.parts.expansion import Filler, Unit, expand, replace_units, start_positions
from mmbench.builders.sources.backgrounds import text_reach
from mmbench.builders.parts.hard_auditor import HardAuditor
from mmbench.builders.parts.hard_variants import (audit_hard, chain_units, decoy_for, family_size, family_variants,
                                                 plan_variants, reason_kind, replacements_for)
from mmbench.builders.parts.query_filter import RULES_VERSION, LLMAuditor, RuleFilter, decision_summary, filter_records
from mmbench.builders.sources.hotpotqa import ReasoningRecord, hotpot_record, hotpotqa_fingerprint, read_hotpotqa
from mmbench.builders.sources.mmdocrag import mmdocrag_record, read_mmdocrag
from mmbench.builders.parts.seeding import seeded_rng
from mmbench.data.tokens import length_label
from mmbench.builders.parts.pools import (LENGTHS, candidate_doc, candidate_meta, check_pool_params, default_filler,
                                         easy_hard_pools, unit_log)
from mmbench.builders.designs.multi_source_reasoning import TASK_NAME, TASK_VERSION

DATASETS = ("hotpotqa", "mmdocrag")
VARIANTS = ("first", "last", "middle")
LENGTH_TOLERANCE = 0.01      # every candidate is within ±1 % of its pool's nominal length
HARD_EASY_TOLERANCE = 0      # a Hard variant has exactly its undamaged counterpart's unified length
POSITION_TOLERANCE_TOKENS = 32  # each unit starts within this many tokens of its proportional position


def build(source: str, out: Path, seed: int = 0, lengths: Sequence[int] = LENGTHS,
          datasets: Sequence[str] = DATASETS, queries_per_dataset: int = 12, candidates_per_query: int = 8,
          hotpotqa: str | None = None, mmdocrag: str | None = None, mmdocrag_images: str | None = None,
          filler: str | None = None, max_records: int | None = None, auditor_model: str | None = None,
          auditor_base_url: str | None = None, auditor_api_key_env: str = "OPENAI_API_KEY",
          tokenizer_json: str | None = None, audit_hard: bool = False, progress: bool = True) -> PoolSet:
    """Build from `source` ("sample", or "real" with `hotpotqa` / `mmdocrag` paths) into `out`."""
    lengths, datasets = check_pool_params(lengths, datasets, DATASETS, queries_per_dataset, candidates_per_query)
    family_size(candidates_per_query)      # a shape whose Hard pools cannot be centre-free is refused here
    counter = UnifiedTokenCounter.default(tokenizer_json)
    out = Path(out)
    with build_scratch(out) as scratch:
        media = MediaStore(scratch)
        records, sources = _load(source, datasets, counter, media, seed, queries_per_dataset, hotpotqa, mmdocrag,
                                 mmdocrag_images, max_records)
        fill = default_filler(filler, counter, sources)
        auditor = LLMAuditor(auditor_base_url, auditor_model, auditor_api_key_env) \
            if auditor_model and auditor_base_url else None
        audit_hard = _flag(audit_hard, "audit_hard")
        hard_auditor = HardAuditor(auditor) if auditor is not None and audit_hard else None
        if audit_hard and hard_auditor is None:
            raise ValueError("audit_hard=true needs auditor_model and auditor_base_url")
        rules = RuleFilter(max_context_tokens=lengths[0])
        queries, candidates, pools, decisions, selected = [], [], [], [], {}
        drops = {"records": DropLog("records"), "hard_variants": DropLog("Hard variants (record x slot x length)")}
        reach = text_reach(fill.n_tokens, lengths, f"filler text {fill.name} ({fill.n_tokens} tokens; an expansion "
                           "to a longer bin repeats part of it)")
        if reach is not None:
            drops["filler_text"] = reach
        for ds in datasets:
            recs = records[ds]
            order = seeded_rng(seed, "order", ds).permutation(len(recs)) if source != "sample" else range(len(recs))
            plans = {}
            _mark_ambiguous(recs, rules)
            for r in recs:
                plans[r.id] = plan_variants(r, seed)
                if r.evidence_indices and not plans[r.id][0] and rules.check(r).kept:
                    r.problems.append("no Hard variant breaks its evidence chain (" +
                                      ", ".join(sorted(set(plans[r.id][1].values()))) + ")")
            kept, dec = filter_records([recs[i] for i in order], rules, auditor, queries_per_dataset)
            decisions += dec
            _count_records(drops["records"], dec, len(recs), kept)
            if len(kept) < candidates_per_query:
                raise ValueError(f"{ds}: only {len(kept)} queries pass the filter; need at least "
                                 f"candidates_per_query={candidates_per_query}")
            selected[ds] = [r.id for r in kept]
            q, c, p = _dataset_pools(ds, kept, lengths, fill, counter, media, candidates_per_query, seed,
                                     progress, plans, drops["hard_variants"], hard_auditor)
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
                                       "hard_auditor": hard_auditor.describe() if hard_auditor else None,
                                       "summary": decision_summary(decisions), "selected": selected,
                                       "decisions": [d.to_dict() for d in decisions]}}
        write_valid_poolset(ps, out, checks, media_from=scratch, drops=drops)
    return ps


def _flag(value: Any, name: str) -> bool:
    """A yes/no parameter: a bool, or 'true'/'false' as `--param name=true` passes it."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"{name} must be true or false, not {value!r}")


def _mark_ambiguous(recs: list[ReasoningRecord], rules: RuleFilter) -> None:
    """Records that another record would answer too get a problem, so the filter drops them: a later
    record asking an earlier one's question (normalised text), or one whose every evidence sentence
    is in another usable record's context (that context would be a second right answer in its pools).
    Records the rules drop anyway keep their own reason and are not counted as holders."""
    usable, asked = [], {}
    for r in recs:
        if not rules.check(r).kept:
            continue
        key = normalise_question(r.question)
        if key in asked:
            r.problems.append(f"asks the same question as record {asked[key]!r}")
        else:
            asked[key] = r.id
            usable.append(r)
    holders: dict[str, set[str]] = {}
    for r in usable:
        for u in r.units:
            if isinstance(u.segment, Text):
                holders.setdefault(u.segment.text.strip(), set()).add(r.id)
    for r in usable:
        texts = [r.units[i].segment.text.strip() for i in r.evidence_indices if isinstance(r.units[i].segment, Text)]
        if texts and len(texts) == len(r.evidence_indices):
            others = set.intersection(*(holders[t] for t in texts)) - {r.id}
            if others:
                r.problems.append(f"another record holds all of its evidence ({sorted(others)[0]!r})")


def _reason_key(reason: str) -> str:
    """A filter reason without what is particular to one record (quoted names, the first count), so
    records dropped for the same reason are counted together."""
    head = reason.split("; ")[0].split(": ")[0]
    return re.sub(r"\d+", "N", re.sub(r"'[^']*'", "'…'", head), count=1)


def _count_records(log: DropLog, decisions, n_read: int, kept: list[ReasoningRecord]) -> None:
    """records read -> kept as queries, with the filter's reasons (numbers folded so reasons group)."""
    final: dict[str, Any] = {}
    for d in decisions:   # the last decision about a record is its fate (rules, then the auditor)
        final[d.query_id] = d
    kept_ids = {r.id for r in kept}
    log.keep(len(kept_ids))
    for qid, d in final.items():
        if qid not in kept_ids:
            log.drop(_reason_key(d.reason) if not d.kept else "passed the filter, not selected (enough queries)", qid)
    for _ in range(n_read - len(final)):
        log.drop("not read by the filter (enough queries)")


def _load(source, datasets, counter, media, seed, n, hotpotqa, mmdocrag, mmdocrag_images, max_records):
    records: dict[str, list[ReasoningRecord]] = {}
    if source == "sample":
        from mmbench.builders.sources import sample_reasoning as sr

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
        records["hotpotqa"] = read_hotpotqa(hotpotqa, counter, max_records)
        sources["hotpotqa"] = hotpotqa_fingerprint(hotpotqa)
    if "mmdocrag" in datasets:
        if not mmdocrag or not mmdocrag_images:
            raise ValueError("source 'real' with dataset mmdocrag needs --param mmdocrag=<jsonl> "
                             "--param mmdocrag_images=<folder>")
        records["mmdocrag"] = read_mmdocrag(Path(mmdocrag), Path(mmdocrag_images), counter, media, max_records)
        sources["mmdocrag"] = source_fingerprint(mmdocrag)
    return records, sources


def _dataset_pools(ds: str, kept: list[ReasoningRecord], lengths, fill: Filler,
                   counter: UnifiedTokenCounter, media: MediaStore, C: int, seed: int, progress: bool,
                   plans: dict[str, tuple[dict, dict]], drops: DropLog, hard_auditor=None):
    queries = [Document(id=f"q-{ds}-{r.id}", segments=[Text(r.question)], tokens=counter.text(r.question),
                        meta={"dataset": ds, "record_id": r.id, "answer": r.answer}) for r in kept]
    replacements, refused, audits = {}, {}, {}
    for r in kept:
        planned, refused[r.id] = dict(plans[r.id][0]), dict(plans[r.id][1])
        replacements[r.id] = replacements_for(r, planned, kept, counter, media, seed, refused[r.id])
        if hard_auditor is not None:
            audits[r.id] = audit_hard(hard_auditor, r, replacements[r.id], refused[r.id])
    decoys = {r.id: decoy_for(r, replacements[r.id], kept, counter, media, seed) for r in kept}
    for r in kept:     # the mirrored variant first, and no more variants than a Hard pool has room for
        replacements[r.id], left_out = family_variants(replacements[r.id], decoys[r.id], C)
        refused[r.id].update(left_out)
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
            own, decoy = expanded, decoys[r.id]
            for i, unit, _ in decoy[1] if decoy is not None else ():   # no centre to its family (see decoy_for)
                own = replace_units(own, where[i], where[i] + 1, [unit])
            meta["provenance"] = {"original": f"{ds}:{r.id}", "operation": "expand", "filler": fill.name,
                                  "context_tokens": r.tokens, "evidence": evidence, "units": unit_log(own)}
            if decoy is not None:
                first, *also = [{"unit": r.units[i].source, "segment_index": where[i], "tokens": r.units[i].tokens,
                                 "content": _describe(r.units[i]), "replacement": info} for i, _, info in decoy[1]]
                meta["provenance"]["decoy"] = {**first, "mirrors": decoy[0], "also_replaced": also}
            candidates.append(candidate_doc(base, own, meta))
            relevant[r.id] = base
            hard[r.id] = []
            for which, why in refused[r.id].items():
                drops.drop(why, f"{r.id}/{which}@{label}")
            original = chain_units(expanded)
            for which, repl in replacements[r.id].items():
                broken = list(expanded)
                for i, unit, _, _ in repl:
                    k = where[i]
                    broken = replace_units(broken, k, k + 1, [unit])
                ks = [where[i] for i, _, _, _ in repl]
                leaks = chain_leaks(original, chain_units(broken), ks, r.question, r.answer)
                if leaks:   # the filler gives it away at this length
                    drops.drop("filler " + reason_kind(leaks[0].reason), f"{r.id}/{which}@{label}")
                    continue
                drops.keep()
                spans = [{"unit": expanded[where[i]].source, "segment_index": where[i],
                          "tokens": expanded[where[i]].tokens, "content": _describe(expanded[where[i]]),
                          "replacement": info, "why": why} for i, _, info, why in repl]
                m = candidate_meta(ds, length, "hard", r.id)
                first = {k: v for k, v in spans[0].items() if k not in ("replacement", "why")}
                m["provenance"] = {"original": f"{ds}:{r.id}", "operation": "replace_evidence", "which": which,
                                   "counterpart": base, "replaced": first, "replacement": spans[0]["replacement"],
                                   "also_replaced": spans[1:], "units": unit_log(broken)}
                if r.id in audits:
                    m["provenance"]["hard_audit"] = audits[r.id][which]
                cid = f"{base}-hard-{which}"
                candidates.append(candidate_doc(cid, broken, m))
                hard[r.id].append(cid)
        try:
            pools += easy_hard_pools(ds, length, [r.id for r in kept], relevant, hard, C, seed, whole_families=True)
        except ValueError as exc:
            top = ", ".join(f"{why} ×{n}" for why, n in drops.reasons.most_common(3))
            raise ValueError(f"{exc} (Hard variants dropped so far: {top or 'none'})") from None
    return queries, candidates, pools


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


