"""Invariants of the flickr_hard_negatives pool sets, checked on the built records (see mmbench.builders.parts.validity).

What the records let us check: a query is one of its image's five captions (candidate meta
``captions``), that image is the only relevant candidate, no negative carries the query's caption
among its own captions or the query image's bytes (the media file name is the SHA-256 of the bytes),
and every query has the same number of candidates (1 + ``n_negatives`` of the builder's parameters).
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from mmbench.builders.parts.validity import Violation, normalise_question, query_text
from mmbench.data.poolset import PoolSet

# metadata that records how a document was built, read by these checks: stored in provenance.parquet, apart from the
# tables an evaluator reads (image_id equals the query's for the relevant image only; captions hold the query's text)
PROVENANCE_COLUMNS = ("image_id", "caption_index", "captions")

INVARIANTS: dict[str, str] = {
    "one_relevant_image": "each query has exactly one relevant candidate, the image whose caption (at the stated "
                          "caption index) the query is",
    "negatives_not_described": "no negative candidate has the query's caption text among its five captions, nor the "
                               "same image bytes as the relevant image",
    "candidates_per_query": "every query has 1 + n_negatives candidates (constant C/Q)",
    "gt_position": "the stored gt_position is the relevant image's 1-based place in the stored candidate order",
}


def _image_ref(doc) -> str | None:
    return next((s.ref for s in doc.segments if s.kind == "image"), None)


def _expected_size(ps: PoolSet) -> int | None:
    params = (ps.builder or ps.manifest.get("builder") or {}).get("params", {})
    n = params.get("n_negatives")
    if n is not None:
        return int(n) + 1
    sizes = Counter(len(p.candidate_ids) for p in ps.pools)
    return sizes.most_common(1)[0][0] if sizes else None


def check(ps: PoolSet, checked: dict[str, int]) -> Iterable[Violation]:
    queries, cands = ps.query_by_id(), ps.candidate_by_id()
    image_of = {c.meta.get("image_id"): c.id for c in ps.candidates}
    size = _expected_size(ps)
    for name in INVARIANTS:
        checked[name] = checked.get(name, 0) + len(ps.pools)
    for item in ps.pools:
        q = queries[item.query_id]
        text = query_text(q)
        key = normalise_question(text)
        image_id = q.meta.get("image_id")
        want = image_of.get(image_id, f"the image {image_id!r}")
        if item.relevant_ids != [want]:
            yield Violation("one_relevant_image", item.id, f"relevant ids {item.relevant_ids}, expected [{want!r}] "
                                                           f"(the image of query {item.query_id})")
        elif want in cands:
            caps = list(cands[want].meta.get("captions") or [])
            k = q.meta.get("caption_index")
            if not isinstance(k, int) or not 0 <= k < len(caps) or normalise_question(caps[k]) != key:
                yield Violation("one_relevant_image", item.id, f"query text is not caption {k} of {want}")
        rel_ref = _image_ref(cands[want]) if want in cands else None
        for cid in item.candidate_ids:
            if cid in item.relevant_ids or cid not in cands:
                continue
            doc = cands[cid]
            if key and key in {normalise_question(c) for c in doc.meta.get("captions") or []}:
                yield Violation("negatives_not_described", item.id, f"negative {cid} has the query caption "
                                                                    f"{text[:60]!r} among its captions")
            if rel_ref is not None and _image_ref(doc) == rel_ref:
                yield Violation("negatives_not_described", item.id, f"negative {cid} has the same image bytes as {want}")
        if size is not None and len(item.candidate_ids) != size:
            yield Violation("candidates_per_query", item.id, f"{len(item.candidate_ids)} candidates, expected {size}")
        pos = item.meta.get("gt_position")
        if want in item.candidate_ids and pos != item.candidate_ids.index(want) + 1:
            yield Violation("gt_position", item.id, f"gt_position {pos}, but {want} is at place "
                                                    f"{item.candidate_ids.index(want) + 1}")
