"""The runner: encode every distinct document once, rank each query's pool, score it.

Documents are reduced to what the model sees (views), batched by a token budget after
sorting by length, and cached on disk per (model identity, role, content hash). A batch
that fails is retried item by item so one bad document fails only the items that use it.
"""
from __future__ import annotations

import json
import logging
from collections import Counter
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from mmbench.common.progress import progress_bar
from mmbench.evaluators.metrics import first_relevant_rank, item_metrics, metric_names
from mmbench.evaluators.stats.stratified import limit_estimates

from mmbench.running.batching import token_budget_batches
from mmbench.data.embedding_cache import CacheRow, EmbeddingCache, model_key
from mmbench.data.documents import Document
from mmbench.running.efficiency import EfficiencyMeter, bins_of_documents
from mmbench.running.executors import LocalExecutor
from mmbench.running.executors.local import BatchResult
from mmbench.running.executors.threads import ENCODE_THREADS
from mmbench.running.lazy_model import LazyModel, ModelChanged
from mmbench.models.base import EmbeddingModel, Role
from mmbench.models.output_check import BadModelOutput
from mmbench.data.poolset import PoolItem, PoolSet
from mmbench.data.selection import select_sample, selection_record
from mmbench.data.truncation import first_texts_to_tokenize
from mmbench.common.errors import CLIError
from mmbench.common.sparse import issparse
from mmbench.running.scoring import SCORE_DECIMALS, rank, score_items
from mmbench.running.views import SeenRecord, model_view

log = logging.getLogger(__name__)


@dataclass
class RunOptions:
    batch_tokens: int = 32768
    max_batch_size: int = 64
    cache_dir: Path | None = None
    use_cache: bool = True
    limit: int | None = None
    progress: bool = True
    seed: int = 0
    executor: Any = None  # where batches are encoded (None: this process; see mmbench.running.executors)
    price_per_token: float | None = None  # stated price (USD) per encoded token: results then hold cost per 1,000 documents
    certificate: dict[str, Any] | None = None  # a backend parity certificate (verify-backend) the run carries
    clock: Callable[[], float] = time.perf_counter  # the efficiency record's clock (tests inject a fake one)


@dataclass
class EncodeStats:
    """Counts of one run's encoding, written to results.json (`mmbench.encode`)."""

    documents: int = 0        # documents (queries and candidates) that needed a vector
    distinct_views: int = 0   # distinct model views among those not found in the cache
    cache_hits: int = 0       # documents whose vector came from the embedding cache
    encoded: int = 0          # views the model encoded in this run
    batches: int = 0
    seconds: float = 0.0
    cache_set_aside: int = 0  # damaged cache entries found, renamed and encoded again
    failures: dict[str, str] = field(default_factory=dict)
    dim: int | None = None    # the vectors' length, fixed by the first vector of the run (queries and documents)
    dim_from: str = ""        # the document that fixed it


class VectorShapeError(BadModelOutput):
    """A model gave vectors of different lengths within one run; the message names the model and documents."""


def check_dim(vec: Any, stats: EncodeStats, model: EmbeddingModel, role: Role, doc_id: str) -> None:
    """Every vector of a run has the length of the first: a model whose dimension changes between batches,
    or between queries and documents, is stopped here, naming it and a document, before anything is scored."""
    dim = int(vec.shape[-1])
    if stats.dim is None:
        stats.dim, stats.dim_from = dim, f"{role} {doc_id}"
    elif dim != stats.dim:
        raise VectorShapeError(f"model {model.card.name!r} gave a {dim}-dimensional vector for {role} {doc_id!r} "
                               f"but {stats.dim} dimensions for {stats.dim_from}; no results written")


@dataclass
class ViewSlot:
    """One distinct model view among the documents of an encode call; the call keys its slots by view hash.

    A slot to encode holds the view and its seen record; a slot whose vector is cached holds only a document
    that has it (its view is made again when it fills a batch, and its cached vector stands)."""

    view_hash: str                               # the key: the content hash of the view
    tokens: int                                  # the view's seen tokens: its length for batching
    source: Document                             # a document with this view
    view: Document | None = None                 # the view to encode (None: cached)
    record: dict[str, Any] | None = None         # its seen record (to encode only)
    doc_hashes: list[str] = field(default_factory=list)  # content hashes of the documents waiting for it
    vector: Any = None                           # the vector the model gave, once it has

    def batch_view(self, model: EmbeddingModel) -> Document:
        return self.view if self.view is not None else model_view(self.source, model)[0]


@dataclass
class _EncodeCall:
    """What the steps of one `encode_documents` call share."""

    role: Role
    model: EmbeddingModel
    stats: EncodeStats
    cache: EmbeddingCache | None
    meter: EfficiencyMeter | None
    vectors: dict[str, Any] = field(default_factory=dict)            # document id -> vector
    seen: dict[str, dict[str, Any]] = field(default_factory=dict)    # document id -> seen record


def encode_documents(docs: Sequence[Document], role: Role, model: EmbeddingModel, ps: PoolSet,
                     options: RunOptions, stats: EncodeStats, meter: EfficiencyMeter | None = None
                     ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Vectors and seen-records by document id; failures go to `stats.failures`.

    Batches are formed from every distinct view of `docs`, cached or not, in one canonical order
    (longest first, ties by view hash), so a batch always holds the same views whatever the cache
    holds. A batch none of whose views is cached is skipped; one with any view missing is encoded
    whole, so a run resumed after a kill computes each vector in the very batch an uninterrupted run
    would have, and writes byte-identical tables (padded batches change vectors in the last bits).

    The documents are grouped by content hash, the embedding cache's key, only to look them up and store
    them; everything between is keyed by view hash (`ViewSlot`).
    """
    start = time.perf_counter()
    call = _EncodeCall(role, model, stats, _cache_for(model, options), meter)
    by_hash: dict[str, list[Document]] = {}
    for d in docs:
        by_hash.setdefault(d.content_hash(), []).append(d)
    stats.documents += len(docs)
    slots = _plan_views(call, by_hash, options)
    _encode_slots(call, slots, ps, options)
    _hand_out(call, slots, by_hash)
    stats.seconds += time.perf_counter() - start
    return call.vectors, call.seen


def _plan_views(call: _EncodeCall, by_hash: dict[str, list[Document]], options: RunOptions) -> dict[str, ViewSlot]:
    """Cached documents get their vectors now; the others their view, one slot per distinct view."""
    hits = call.cache.get_many(call.role, by_hash) if call.cache else {}
    slots: dict[str, ViewSlot] = {}
    tokenizer = _primed_tokenizer(call.model, [g[0] for h, g in by_hash.items() if h not in hits])
    # preparing views tokenises every document for middle truncation: minutes on a large pool set, so shown
    prepare = progress_bar(by_hash.items(), total=len(by_hash),
                           desc=f"prepare {'queries' if call.role == 'query' else 'documents'}",
                           unit="doc", disable=not options.progress or len(hits) == len(by_hash))
    try:
        for h, group in prepare:
            hit = hits.get(h)
            if hit is None:
                _add_view_to_encode(slots, h, group[0], call.model)
                continue
            call.stats.cache_hits += len(group)
            check_dim(hit.vector, call.stats, call.model, call.role, group[0].id)
            for d in group:
                call.vectors[d.id], call.seen[d.id] = hit.vector, hit.seen
            vh = hit.meta.get("view_hash")
            if isinstance(vh, str) and vh not in slots:
                slots[vh] = ViewSlot(vh, int(hit.seen.get("seen_tokens", 0)), group[0])
    finally:  # the batch's token ids are only for this preparation
        if tokenizer is not None:
            tokenizer.forget()
    if call.cache is not None:
        call.stats.cache_set_aside += len(call.cache.set_aside)
    call.stats.distinct_views += sum(s.view is not None for s in slots.values())
    return slots


def _add_view_to_encode(slots: dict[str, ViewSlot], doc_hash: str, doc: Document, model: EmbeddingModel) -> None:
    """The document's view joins its slot, which becomes one to encode (a cached slot of the same view too)."""
    view, record = model_view(doc, model)
    vh = view.content_hash()
    slot = slots.setdefault(vh, ViewSlot(vh, 0, doc))
    if slot.view is None:
        slot.view, slot.record, slot.tokens = view, record.to_dict(), record.seen_tokens
    slot.doc_hashes.append(doc_hash)


def _encode_slots(call: _EncodeCall, slots: dict[str, ViewSlot], ps: PoolSet, options: RunOptions) -> None:
    """Batch every slot by length in one canonical order and encode the batches holding a view to encode."""
    keys = sorted(slots)
    lengths = [slots[k].tokens for k in keys]
    batches = [[keys[i] for i in b] for b in token_budget_batches(lengths, options.batch_tokens, options.max_batch_size)
               if any(slots[keys[i]].view is not None for i in b)]
    executor = options.executor if options.executor is not None and shardable(call.model) else LocalExecutor()
    media = ps.media if ps.root is not None else None
    views = [[slots[k].batch_view(call.model) for k in batch] for batch in batches]
    if call.meter is not None and batches:
        call.meter.start()
    for done in executor.encode(call.model, views, call.role, media, progress=options.progress):
        _receive_batch(call, [slots[k] for k in batches[done.index]], views[done.index], done)
    if call.cache is not None:
        call.cache.save_index(call.role)


def _receive_batch(call: _EncodeCall, batch: list[ViewSlot], views: list[Document], done: BatchResult) -> None:
    """The one place a batch's vectors come back from the model: counted, checked, kept and cached."""
    stats = call.stats
    if call.meter is not None:
        batch_lengths = [s.tokens for s in batch]
        call.meter.batch([v.id for v in views], batch_lengths, max(batch_lengths) * len(batch_lengths))
    stats.encoded += done.encoded
    stats.failures.update(done.failures)
    for slot, v in zip(batch, views):
        if slot.view is None:  # a cached document never fails: its vector is already known
            stats.failures.pop(v.id, None)
    rows: list[CacheRow] = []
    for slot, v, (vec, info) in zip(batch, views, done.rows):
        if vec is not None:
            check_dim(vec, stats, call.model, call.role, v.id)
        if vec is None or slot.record is None:
            continue  # a cached view encoded again only to keep the batch whole: its cached vector stands
        slot.vector = vec
        if info:  # the adapter's own account of what it fed the model (exact token count, drops)
            slot.record["model_info"] = info
        if call.cache is not None and not issparse(vec):
            rows.extend(CacheRow(h, vec, slot.record, {"view_hash": slot.view_hash}) for h in slot.doc_hashes)
    if rows and call.cache is not None:  # one pack per batch, so a killed run keeps every batch it finished
        call.cache.put_many(call.role, rows)
    stats.batches += 1
    if call.meter is not None:
        call.meter.start()  # cache writes are not encoding time: the next batch's clock starts here


def _hand_out(call: _EncodeCall, slots: dict[str, ViewSlot], by_hash: dict[str, list[Document]]) -> None:
    """Each encoded document gets its view's vector and seen record; one whose view failed, the failure."""
    slot_of = {h: slot for slot in slots.values() for h in slot.doc_hashes}
    for h, group in by_hash.items():
        slot = slot_of.get(h)
        if slot is None or slot.view is None or slot.record is None:
            continue  # came from the cache
        if slot.vector is None:
            failure = call.stats.failures.get(slot.view.id, "encoding failed")
            for d in group:
                call.stats.failures.setdefault(d.id, failure)
            continue
        for d in group:
            call.vectors[d.id], call.seen[d.id] = slot.vector, slot.record


def _primed_tokenizer(model: EmbeddingModel, docs: Sequence[Document]) -> Any:
    """The model's budget tokenizer with the texts middle truncation will ask for tokenised in one batch, or
    None when the model truncates nothing or its tokenizer cannot take a batch. Same token ids either way."""
    budget = model.card.max_tokens
    if budget is None or not docs:
        return None
    tokenizer = model.budget_tokenizer()
    if tokenizer is None or not hasattr(tokenizer, "prime"):
        return None
    modalities = model.card.modalities
    tokenizer.prime([t for d in docs for t in first_texts_to_tokenize([s for s in d.segments if s.kind in modalities],
                                                                      budget)])
    return tokenizer


def shardable(model: EmbeddingModel) -> bool:
    """Whether other processes' copies of the model give its vectors: not for corpus-fitted models (BM25),
    whose state comes from `fit` on this run's candidates; those always encode in this process."""
    return type(model).fit is EmbeddingModel.fit


_FIRST_ROWS_COMPARED = 16  # vector_warnings: rows compared before all of them


def vector_warnings(vectors: dict[str, Any], role: Role, similarity: str = "cosine",
                    seen: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """Warnings for degenerate vectors: all zero, or all the same (in direction, for cosine).

    Candidates like that make every score tie and the rankings chance; queries like that mean the
    model ignores the query. Either is a broken model, pooling or checkpoint, not a result -- unless
    the model sees nothing of any of them (`seen`: a text model given video-only documents), which
    is said as such instead.
    """
    if len(vectors) < 2:
        return []
    records = [seen.get(k) for k in vectors] if seen is not None else []
    present = [r for r in records if r is not None]
    if (records and len(present) == len(records)
            and all(not r.get("seen_tokens") and r.get("unseen_modalities") for r in present)):
        hidden = sorted({m for r in present for m in r["unseen_modalities"]})
        effect = "every score ties and the rankings are chance" if role == "document" else "every query looks the same"
        return [f"the model sees nothing of the {len(vectors)} {role}s (they hold only {', '.join(hidden)}, which it "
                f"does not take): {effect}"]
    rows = list(vectors.values())
    effect = ("every score ties and the rankings are chance" if role == "document"
              else "every query is ranked the same way")
    if any(issparse(v) for v in rows):
        zero = all(not np.any(v.data) for v in rows)
        return [f"all {len(rows)} {role} vectors are zero: {effect}"] if zero else []
    # two rows that differ already prove the vectors neither all zero nor all alike: a few rows settle a working
    # model; all of them are compared only when those few agree
    for some in (rows[:_FIRST_ROWS_COMPARED], rows) if len(rows) > _FIRST_ROWS_COMPARED else (rows,):
        mat = np.stack([np.asarray(v, dtype=np.float64).ravel() for v in some])
        if not np.any(mat):
            degenerate = "zero"
            continue
        if similarity == "cosine":
            mat = mat / np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-300)
        scale = max(float(np.max(np.abs(mat[0]))), 1e-300)
        if float(np.max(np.abs(mat - mat[0]))) > 1e-6 * scale:
            return []
        degenerate = "alike"
    if degenerate == "zero":
        return [f"all {len(rows)} {role} vectors are zero: {effect}"]
    how = "point the same way" if similarity == "cosine" else "are identical"
    return [f"all {len(rows)} {role} vectors {how}: {effect} (a broken model, pooling or checkpoint?)"]


def _cache_for(model: EmbeddingModel, options: RunOptions) -> EmbeddingCache | None:
    if not options.use_cache or options.cache_dir is None or not getattr(model, "cacheable", True):
        return None
    return EmbeddingCache(Path(options.cache_dir), model_key(model.card.identity()))


def score_pool(query_vec: Any, cand_vecs: Sequence[Any], similarity: str) -> np.ndarray:
    """Similarity of one query to its candidates: cosine or dot, dense or sparse."""
    if issparse(query_vec):
        import scipy.sparse as sp

        return np.asarray((sp.vstack(cand_vecs) @ query_vec.T).todense()).ravel().astype(np.float64)
    return _candidate_matrix(cand_vecs, similarity) @ _query_vector(query_vec, similarity)


def _candidate_matrix(cand_vecs: Sequence[Any], similarity: str) -> np.ndarray:
    """Dense candidate vectors as float64 rows, each scaled to unit length for cosine."""
    c = np.stack([np.asarray(v, dtype=np.float64) for v in cand_vecs])
    if similarity == "cosine":
        c = c / np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-12)
    return c


def _query_vector(query_vec: Any, similarity: str) -> np.ndarray:
    """A dense query vector as float64, scaled to unit length for cosine."""
    q = np.asarray(query_vec, dtype=np.float64)
    if similarity == "cosine":
        q = q / max(float(np.linalg.norm(q)), 1e-12)
    return q


class PoolScorer:
    """`score_pool` for many items over one set of candidate vectors: dense candidates are stacked and
    normalised once, then each item takes its rows. Both use the same helpers for the row norms and
    divisions, and the same matrix-vector product shape, so the scores are the same bits."""

    def __init__(self, cand_vecs: dict[str, Any], similarity: str):
        self.similarity = similarity
        rows = list(cand_vecs.values())
        self.dense = bool(rows) and not any(issparse(v) for v in rows)
        self.cand_vecs = cand_vecs
        self._queries: dict[int, tuple[Any, np.ndarray]] = {}  # id(query vector) -> (it, its unit-length float64)
        if self.dense:
            self.row = {k: i for i, k in enumerate(cand_vecs)}
            self.matrix = _candidate_matrix(rows, similarity)

    def __call__(self, query_vec: Any, candidate_ids: Sequence[str]) -> np.ndarray:
        if not self.dense or issparse(query_vec):
            return score_pool(query_vec, [self.cand_vecs[c] for c in candidate_ids], self.similarity)
        return self.matrix[[self.row[c] for c in candidate_ids]] @ self._query(query_vec)

    def _query(self, query_vec: Any) -> np.ndarray:
        """`_query_vector(query_vec)`, computed once per query vector (a query ranks many pools)."""
        known = self._queries.get(id(query_vec))
        if known is None or known[0] is not query_vec:
            known = self._queries[id(query_vec)] = (query_vec, _query_vector(query_vec, self.similarity))
        return known[1]


def run_poolset(ps: PoolSet, model: EmbeddingModel, options: RunOptions) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Evaluate `model` on `ps`; returns per-query rows, seen rows and run information.

    A `LazyModel` (warm runs) loads its weights only if a vector is missing from the cache; if the
    loaded model turns out to have another card than remembered, the run starts over with it."""
    try:
        return _run_poolset(ps, model, options)
    except ModelChanged:
        if not isinstance(model, LazyModel):  # only a stand-in for a remembered model changes
            raise
        log.warning("the remembered card of %s was stale; evaluating again with the loaded model", model.card.name)
        return _run_poolset(ps, model.real, options)


def _run_poolset(ps: PoolSet, model: EmbeddingModel, options: RunOptions) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    items = select_sample(ps.pools, options.limit, options.seed)
    queries = ps.query_by_id()
    candidates = ps.candidate_by_id()
    q_docs = [queries[i] for i in sorted({p.query_id for p in items})]
    c_docs = [candidates[i] for i in sorted({c for p in items for c in p.candidate_ids})]
    stats = EncodeStats()
    executor_name = getattr(options.executor, "name", "local") if options.executor is not None else "local"
    if executor_name != "local" and not shardable(model):
        raise CLIError(f"model {model.card.name!r} is fitted on this run's candidates (like BM25), so it cannot be "
                       f"encoded by --executor {executor_name} workers; run it with --executor local")
    meter = EfficiencyMeter(model, bins_of_documents(items), options.price_per_token, clock=options.clock)
    model.fit(c_docs, ps.media if ps.root is not None else None)
    c_vecs, c_seen = encode_documents(c_docs, "document", model, ps, options, stats, meter)
    document_seconds = stats.seconds
    q_vecs, q_seen = encode_documents(q_docs, "query", model, ps, options, stats, meter)
    query_seconds = stats.seconds - document_seconds

    similarity = model.card.similarity
    warnings = (vector_warnings(c_vecs, "document", similarity, c_seen)
                + vector_warnings(q_vecs, "query", similarity, q_seen))
    for w in warnings:
        log.warning("%s", w)
    start = time.perf_counter()
    scorer = PoolScorer(c_vecs, model.card.similarity)
    usable = c_vecs.keys() - stats.failures.keys()  # candidates with a vector and no failure
    ready = [p.query_id in q_vecs and p.query_id not in stats.failures and usable.issuperset(p.candidate_ids)
             for p in items]
    rows = score_items(items, ready, lambda p: scorer(q_vecs[p.query_id], p.candidate_ids),
                       lambda p: _score_item(p, q_vecs, c_vecs, scorer, options.seed, stats.failures), options.seed)
    scoring_seconds = time.perf_counter() - start
    per_query = pd.DataFrame(rows)
    seen = pd.DataFrame([{"doc_id": k, "role": role, **_flat(v)} for role, recs in (("query", q_seen), ("document", c_seen))
                         for k, v in sorted(recs.items())])
    failed = per_query[per_query["error"].notna()] if len(per_query) else per_query
    selection = selection_record(items, ps.pools, options.limit, options.seed)
    selection["estimate"] = limit_estimates(per_query, items, selection, metric_names())
    run_info = {
        "n_items": len(items),
        "n_items_total": len(ps.pools),
        "limit": selection["limit"],
        "selection": selection,
        "n_failed_items": int(len(failed)),
        "failures": {k: v for k, v in sorted(stats.failures.items())[:100]},
        "modalities_seen": sorted(model.card.modalities),
        **_seen_counts(list(c_seen.values()) + list(q_seen.values())),
        "encode": {"documents": stats.documents, "distinct_views": stats.distinct_views, "cache_hits": stats.cache_hits,
                   "encoded": stats.encoded, "batches": stats.batches,
                   "cache_set_aside": stats.cache_set_aside, "seconds": round(stats.seconds, 3),
                   "document_seconds": round(document_seconds, 3), "query_seconds": round(query_seconds, 3),
                   "batch_tokens": options.batch_tokens, "intra_op_threads": ENCODE_THREADS,
                   **_executor_info(options.executor if shardable(model) else None)},
        "scoring_seconds": round(scoring_seconds, 3),
        "efficiency": meter.record(),
        "warnings": warnings,
        "model_loaded": bool(getattr(model, "loaded", True)),
        "tie_break": f"scores rounded to {SCORE_DECIMALS} decimals; ties ordered by a permutation seeded from (seed={options.seed}, item id)",
    }
    return per_query, seen, run_info


def _seen_counts(seen: list[dict[str, Any]]) -> dict[str, Any]:
    """How many documents had content the model could not see, were truncated, or were adapted to its limits."""
    return {"documents_with_unseen_modalities": int(sum(bool(v["unseen_modalities"]) for v in seen)),
            "documents_truncated": int(sum(v["truncated"] for v in seen)), **adapted_counts(seen)}


def _executor_info(executor: Any) -> dict[str, Any]:
    """Where the batches ran (timings differ by executor; the vectors do not)."""
    if executor is None or getattr(executor, "name", "local") == "local":
        return {"executor": "local"}
    return {"executor": executor.name, "workers": executor.workers, "lost_workers": executor.lost_workers,
            "requeued_batches": executor.requeued_batches}


_SEEN_ORDER = tuple(f.name for f in fields(SeenRecord))  # _flat's column order


def adapted_counts(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """`{"documents_adapted": documents per kind}` of the adaptations the adapter reported (`model_info.adapted`:
    padded frames, upscaled images, resampled videos, a cut prompt ...), so no padding or resampling goes unstated
    in the run's summary; empty when none was reported (adapters that report none leave results.json as it was)."""
    counts: Counter[str] = Counter()
    for rec in records:
        counts.update(set((rec.get("model_info") or {}).get("adapted") or ()))
    return {"documents_adapted": dict(sorted(counts.items()))} if counts else {}


def _flat(record: dict[str, Any]) -> dict[str, Any]:
    """A seen record as table columns, in the record's field order whether it was just made or read back
    from the cache (whose JSON sorts keys), so seen.parquet does not depend on what was cached; the
    adapter's free-form info becomes a JSON string."""
    out = {k: record[k] for k in _SEEN_ORDER if k in record}
    out.update({k: record[k] for k in sorted(record) if k not in out})
    out["model_info"] = json.dumps(out["model_info"], sort_keys=True, default=str) if out.get("model_info") else None
    return out


def _score_item(p: PoolItem, q_vecs: dict[str, Any], c_vecs: dict[str, Any], scorer: PoolScorer, seed: int,
                failures: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {"item_id": p.id, "query_id": p.query_id, "subset": p.subset,
                           "relevant_ids": list(p.relevant_ids)}
    missing = [d for d in [p.query_id, *p.candidate_ids] if d in failures or (d != p.query_id and d not in c_vecs)]
    if p.query_id not in q_vecs:
        missing.insert(0, p.query_id)
    if missing:
        reasons = "; ".join(f"{d}: {failures.get(d, 'not encoded')}" for d in dict.fromkeys(missing))
        row.update({"ranked_ids": [], "scores": [], "first_relevant_rank": None,
                    **{m: float("nan") for m in metric_names()}, "error": reasons})
    else:
        scores = scorer(q_vecs[p.query_id], p.candidate_ids)
        order = rank(p.id, p.candidate_ids, scores, seed)
        ranked = [p.candidate_ids[i] for i in order]
        row.update({"ranked_ids": ranked, "scores": [float(scores[i]) for i in order],
                    "first_relevant_rank": first_relevant_rank(ranked, p.relevant_ids),
                    **item_metrics(ranked, p.relevant_ids), "error": None})
    for key, value in p.meta.items():
        row.setdefault(key, value if not isinstance(value, (dict, list)) else json.dumps(value, sort_keys=True))
    return row
