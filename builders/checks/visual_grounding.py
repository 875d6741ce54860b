"""Invariants of the visual_grounding pool sets, checked on the built records (see mmbench.builders.parts.validity).

The checks read only the pool set: candidate segments and the metadata the builder writes
(`needle_id`, `family`, `entity`, `anchor_segment`, `length_tokens`, `depth`, `depth_measured`,
`anchor_token_offset`, `anchor_tokens`). A cell is the set of items ranked against one candidate list.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Iterable, Sequence

from mmbench.builders.parts.text_match import occurs
from mmbench.builders.parts.validity import Violation
from mmbench.data.documents import Document, Image, Text
from mmbench.data.poolset import PoolSet

LENGTH_TOLERANCE = 0.10   # a candidate's unified length lies within ±10 % of its bin's nominal length
DEPTH_TOLERANCE = 0.05    # measured anchor depth lies within ±0.05 of the requested depth

# metadata that records how a document was built, read by these checks: stored in provenance.parquet, apart from the
# tables an evaluator reads (several name the label, e.g. a candidate's record or needle equal to its query's)
PROVENANCE_COLUMNS = ("needle_id", "entity", "family")

INVARIANTS: dict[str, str] = {
    "one_relevant": "each item has exactly one relevant candidate; it is among the item's candidates and holds the "
                    "query's own needle",
    "candidates_per_query": "every item ranks the same number of candidates, and all items of a cell (kind, "
                            "background, length, depth) share one candidate list",
    "anchor_unique": "the query's anchor (its sentence or its picture) is in the relevant candidate and in no other "
                     "candidate the query is ranked against",
    "entity_unique": "for a text anchor, the entity the query names occurs (whole words, any case) in the query and "
                     "the relevant candidate and in no other candidate of the item",
    "shared_haystack": "candidates of one look-alike family in a cell are identical except for the anchor segment, "
                       "which sits at the same position",
    "lookalike_anchor": "a text family's anchors are one sentence in which only the entity differs",
    "length_bin": f"each candidate's unified token count lies within ±{LENGTH_TOLERANCE:.0%} of its bin's length",
    "depth": f"each anchor's measured depth (tokens before it / tokens other than it) lies within ±{DEPTH_TOLERANCE} "
             "of the requested depth and agrees with the stored offsets",
}


def tolerance_violations(candidates: Sequence[Document]) -> Iterable[Violation]:
    """The length (±10 %) and depth (±0.05) promises, from each candidate's stored counts."""
    for doc in candidates:
        m = doc.meta
        nominal, depth = m["length_tokens"], m["depth"]
        if abs(doc.tokens - nominal) > LENGTH_TOLERANCE * nominal:
            yield Violation("length_bin", doc.id, f"{doc.tokens} unified tokens is outside ±{LENGTH_TOLERANCE:.0%} of "
                                                  f"its {nominal}-token bin")
        rest = doc.tokens - m["anchor_tokens"]
        recomputed = m["anchor_token_offset"] / rest if rest else 0.0
        if abs(recomputed - m["depth_measured"]) > 1e-9:
            yield Violation("depth", doc.id, f"stored depth_measured {m['depth_measured']:.4f} disagrees with its "
                                             f"offsets ({recomputed:.4f})")
        elif abs(m["depth_measured"] - depth) > DEPTH_TOLERANCE:
            yield Violation("depth", doc.id, f"anchor at measured depth {m['depth_measured']:.3f}, outside "
                                             f"±{DEPTH_TOLERANCE} of the requested {depth}")


def check(ps: PoolSet, checked: dict[str, int]) -> Iterable[Violation]:
    queries, cands = ps.query_by_id(), ps.candidate_by_id()
    out: list[Violation] = list(tolerance_violations(ps.candidates))
    checked["length_bin"] = checked["depth"] = len(ps.candidates)
    out += _relevance(ps, queries, cands, checked)
    cells: dict[tuple[str, ...], list] = defaultdict(list)
    for item in ps.pools:
        cells[tuple(item.candidate_ids)].append(item)
    out += _cell_sizes(ps, cells, checked)
    for ids, items in cells.items():
        out += _cell(ids, items, queries, cands, checked)
    return out


def _relevance(ps, queries, cands, checked) -> list[Violation]:
    out = []
    for item in ps.pools:
        checked["one_relevant"] = checked.get("one_relevant", 0) + 1
        if len(item.relevant_ids) != 1:
            out.append(Violation("one_relevant", item.id, f"{len(item.relevant_ids)} relevant candidates"))
            continue
        (rel,) = item.relevant_ids
        if rel not in item.candidate_ids or rel not in cands:
            out.append(Violation("one_relevant", item.id, f"relevant {rel} is not among its candidates"))
        elif cands[rel].meta.get("needle_id") != queries[item.query_id].meta.get("needle_id"):
            out.append(Violation("one_relevant", item.id, f"relevant {rel} holds needle {cands[rel].meta.get('needle_id')}"
                                                          f", the query asks for {queries[item.query_id].meta.get('needle_id')}"))
    return out


def _cell_sizes(ps, cells, checked) -> list[Violation]:
    out = []
    sizes = Counter(len(ids) for ids, items in cells.items() for _ in items)
    expected = sizes.most_common(1)[0][0] if sizes else 0
    by_key: dict[tuple, set] = defaultdict(set)
    for ids, items in cells.items():
        for item in items:
            checked["candidates_per_query"] = checked.get("candidates_per_query", 0) + 1
            m = item.meta
            by_key[(m.get("anchor_kind"), m.get("background_modality"), m.get("length_bin"), m.get("depth"))].add(ids)
            if len(ids) != expected:
                out.append(Violation("candidates_per_query", item.id, f"{len(ids)} candidates, the others have {expected}"))
    for key, lists in by_key.items():
        if len(lists) > 1:
            out.append(Violation("candidates_per_query", "/".join(map(str, key)),
                                 f"the cell's items are ranked against {len(lists)} different candidate lists"))
    return out


def _anchor(doc: Document):
    i = doc.meta.get("anchor_segment")
    if not isinstance(i, int) or not 0 <= i < len(doc.segments):
        return None, None
    return i, doc.segments[i]


def _cell(ids, items, queries, cands, checked) -> list[Violation]:
    """anchor_unique, entity_unique and shared_haystack within one cell."""
    out: list[Violation] = []
    docs = [cands[c] for c in ids if c in cands]
    anchors = {d.id: _anchor(d) for d in docs}
    for d in docs:
        if anchors[d.id][0] is None:
            out.append(Violation("shared_haystack", d.id, "no valid `anchor_segment` in its meta (built before "
                                                          "visual_grounding 1.1? rebuild it)"))
    if any(a[0] is None for a in anchors.values()):
        return out
    # each candidate's text with its own anchor left out (a family's members share it)
    backgrounds: dict[str, str] = {}
    images: dict[str, set[str]] = {}
    for d in docs:
        i = anchors[d.id][0]
        backgrounds[d.id] = "\n".join(s.text for k, s in enumerate(d.segments) if isinstance(s, Text) and k != i).lower()
        images[d.id] = {s.ref for s in d.segments if isinstance(s, Image)}
    found: dict[tuple[str, str], bool] = {}

    def in_background(doc_id: str, needle: str, whole_words: bool) -> bool:
        key = (backgrounds[doc_id], needle)   # equal backgrounds share one search
        if key not in found:
            text = backgrounds[doc_id]
            found[key] = occurs(needle, text) if whole_words else needle in text
        return found[key]

    for item in items:
        rel = item.relevant_ids[0] if item.relevant_ids else None
        if rel not in anchors:
            continue
        query = queries[item.query_id]
        _, anchor = anchors[rel]
        checked["anchor_unique"] = checked.get("anchor_unique", 0) + 1
        for c in ids:
            if c == rel or c not in anchors:
                continue
            other = anchors[c][1]
            if isinstance(anchor, Text):
                a = anchor.text.lower()
                hit = a in (other.text.lower() if isinstance(other, Text) else "") or in_background(c, a, False)
            else:
                hit = isinstance(anchor, Image) and anchor.ref in images[c]
            if hit:
                out.append(Violation("anchor_unique", item.id, f"candidate {c} also holds the anchor of {rel}"))
        entity = str(query.meta.get("entity") or "")
        if not isinstance(anchor, Text):
            continue
        checked["entity_unique"] = checked.get("entity_unique", 0) + 1
        e = entity.lower()
        if not e or not occurs(e, query.text.lower()) or not occurs(e, anchor.text.lower()):
            out.append(Violation("entity_unique", item.id, f"entity {entity!r} is not named by both the query and "
                                                           "its anchor"))
            continue
        for c in ids:
            other = anchors[c][1]
            if c != rel and ((isinstance(other, Text) and occurs(e, other.text.lower())) or in_background(c, e, True)):
                out.append(Violation("entity_unique", item.id, f"candidate {c} also names {entity!r}"))
    out += _families(docs, anchors, checked)
    return out


def _frame(text: str, entity: str) -> str:
    """The sentence with its entity (and a "the" before it) blanked, case folded."""
    return re.sub(r"(?<![\w])(?:the\s+)?" + re.escape(entity.lower()) + r"(?![\w])", "<entity>", text.lower())


def _families(docs, anchors, checked) -> list[Violation]:
    out = []
    groups: dict[str, list[Document]] = defaultdict(list)
    for d in docs:
        groups[str(d.meta.get("family"))].append(d)
    for members in groups.values():
        base = members[0]
        i0 = anchors[base.id][0]
        if isinstance(anchors[base.id][1], Text) and all(isinstance(anchors[m.id][1], Text) for m in members):
            frames = {_frame(anchors[m.id][1].text, str(m.meta.get("entity") or "")) for m in members}
            checked["lookalike_anchor"] = checked.get("lookalike_anchor", 0) + 1
            if len(frames) != 1 or "<entity>" not in next(iter(frames)):
                out.append(Violation("lookalike_anchor", base.id, f"family {base.meta.get('family')}: its "
                                                                  f"{len(members)} anchors differ beyond their entities"))
        for other in members[1:]:
            checked["shared_haystack"] = checked.get("shared_haystack", 0) + 1
            i = anchors[other.id][0]
            if i != i0 or len(other.segments) != len(base.segments):
                out.append(Violation("shared_haystack", other.id, f"anchor or segment count differs from {base.id}"))
                continue
            diff = [k for k, (a, b) in enumerate(zip(base.segments, other.segments)) if a != b and k != i0]
            if diff:
                out.append(Violation("shared_haystack", other.id, f"background differs from {base.id} at segment "
                                                                  f"{diff[0]}"))
    return out
