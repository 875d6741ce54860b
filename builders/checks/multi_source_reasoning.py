"""Invariants of the multi_source_reasoning pool sets, checked on the built records (see mmbench.builders.parts.validity).

Everything is read back from the pool set itself: the Easy candidate's segments and its
provenance (the role and source of every segment, the evidence positions), each Hard variant's
provenance (which segments were replaced, by what) and the query's answer. The chain test is
`mmbench.builders.parts.evidence_chain.chain_survives`, the same function the builder uses to rebuild
or drop a failing variant.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from typing import Any, Iterable

from mmbench.builders.parts.evidence_chain import ChainUnit, chain_survives, is_comparison, norm
from mmbench.builders.parts.validity import Violation, normalise_question, query_text
from mmbench.data.documents import Document, Image, Text
from mmbench.data.poolset import PoolSet

INVARIANTS: dict[str, str] = {
    "hard_chain_broken": "no Hard variant still answers its query: the answer, the replaced fact (restated "
                         "elsewhere) and a replaced gold image are gone, and the replaced span was needed",
    "only_labelled_answers": "no unlabelled candidate of a pool comes from a record asking the same question or "
                             "holds all of the query's evidence",
    "length_promises": "every candidate is within the stated tolerance of its pool length, a Hard variant has "
                       "exactly its Easy counterpart's length, and evidence keeps its relative position",
    "candidates_per_query": "every pool has the stated number of distinct candidates and exactly one relevant",
    "label_is_own_record": "every pool's relevant candidate is the undamaged context of the query's own record, "
                           "at the pool's length",
    "replacement_boundary": "every replacement text ends at a sentence end or a word boundary of its donor text",
    "distinct_content": "no two candidates of a pool hold the same content (segments in order, whitespace "
                        "normalised) under different ids, so no copy of the relevant context is a second answer",
}

# metadata that records how a document was built, read by these checks: stored in provenance.parquet, apart from the
# tables an evaluator reads (several name the label, e.g. a candidate's record or needle equal to its query's)
PROVENANCE_COLUMNS = ("record_id", "difficulty")

SENTENCE_END = re.compile(r"""[.!?…]["')\]]*$""")


def _subject(source: str) -> str:
    """The HotpotQA paragraph title in a unit source 'hotpotqa:ID#Title/k' (or '…#Title'); '' otherwise."""
    if not source.startswith("hotpotqa:") or "#" not in source:
        return ""
    tail = source.split("#", 1)[1]
    head, _, k = tail.rpartition("/")
    return head if head and k.isdigit() else tail


def _chain_units(doc: Document) -> list[ChainUnit]:
    log = doc.meta.get("provenance", {}).get("units") or [["", "", 0]] * len(doc.segments)
    out = []
    for seg, (role, source, _) in zip(doc.segments, log):
        text = seg.text if isinstance(seg, Text) else None
        ref = seg.ref if isinstance(seg, Image) else None
        subject = _subject(source) if role in ("context", "evidence") else ""
        out.append(ChainUnit(text, ref, subject, role == "evidence"))
    return out


def replaced_indices(prov: dict) -> list[int]:
    return sorted({prov["replaced"]["segment_index"], *(r["segment_index"] for r in prov.get("also_replaced", []))})


def hard_violations(ps: PoolSet) -> Iterable[tuple[Document, list[str]]]:
    """(Hard variant, reasons it still answers) for every Hard variant that is not broken."""
    cands = ps.candidate_by_id()
    queries = {(q.meta.get("dataset"), q.meta.get("record_id")): q for q in ps.queries}
    for c in ps.candidates:
        if c.meta.get("difficulty") != "hard":
            continue
        prov = c.meta["provenance"]
        easy = cands[prov["counterpart"]]
        q = queries[(c.meta["dataset"], c.meta["record_id"])]
        original = _chain_units(easy)
        variant = [o if k not in replaced_indices(prov) else n
                   for k, (o, n) in enumerate(zip(original, _chain_units(c)))]
        reasons = chain_survives(original, variant, replaced_indices(prov), query_text(q), q.meta.get("answer", ""))
        if reasons:
            yield c, reasons


def check(ps: PoolSet, checked: dict[str, int]) -> Iterable[Violation]:
    cands = ps.candidate_by_id()
    b = ps.builder or {}
    hard = [c for c in ps.candidates if c.meta.get("difficulty") == "hard"]
    checked["hard_chain_broken"] = len(hard)
    for c, reasons in hard_violations(ps):
        yield Violation("hard_chain_broken", c.id, "; ".join(reasons))
    yield from _only_labelled(ps, cands, checked)
    yield from _lengths(ps, cands, b, checked)
    yield from _cpq(ps, b, checked)
    yield from _own_label(ps, cands, checked)
    yield from _boundaries(ps, checked)
    yield from _distinct_content(ps, cands, checked)


def question_type(question: str, answer: str) -> str:
    """'yes/no', 'comparison' (the answer is one of the names the question writes) or 'other' (bridge and the rest)."""
    if norm(str(answer)) in ("yes", "no"):
        return "yes/no"
    return "comparison" if is_comparison(question, answer) else "other"


def breakdown(ps: PoolSet) -> dict[str, Any]:
    """What the validity report adds: Hard variants and queries per dataset and question type."""
    qtype = {(q.meta.get("dataset"), q.meta.get("record_id")): question_type(query_text(q), q.meta.get("answer", ""))
             for q in ps.queries}
    hard: Counter = Counter()
    for c in ps.candidates:
        if c.meta.get("difficulty") == "hard":
            hard[f"{c.meta.get('dataset')}/{qtype.get((c.meta.get('dataset'), c.meta.get('record_id')), 'other')}"] += 1
    queries = Counter(f"{ds}/{t}" for (ds, _), t in qtype.items())
    return {"hard_variants_by_question_type": dict(sorted(hard.items())),
            "queries_by_question_type": dict(sorted(queries.items()))}


def _evidence_texts(doc: Document) -> list[str]:
    ev = doc.meta.get("provenance", {}).get("evidence", [])
    return [doc.segments[e["segment_index"]].text for e in ev if isinstance(doc.segments[e["segment_index"]], Text)]


def _only_labelled(ps: PoolSet, cands: dict[str, Document], checked: dict[str, int]) -> Iterable[Violation]:
    queries = ps.query_by_id()
    question_of = {(q.meta.get("dataset"), q.meta.get("record_id")): normalise_question(query_text(q))
                   for q in ps.queries}
    easy_of = {(c.meta["dataset"], c.meta["record_id"]): c for c in ps.candidates
               if c.meta.get("difficulty") == "easy"}
    n = 0
    for item in ps.pools:
        q = queries[item.query_id]
        key = (q.meta.get("dataset"), q.meta.get("record_id"))
        own = normalise_question(query_text(q))
        evidence = _evidence_texts(easy_of[key]) if key in easy_of else []
        for cid in item.candidate_ids:
            if cid in item.relevant_ids:
                continue
            c = cands[cid]
            other = (c.meta.get("dataset"), c.meta.get("record_id"))
            if other == key:
                continue   # the query's own Hard variants: hard_chain_broken
            n += 1
            if question_of.get(other) == own:
                yield Violation("only_labelled_answers", item.id,
                                f"unlabelled {cid} comes from record {other[1]}, which asks the same question")
            elif evidence and set(evidence) <= {s.text for s in c.segments if isinstance(s, Text)}:
                yield Violation("only_labelled_answers", item.id, f"unlabelled {cid} holds all of the query's evidence")
    checked["only_labelled_answers"] = n


def _lengths(ps: PoolSet, cands: dict[str, Document], b: dict, checked: dict[str, int]) -> Iterable[Violation]:
    tol = float(b.get("length_tolerance", 0.01))
    hard_tol = int(b.get("hard_easy_tolerance_tokens", 0))
    pos_tol = int(b.get("position_tolerance_tokens", 32))
    for c in ps.candidates:
        nominal = int(c.meta.get("length_tokens", 0))
        if abs(c.tokens - nominal) > tol * nominal:
            yield Violation("length_promises", c.id, f"{c.tokens} tokens, pool length {nominal} ±{tol:.0%}")
        prov = c.meta.get("provenance", {})
        log = prov.get("units") or []
        if log and sum(t for _, _, t in log) != c.tokens:
            yield Violation("length_promises", c.id, f"segment tokens sum to {sum(t for _, _, t in log)}, "
                                                     f"not the candidate's {c.tokens}")
        if c.meta.get("difficulty") == "hard":
            easy = cands[prov["counterpart"]]
            if abs(c.tokens - easy.tokens) > hard_tol:
                yield Violation("length_promises", c.id, f"{c.tokens} tokens against its Easy counterpart's "
                                                         f"{easy.tokens}")
        elif log:
            starts, pos = [], 0
            for _, _, t in log:
                starts.append(pos)
                pos += t
            for e in prov.get("evidence", []):
                drift = abs(starts[e["segment_index"]] - e["original_start"] * c.tokens)
                if drift > pos_tol:
                    yield Violation("length_promises", c.id, f"evidence {e['source']} starts {drift:.0f} tokens from "
                                                             f"its proportional position (tolerance {pos_tol})")
    checked["length_promises"] = len(ps.candidates)


def _cpq(ps: PoolSet, b: dict, checked: dict[str, int]) -> Iterable[Violation]:
    want = b.get("candidates_per_query")
    sizes = {len(p.candidate_ids) for p in ps.pools}
    want = int(want) if want is not None else (min(sizes) if sizes else 0)
    for p in ps.pools:
        if len(p.candidate_ids) != want or len(set(p.candidate_ids)) != len(p.candidate_ids):
            yield Violation("candidates_per_query", p.id, f"{len(set(p.candidate_ids))} distinct of "
                                                          f"{len(p.candidate_ids)} candidates, promised {want}")
        if len(p.relevant_ids) != 1 or p.relevant_ids[0] not in p.candidate_ids:
            yield Violation("candidates_per_query", p.id, f"relevant {p.relevant_ids} is not one of its candidates")
    checked["candidates_per_query"] = len(ps.pools)


def _own_label(ps: PoolSet, cands: dict[str, Document], checked: dict[str, int]) -> Iterable[Violation]:
    """The labelled candidate is the query's own record, undamaged, at the pool's length (a label moved to
    another record's candidate would score a model for finding the wrong document)."""
    queries = ps.query_by_id()
    for p in ps.pools:
        q = queries[p.query_id]
        for rid in p.relevant_ids:
            m = cands[rid].meta if rid in cands else {}
            own = (q.meta.get("dataset"), q.meta.get("record_id"))
            if (m.get("dataset"), m.get("record_id")) != own:
                yield Violation("label_is_own_record", p.id, f"labelled {rid} comes from record "
                                                             f"{m.get('record_id')!r}, not the query's {own[1]!r}")
            elif m.get("difficulty") != "easy" or m.get("length_bin") != p.meta.get("length_bin"):
                yield Violation("label_is_own_record", p.id, f"labelled {rid} is not the query's undamaged context "
                                                             f"at {p.meta.get('length_bin')}")
    checked["label_is_own_record"] = len(ps.pools)


def _boundaries(ps: PoolSet, checked: dict[str, int]) -> Iterable[Violation]:
    """A replacement text must end a sentence, or be a whole-word prefix of its donor's text."""
    donor_text: dict[str, str] = {}
    for c in ps.candidates:      # a unit replaced by its record's decoy is still in that record's Hard variants
        for seg, (role, source, _) in zip(c.segments, c.meta["provenance"]["units"]):
            if isinstance(seg, Text) and role in ("context", "evidence"):
                donor_text.setdefault(source, " ".join(seg.text.split()))
    n = 0
    for c in ps.candidates:
        prov = c.meta["provenance"]
        if c.meta.get("difficulty") != "hard":
            decoy = prov.get("decoy")
            replaced = [decoy["replacement"], *(a["replacement"] for a in decoy.get("also_replaced", []))] \
                if decoy else []
        else:
            replaced = [prov["replacement"], *(a["replacement"] for a in prov.get("also_replaced", []))]
        for r in replaced:
            if r.get("kind") != "text":
                continue
            n += 1
            text = " ".join(r["text"].split())
            if SENTENCE_END.search(text):
                continue
            units = r.get("from_units", [])
            if units and all(u in donor_text for u in units):
                full = " ".join(donor_text[u] for u in units)
                if full.startswith(text) and (len(full) == len(text) or full[len(text)].isspace()):
                    continue
                yield Violation("replacement_boundary", c.id, f"replacement ends mid-word: …{text[-30:]!r}")
            else:   # a donor outside the pool set: only what the text itself shows can be checked
                if not text or not (text[-1].isalnum() or text[-1] in ",;:)") or r.get("boundary") != "word":
                    yield Violation("replacement_boundary", c.id, f"replacement ends mid-sentence and its donor "
                                                                  f"text is not in the pool set: …{text[-30:]!r}")
    checked["replacement_boundary"] = n


def content_key(doc: Document) -> str:
    """SHA-256 of a document's segments in order, text with its whitespace collapsed (media refs name their bytes:
    the media store is content-addressed), never its id or metadata."""
    parts = [["text", " ".join(s.text.split())] if isinstance(s, Text) else
             ["image", s.ref] if isinstance(s, Image) else ["video", list(s.frames), s.fps] for s in doc.segments]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


def _distinct_content(ps: PoolSet, cands: dict[str, Document], checked: dict[str, int]) -> Iterable[Violation]:
    """Two ids with one content in a pool: a copy of the relevant context re-hashed under a new id would be an
    unlabelled right answer (the record checks above trust the metadata, which a copy carries along)."""
    keys = {cid: content_key(c) for cid, c in cands.items()}
    for p in ps.pools:
        seen: dict[str, str] = {}
        for cid in p.candidate_ids:
            key = keys.get(cid)
            if key is None:
                continue
            first = seen.setdefault(key, cid)
            if first != cid:
                role = "the relevant context" if first in p.relevant_ids or cid in p.relevant_ids else "one content"
                yield Violation("distinct_content", p.id, f"{cid} and {first} hold {role} under two ids")
    checked["distinct_content"] = len(ps.pools)
