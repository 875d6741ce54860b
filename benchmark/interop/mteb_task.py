"""mmbench pool sets as mteb tasks, scored as mmbench scores them.

`export_mteb_task(poolset)` gives an mteb `AbsTaskRetrieval` with the mmbench task's name, main
score, split ("test") and subset ("default"), so `mteb.evaluate` writes the same layout as
`mmbench run` (see `mmbench.results.mteb_layout`). Each pool item is one mteb query whose `top_ranked`
list is its pool, so a query is ranked among its own candidates only.

mteb would break ties between equal scores by document id; mmbench breaks them by a permutation
seeded from the item id (`mmbench.running.runner.rank`). The exported task ranks each pool with mmbench's
function before mteb's metric code sees it, so for the same vectors both report the same numbers.
What mteb feeds a model differs from mmbench's views (truncated by mmbench to the model's window);
`MmbenchEncoder` runs an mmbench model under mteb on exactly the views mmbench encodes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mmbench.data.documents import Document, Image
from mmbench.models.base import EmbeddingModel
from mmbench.models.mteb_bridge import task_metadata, to_mteb_row


POOL_DOC_SEP = "~"   # an exported folder's corpus id: "<item no>.<tie key>~<candidate id>"


def pool_doc_id(item_no: int, tie_key: int, candidate_id: str) -> str:
    """A corpus id of an exported folder: one copy of a candidate per pool, so that ids sort (descending, as
    mteb's scoring breaks ties) in mmbench's tie-break order within the pool; the candidate id follows `~`."""
    return f"{item_no:06d}.{tie_key:06d}{POOL_DOC_SEP}{candidate_id}"


def candidate_of(doc_id: str) -> str:
    """The pool set's candidate id of a corpus id (itself, or what follows `~` in an exported folder's id)."""
    return doc_id.split(POOL_DOC_SEP, 1)[1] if POOL_DOC_SEP in doc_id else doc_id


def export_mteb_task(poolset: Any, name: str | None = None, with_images: bool | None = None,
                     limit: int | None = None, seed: int = 0):
    """An mteb retrieval task over a pool set (a `PoolSet` or its folder), ranked as mmbench ranks it.

    `limit` and `seed` mean what they mean to `mmbench run` (the same spread of items, the same
    tie-breaking), so `mteb.evaluate` on the task and `mmbench run` give the same metrics.
    """
    from datasets import Dataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData

    from mmbench.running.evaluation import task_main_metric
    from mmbench.data.poolset import PoolSet, load_poolset
    from mmbench.data.selection import select_sample  # the items `mmbench run --limit` evaluates

    ps: PoolSet = poolset if isinstance(poolset, PoolSet) else load_poolset(Path(poolset))
    items = select_sample(ps.pools, limit, seed)
    docs, queries = ps.candidate_by_id(), ps.query_by_id()
    if with_images is None:
        with_images = any(isinstance(s, Image) for d in [*docs.values(), *queries.values()] for s in d.segments)
    media = ps.media if (with_images and ps.root is not None) else None
    seen: dict[str, dict[str, int]] = {}  # per distinct document: what the one-text-one-image mapping dropped

    def row(doc: Document, row_id: str) -> dict[str, Any]:
        out, dropped = to_mteb_row(doc, media, with_images)
        seen[doc.id] = dropped
        out["id"] = row_id
        if not with_images:
            out.pop("image", None)
        return out

    cand_rows = [row(docs[c], c) for c in sorted({c for it in items for c in it.candidate_ids})]
    query_rows = [row(queries[it.query_id], it.id) for it in items]  # one query per item: pools may share a query
    table = _image_dataset if with_images else Dataset.from_list
    split = RetrievalSplitData(corpus=table(cand_rows), queries=table(query_rows),
                               relevant_docs={it.id: {c: 1 for c in it.relevant_ids} for it in items},
                               top_ranked={it.id: list(it.candidate_ids) for it in items})
    pools = {it.id: list(it.candidate_ids) for it in items}
    metadata = task_metadata(name or ps.task, with_images, ps.content_hash, task_main_metric(ps.task),
                             f"mmbench pool set {ps.task} v{ps.task_version} ({ps.content_hash[:12]}); "
                             f"each query ranked in its own pool, ties broken as mmbench breaks them")

    class MmbenchRetrieval(AbsTaskRetrieval):
        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.dataset = {"default": {"test": split}}
            self.data_loaded = True

        def _evaluate_subset(self, model, data_split, **kwargs: Any):
            return super()._evaluate_subset(PoolOrder(model, pools, seed), data_split, **kwargs)

        def task_specific_scores(self, scores, qrels, results, hf_split, hf_subset) -> dict[str, float]:
            return _unrounded_means(scores, qrels, results, self.k_values)

    MmbenchRetrieval.metadata = metadata
    task = MmbenchRetrieval()
    task._top_k = max([task._top_k, *(len(c) for c in pools.values())])  # every pool ranked in full
    task.mmbench_poolset, task.mmbench_limit, task.mmbench_seed = ps, limit, seed  # what mmbench_encoder(model, task) encodes
    task.export_report = {"documents": len(seen), "dropped_images": sum(d["images"] for d in seen.values()),
                          "dropped_videos": sum(d["videos"] for d in seen.values()),
                          "per_document": {k: v for k, v in seen.items() if v["images"] or v["videos"]}}
    return task


def _unrounded_means(scores: dict[str, dict[str, float]], qrels, results, k_values) -> dict[str, float]:
    """mteb rounds its averages to 5 decimals; these are the same averages of mteb's own per-query
    scores (pytrec_eval) unrounded, under mteb's names, plus mmbench's `mrr` (no cut-off)."""
    out: dict[str, float] = {}
    for k in k_values:
        for key, name in ((f"P_{k}", f"precision_at_{k}"), (f"recall_{k}", f"recall_at_{k}"),
                          (f"ndcg_cut_{k}", f"ndcg_at_{k}")):
            values = [s[key] for s in scores.values() if key in s]
            if values:
                out[name] = float(np.mean(values))
    ranks = [_first_relevant(results.get(q, {}), rel) for q, rel in qrels.items()]
    if ranks:
        out["mrr"] = float(np.mean([1.0 / r if r else 0.0 for r in ranks]))
    return out


def _first_relevant(scores: dict[str, float], relevant: dict[str, int]) -> int | None:
    ranked = sorted(scores, key=lambda d: -scores[d])
    return next((i for i, d in enumerate(ranked, 1) if relevant.get(d, 0) > 0), None)


class PoolOrder:
    """An mteb search model that ranks each pool with mmbench's order (scores rounded to the runner's
    decimals, ties by the seeded permutation) and hands mteb strictly decreasing scores in that order."""

    def __init__(self, model: Any, pools: dict[str, list[str]], seed: int) -> None:
        from mteb.models.models_protocols import CrossEncoderProtocol, EncoderProtocol, SearchProtocol
        from mteb.models.search_wrappers import SearchCrossEncoderWrapper, SearchEncoderWrapper

        if isinstance(model, EncoderProtocol) and not isinstance(model, SearchProtocol):
            model = SearchEncoderWrapper(model)
        elif isinstance(model, CrossEncoderProtocol):
            model = SearchCrossEncoderWrapper(model)
        self.inner, self.pools, self.seed = model, pools, seed
        self.mteb_model_meta = model.mteb_model_meta

    def index(self, corpus, **kwargs: Any) -> None:
        return self.inner.index(corpus, **kwargs)

    def search(self, queries, **kwargs: Any) -> dict[str, dict[str, float]]:
        from mmbench.running.runner import rank

        found = self.inner.search(queries, **kwargs)
        out = {}
        for qid, scores in found.items():
            cands = self.pools[qid]
            values = np.array([scores.get(c, -np.inf) for c in cands], dtype=np.float64)
            order = rank(qid, cands, values, self.seed)
            out[qid] = {cands[i]: float(len(cands) - pos) for pos, i in enumerate(order)}
        return out


def _image_dataset(rows: list[dict[str, Any]]):
    """A datasets.Dataset with an Image feature column (None where a document has no image)."""
    from datasets import Dataset, Features, Value
    from datasets import Image as HFImage

    feats = Features({"id": Value("string"), "text": Value("string"), "image": HFImage()})
    return Dataset.from_list([{"id": r["id"], "text": r["text"], "image": r.get("image")} for r in rows],
                             features=feats)


def mmbench_encoder(model: EmbeddingModel, poolset: Any, limit: int | None = None, batch_tokens: int = 32768,
                    seed: int = 0):
    """An mmbench model as an mteb encoder for `export_mteb_task(poolset, limit=limit)` (`poolset` may be
    that exported task itself): each input row is
    looked up by its id and encoded as mmbench encodes it (the model's view: visible modalities,
    middle-truncated). A corpus-dependent model (BM25) is fitted on the same candidates as in `mmbench run`."""
    import scipy.sparse as sp

    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta
    from mteb.types import PromptType

    from mmbench.results.mteb_layout import mteb_model_name
    from mmbench.data.poolset import PoolSet, load_poolset
    from mmbench.running.runner import SCORE_DECIMALS, EncodeStats, RunOptions, encode_documents
    from mmbench.running.views import model_view
    from mmbench.data.selection import select_sample

    if hasattr(poolset, "mmbench_poolset"):  # a task from export_mteb_task: its pool set, limit and seed
        seed = getattr(poolset, "mmbench_seed", seed)
        poolset, limit = poolset.mmbench_poolset, poolset.mmbench_limit if limit is None else limit
    ps: PoolSet = poolset if isinstance(poolset, PoolSet) else load_poolset(Path(poolset))
    by_item = {p.id: p.query_id for p in ps.pools}
    queries, docs = ps.query_by_id(), ps.candidate_by_id()
    media = ps.media if ps.root is not None else None
    model.fit([docs[c] for c in sorted({c for p in select_sample(ps.pools, limit, seed) for c in p.candidate_ids})], media)
    card = model.card

    seen: dict[tuple[str, str], Any] = {}   # (role, what the model sees) -> its vector

    def _view_key(doc: Document) -> str:
        view, _ = model_view(doc, model)
        return repr([(s.kind, getattr(s, "text", None), getattr(s, "ref", None), getattr(s, "frames", None))
                     for s in view.segments])

    class MmbenchEncoder(AbsEncoder):
        def __init__(self) -> None:
            self.mteb_model_meta = ModelMeta(
                loader=None, name=mteb_model_name(card.name), revision=card.revision, release_date=None,
                languages=None, n_parameters=None, memory_usage_mb=None, max_tokens=card.max_tokens,
                embed_dim=card.dim, license=None, open_weights=None, public_training_code=None,
                public_training_data=None, framework=[], similarity_fn_name=card.similarity,
                use_instructions=False, training_datasets=None,
                modalities=sorted(set(card.modalities) & {"text", "image", "video", "audio"}) or ["text"])

        def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs: Any):
            role = "query" if prompt_type == PromptType.query else "document"
            ids = [i for batch in inputs for i in batch["id"]]
            chosen: Sequence[Document] = [queries[by_item[i]] for i in ids] if role == "query" else \
                [docs[candidate_of(i)] for i in ids]
            # documents the model sees alike (a candidate copied into several pools, Easy/Hard twins the
            # middle-truncation makes identical) get one vector, bit for bit: mmbench's rounding makes them a tie
            # broken by its permutation, and mteb must see the same tie to break it by the ids that encode it
            keys = [(role, _view_key(d)) for d in chosen]
            todo = list({k: d for k, d in zip(keys, chosen) if k not in seen}.items())
            if todo:
                stats = EncodeStats()
                vectors, _ = encode_documents([d for _, d in todo], role, model, ps,
                                              RunOptions(batch_tokens=batch_tokens, use_cache=False, progress=False),
                                              stats)
                if stats.failures:
                    first = next(iter(stats.failures.items()))
                    raise RuntimeError(f"{card.name}: {len(stats.failures)} documents failed to encode "
                                       f"({first[0]}: {first[1]})")
                seen.update({k: vectors[d.id] for k, d in todo})
            rows = [seen[k] for k in keys]
            if rows and sp.issparse(rows[0]):  # sparse lexical vectors: mteb scores dense arrays
                return sp.vstack(rows).toarray().astype(np.float64)
            return np.stack([np.asarray(v, dtype=np.float64) for v in rows])

        def similarity(self, embeddings1, embeddings2):
            """Scores as `mmbench run` computes them (float64, cosine or dot) and rounds them (SCORE_DECIMALS), so
            the scores mmbench calls a tie are equal here too: a BLAS product of equal vectors can differ in the
            last bit with the row it sits in, and mteb would order such near-ties by noise, not by the ids."""
            import torch

            a = np.atleast_2d(np.asarray(embeddings1, dtype=np.float64))
            b = np.atleast_2d(np.asarray(embeddings2, dtype=np.float64))
            if card.similarity == "cosine":
                a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
                b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
            return torch.from_numpy(np.round(a @ b.T, SCORE_DECIMALS))

    return MmbenchEncoder()


def mteb_benchmark(poolsets: dict[str, Any] | None = None, tasks: Any = None, name: str = "mmbench", seed: int = 0):
    """The mmbench suite as one mteb `Benchmark`: `tasks` (names, a benchmark name such as "mmlongembed",
    or None for every registered task), each over `poolsets[task]` (a folder or `PoolSet`) or, when not
    given, over the task's offline sample (built under MMBENCH_HOME on first use)."""
    import mteb

    from mmbench.running.poolsets import resolve_poolset
    from mmbench.tasks import resolve_tasks, task_specs

    poolsets = dict(poolsets or {})
    specs = resolve_tasks(tasks) if tasks is not None else (
        resolve_tasks(list(poolsets)) if poolsets else task_specs())
    exported = [export_mteb_task(resolve_poolset(spec, poolsets.get(spec.name), seed, progress=False), seed=seed)
                for spec in specs]
    return mteb.Benchmark(name=name, tasks=exported,
                          description="mmbench tasks exported from their pool sets (mmbench.interop.mteb_task)")
