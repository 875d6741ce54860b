"""Flickr30k caption-space hard negatives (seed 003): 25 confusable candidates per query caption.

1. Pool: `pool_size` images sampled (seeded) from the source, each with five captions. Images the
   source lists but cannot give (file missing, fewer than five captions) are dropped and counted; a
   build that loses more than MAX_DROP_SHARE of them fails unless `allow_missing=True`.
2. Stratified caption sampling: the pool is shuffled and split into five groups of pool/5
   images; group g takes caption index g, giving one representative caption per image.
3. The representative captions are embedded by a sentence-transformers model chosen
   independently of the evaluated systems; the pool×pool cosine matrix, rounded to SIM_DECIMALS,
   gives for each image the `n_negatives` images whose captions are most similar (ties to the
   smaller image id). An image is never a negative of a query whose caption is one of its own
   five captions, nor of a query whose image has the same bytes; such skips are counted.
4. Queries: `n_queries` pool images drawn at random (seeded); a query is the image's
   representative caption, its candidates are the image and its hard negatives, stored in a
   seeded random order per query (a permutation of the candidates listed by image id), so every
   system (and every LLM prompt) sees the same order.

Same data, same content hash on any machine: the hashed records hold no model floats (the
similarity statistics go to the unhashed manifest), choices use similarities quantised well above
the last-bit noise of BLAS and CPU kernels, identical captions are embedded once, and the candidate
order does not depend on the similarity order.
"""
from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from tqdm.auto import tqdm

from mmbench.builders.checks import flickr_hard_negatives as checks
from mmbench.data.documents import Document, Text
from mmbench.data.documents import Image as ImageSegment
from mmbench.data.media import MediaStore
from mmbench.data.drops import DropLog
from mmbench.builders.parts.validity import normalise_question, write_valid_poolset
from mmbench.data.poolset import build_scratch, PoolItem, PoolSet, source_fingerprint
from mmbench.data.tokens import UnifiedTokenCounter, image_tokens

from mmbench.builders.sources import hub
from mmbench.builders.sources.flickr30k import (N_CAPTIONS, CaptionedImage, FlickrSourceError, read_annotations_csv, read_hf,
                                read_karpathy, read_token)
from mmbench.builders.sources.sample_flickr import sample_flickr
from mmbench.builders.designs.flickr_hard_negatives import SOURCES, TASK_NAME, TASK_VERSION

REAL_CAPTION_MODEL = "sentence-transformers/all-mpnet-base-v2"
SIM_DECIMALS = 6          # similarities equal to this many decimals are ties, broken by image id
MAX_DROP_SHARE = 0.01     # more unusable source images than this fails the build (allow_missing=True to accept)
SAME_CAPTION = "shares the query's caption text"
SAME_BYTES = "same image bytes as the query's image"
FEW_CAPTIONS = f"fewer than {N_CAPTIONS} non-empty captions"
DEFAULTS = {"real": {"pool_size": 5000, "n_queries": 1000}, "sample": {"pool_size": 100, "n_queries": 40}}


def _rng(seed: int, *parts: Any) -> np.random.Generator:
    digest = hashlib.sha256(":".join(map(str, (seed, *parts))).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def sample_pool(images: Sequence[CaptionedImage], pool_size: int, seed: int) -> list[CaptionedImage]:
    """`pool_size` images drawn without replacement, returned in id order (independent of input order)."""
    ordered = sorted(images, key=lambda r: r.image_id)
    if pool_size > len(ordered):
        raise ValueError(f"pool_size {pool_size} exceeds the {len(ordered)} usable images of the source")
    picks = _rng(seed, "pool").choice(len(ordered), size=pool_size, replace=False)
    return sorted((ordered[i] for i in picks), key=lambda r: r.image_id)


def stratify(image_ids: Sequence[str], seed: int, n_groups: int = N_CAPTIONS) -> dict[str, int]:
    """Caption index per image: shuffle, split into `n_groups` near-equal groups, group g -> index g."""
    perm = _rng(seed, "strata").permutation(len(image_ids))
    out: dict[str, int] = {}
    for g, part in enumerate(np.array_split(perm, n_groups)):
        for i in part:
            out[image_ids[int(i)]] = g
    return out


def quantised_cosine(embeddings: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Cosine similarities of `rows` (default all) to every row, rounded to SIM_DECIMALS.

    Float32 model vectors differ in their last bits between CPUs, kernels, thread counts and batch
    shapes (~1e-7); rounding to 1e-6 makes the ranking see the same numbers except where a value
    sits within that noise of a rounding boundary.
    """
    x = np.asarray(embeddings, dtype=np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    part = x if rows is None else x[rows]
    return np.round(part @ x.T, SIM_DECIMALS)


def hard_negatives(embeddings: np.ndarray, image_ids: Sequence[str], k: int, block: int = 512,
                   exclude: dict[int, set[int]] | None = None) -> tuple[np.ndarray, np.ndarray, dict[int, list[int]]]:
    """For each row, the `k` most cosine-similar other rows, never one listed in `exclude[row]`.

    Returns (indices (n, k), similarities (n, k), skipped) where skipped[row] lists the excluded rows
    that would otherwise have been chosen. Similarities are rounded to SIM_DECIMALS; ties go to the
    smaller image id, so the choice does not depend on input order or float noise below the rounding.
    """
    n = len(image_ids)
    exclude = exclude or {}
    if k >= n:
        raise ValueError(f"{k} hard negatives need a pool of more than {k} images (got {n})")
    id_rank = np.empty(n, dtype=np.int64)
    id_rank[np.argsort(np.asarray(image_ids, dtype=object), kind="stable")] = np.arange(n)
    idx = np.empty((n, k), dtype=np.int64)
    sims = np.empty((n, k), dtype=np.float64)
    skipped: dict[int, list[int]] = {}
    for start in range(0, n, block):
        rows = np.arange(start, min(n, start + block))
        s = quantised_cosine(embeddings, rows)
        s[np.arange(len(rows)), rows] = -np.inf          # never a negative of itself
        keys = np.broadcast_to(id_rank, s.shape)
        before = {int(r): s[i].copy() for i, r in enumerate(rows) if exclude.get(int(r))}
        for i, r in enumerate(rows):
            banned = sorted(exclude.get(int(r), ()))
            if banned:
                s[i, banned] = -np.inf
        order = np.lexsort((keys, -s), axis=-1)[:, :k]
        if np.isneginf(np.take_along_axis(s, order, axis=1)).any():
            bad = int(rows[np.isneginf(np.take_along_axis(s, order, axis=1)).any(axis=1)][0])
            raise ValueError(f"image {image_ids[bad]!r}: fewer than {k} images are left as hard negatives "
                             "once those sharing its caption or bytes are excluded; use a larger pool")
        idx[rows] = order
        sims[rows] = np.take_along_axis(s, order, axis=1)
        for r, s0 in before.items():
            last = order[r - start, -1]
            bound = (-s0[last], id_rank[last])
            skipped[r] = sorted(j for j in exclude[r] if (-s0[j], id_rank[j]) < bound)
    return idx, sims, skipped


def embed_captions(texts: Sequence[str], model: Any, batch_size: int = 256,
                   progress: bool = False) -> tuple[np.ndarray, dict[str, Any]]:
    """Caption vectors from a loaded text model (the task passes
    `mmbench.models.sentence_transformer.load_caption_model`; `None`/"minilm" there is the packaged MiniLM).

    Each distinct text is embedded once, in sorted order, so equal captions get equal vectors and a
    vector does not depend on which other captions shared its batch.
    """
    unique = sorted(set(texts))
    chunks = []
    for start in tqdm(range(0, len(unique), batch_size), desc="embed captions", disable=not progress):
        docs = [Document(f"c{i}", [Text(t)]) for i, t in enumerate(unique[start:start + batch_size], start)]
        chunks.append(model.encode(docs, "document", None))
    info = {"name": model.card.name, "revision": model.card.revision, "dim": model.card.dim, "similarity": "cosine"}
    if not chunks:
        return np.zeros((0, model.card.dim or 0)), info
    vectors = np.concatenate(chunks)
    where = {t: i for i, t in enumerate(unique)}
    return vectors[[where[t] for t in texts]], info


def load_source(source: str, seed: int, dataset: str | None, annotations: str | None, image_root: str | None,
                split: str | None, hf_split: str, sample_images: int,
                drops: DropLog | None = None) -> tuple[list[CaptionedImage], dict[str, str]]:
    if source == "sample":
        return sample_flickr(sample_images, seed), {"images": f"mmbench procedural sample ({sample_images} scenes, "
                                                              f"seed {seed})"}
    if source == "hf":
        # rows carry their image bytes; one without them is an error when the pool reads it
        named = hub.fingerprint(dataset, "dataset", split=hf_split) if hub.is_hub(dataset) else f"{dataset} [{hf_split}]"
        return read_hf(dataset, hf_split=hf_split, split=split), {"dataset": named}
    readers = {"karpathy": read_karpathy, "token": read_token, "csv": read_annotations_csv}
    if source in readers:
        images = readers[source](annotations, image_root, split, drops=drops)
        return images, {"annotations": source_fingerprint(annotations), "image_root": str(image_root)}
    raise ValueError(f"unknown source {source!r} for {TASK_NAME}; use one of {', '.join(SOURCES)}")


def usable_images(images: Sequence[CaptionedImage], drops: DropLog) -> list[CaptionedImage]:
    """Images with five non-empty captions (the first five are used); the others are dropped and counted."""
    out = []
    for r in images:
        if len(r.captions) >= N_CAPTIONS and all(c.strip() for c in r.captions[:N_CAPTIONS]):
            drops.keep()
            out.append(r)
        else:
            drops.drop(FEW_CAPTIONS, f"{r.origin or r.image_id} ({len(r.captions)} captions)")
    return out


def check_drops(drops: DropLog, allow_missing: bool, source: str) -> None:
    """Fail with one line, naming the first dropped image, when more than MAX_DROP_SHARE are unusable."""
    commonest = drops.reasons.most_common(1)[0][0] if drops.reasons else None
    examples = drops.examples.get(commonest) if commonest else None
    where = f"source {source}" + (f" (first dropped: {examples[0]})" if examples else "")
    drops.check_share(MAX_DROP_SHARE, allow_missing, where)


def _exclusions(pool: Sequence[CaptionedImage], texts: Sequence[str], refs: Sequence[str],
                rows: Sequence[int]) -> tuple[dict[int, set[int]], dict[tuple[int, int], str]]:
    """For each query row, the pool rows that may not be its negatives, and why."""
    by_caption: dict[str, set[int]] = defaultdict(set)
    by_ref: dict[str, set[int]] = defaultdict(set)
    for j, rec in enumerate(pool):
        for c in rec.captions[:N_CAPTIONS]:
            by_caption[normalise_question(c)].add(j)
        by_ref[refs[j]].add(j)
    exclude, why = {}, {}
    for i in rows:
        same_text = by_caption[normalise_question(texts[i])] - {i}
        same_bytes = by_ref[refs[i]] - {i}
        for j in same_bytes:
            why[(i, j)] = SAME_BYTES
        for j in same_text:
            why[(i, j)] = SAME_CAPTION
        if same_text | same_bytes:
            exclude[i] = same_text | same_bytes
    return exclude, why


def build(source: str, out: Path, seed: int = 0, pool_size: int | None = None, n_queries: int | None = None,
          n_negatives: int = 24, caption_model: str | None = None, dataset: str | None = None,
          annotations: str | None = None, image_root: str | None = None, split: str | None = None,
          hf_split: str = "test", sample_images: int = 100, allow_missing: bool = False,
          progress: bool = True, load_caption_model: Callable[[str | None], Any] | None = None) -> PoolSet:
    """Build the task from `source` into `out` (see the module doc for the steps)."""
    kind = "sample" if source == "sample" else "real"
    pool_size = int(pool_size or DEFAULTS[kind]["pool_size"])
    n_queries = int(n_queries or DEFAULTS[kind]["n_queries"])
    if caption_model is None and kind == "real":
        caption_model = REAL_CAPTION_MODEL
    if n_queries > pool_size:
        raise ValueError(f"n_queries {n_queries} exceeds pool_size {pool_size}")
    if pool_size < N_CAPTIONS:
        raise ValueError(f"pool_size must be at least {N_CAPTIONS} (one group per caption index)")
    image_log = DropLog("source images")
    images, sources = load_source(source, seed, dataset, annotations, image_root, split, hf_split, sample_images,
                                  drops=image_log)
    ids = [r.image_id for r in images]
    if len(ids) != len(set(ids)):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise FlickrSourceError(f"source {source}: image id {dup!r} appears more than once")
    usable = usable_images(images, image_log)
    check_drops(image_log, bool(allow_missing), source)
    pool = sample_pool(usable, pool_size, seed)
    pool_ids = [r.image_id for r in pool]
    strata = stratify(pool_ids, seed)
    texts = [r.captions[strata[r.image_id]] for r in pool]
    if load_caption_model is None:
        raise ValueError("the Flickr builder needs a caption model loader: build through the task (`mmbench build`, "
                         "TaskSpec.build), which passes mmbench.models.sentence_transformer.load_caption_model")
    vectors, model_info = embed_captions(texts, load_caption_model(caption_model), progress=progress)
    query_rows = sorted(int(i) for i in _rng(seed, "queries").choice(pool_size, size=n_queries, replace=False))

    out = Path(out)
    with build_scratch(out) as scratch:
        media = MediaStore(scratch)
        counter = UnifiedTokenCounter.default()
        segments = []
        for rec in tqdm(pool, desc="store images", disable=not progress):
            data, suffix, w, h = rec.read()
            segments.append(ImageSegment(ref=media.put_bytes(data, suffix), width=w, height=h))
        exclude, why = _exclusions(pool, texts, [s.ref for s in segments], query_rows)
        neg_idx, neg_sims, skipped = hard_negatives(vectors, pool_ids, n_negatives, exclude=exclude)
        negative_log = DropLog("hard-negative choices")
        queries, pools, needed, similarity = [], [], set(), {}
        for row in query_rows:
            rec = pool[row]
            negative_log.keep(n_negatives)
            for j in skipped.get(row, []):
                negative_log.drop(why[(row, j)], f"q-{rec.image_id}: img-{pool_ids[j]}")
            members = sorted([row, *(int(j) for j in neg_idx[row])], key=lambda j: pool_ids[j])
            order = _rng(seed, "order", rec.image_id).permutation(len(members))
            cand_ids = [f"img-{pool_ids[members[i]]}" for i in order]
            needed.update(members)
            similarity[rec.image_id] = [float(neg_sims[row, 0]), float(neg_sims[row, -1])]
            queries.append(Document(id=f"q-{rec.image_id}", segments=[Text(texts[row])], tokens=counter.text(texts[row]),
                                    meta={"image_id": rec.image_id, "caption_index": strata[rec.image_id]}))
            pools.append(PoolItem(
                id=rec.image_id, query_id=f"q-{rec.image_id}", subset="hard_negatives", candidate_ids=cand_ids,
                relevant_ids=[f"img-{rec.image_id}"],
                meta={"caption_index": strata[rec.image_id], "dataset": "sample" if kind == "sample" else "flickr30k",
                      "gt_position": cand_ids.index(f"img-{rec.image_id}") + 1}))
        candidates = []
        for row in sorted(needed):
            rec, seg = pool[row], segments[row]
            candidates.append(Document(id=f"img-{rec.image_id}", segments=[seg], tokens=image_tokens(seg.width, seg.height),
                                       meta={"image_id": rec.image_id, "caption_index": strata[rec.image_id],
                                             "captions": list(rec.captions[:N_CAPTIONS])}))
        ps = PoolSet(task=TASK_NAME, task_version=TASK_VERSION, queries=queries, candidates=candidates, pools=pools,
                     seed=seed, sources=sources)
        ps.builder = {
            "name": "mmbench.builders.flickr_hard_negatives", "source": source,
            "params": {"pool_size": pool_size, "n_queries": n_queries, "n_negatives": n_negatives,
                       "candidates_per_query": n_negatives + 1, "split": split, "hf_split": hf_split if source == "hf"
                       else None, "sample_images": sample_images if kind == "sample" else None,
                       "allow_missing": bool(allow_missing), "max_drop_share": MAX_DROP_SHARE},
            "caption_model": model_info,
            "stratification": {"caption_indices": list(range(N_CAPTIONS)),
                               "group_sizes": [sum(1 for v in strata.values() if v == g) for g in range(N_CAPTIONS)],
                               "rule": "pool shuffled with seed, split into 5 near-equal groups; group g uses caption g"},
            "hard_negatives": {"similarity": "cosine of the representative captions' embeddings (each distinct "
                                             "caption embedded once)",
                               "tie_break": f"similarities rounded to {SIM_DECIMALS} decimals; ties go to the smaller "
                                            "image id; the image itself is excluded",
                               "excluded": "images with the query caption among their captions; images with the "
                                           "query image's bytes",
                               # not hashed: model floats differ in their last bits between machines
                               "similarity_max_min": similarity},
            "candidate_order": "seeded random permutation per query (seed, 'order', image id) of the candidates "
                               "listed by image id; LLM rankers number the images in this order",
            "source_images": image_log.read,
            "pool": [[pid, strata[pid]] for pid in pool_ids],
            "queries": [pool_ids[r] for r in query_rows],
        }
        write_valid_poolset(ps, out, checks, media_from=scratch, drops={"images": image_log, "negatives": negative_log})
    return ps
