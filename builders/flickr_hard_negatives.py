"""Flickr30k caption-space hard negatives (seed 003): 25 confusable candidates per query caption.

1. Pool: `pool_size` images sampled (seeded) from the source, each with five captions.
2. Stratified caption sampling: the pool is shuffled and split into five groups of pool/5
   images; group g takes caption index g, giving one representative caption per image.
3. The representative captions are embedded by a sentence-transformers model chosen
   independently of the evaluated systems; the pool×pool cosine matrix gives, for each image,
   the `n_negatives` images whose captions are most similar (itself excluded).
4. Queries: `n_queries` pool images drawn at random (seeded); a query is the image's
   representative caption, its candidates are the image and its hard negatives, stored in a
   seeded random order per query, so every system (and every LLM prompt) sees the same order.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from tqdm.auto import tqdm

from mmbench.documents import Document, Text
from mmbench.documents import Image as ImageSegment
from mmbench.media import MediaStore
from mmbench.builders.validity import write_valid_poolset
from mmbench.poolset import build_scratch, PoolItem, PoolSet, source_fingerprint
from mmbench.tokens import UnifiedTokenCounter, image_tokens

from .sources import hub
from .sources.flickr30k import N_CAPTIONS, CaptionedImage, read_annotations_csv, read_hf, read_karpathy
from .sources.sample_flickr import sample_flickr

TASK_NAME = "flickr_hard_negatives"
TASK_VERSION = "1.0"
SOURCES = ("sample", "hf", "karpathy", "csv")
REAL_CAPTION_MODEL = "sentence-transformers/all-mpnet-base-v2"
SIM_DECIMALS = 6          # similarities equal to this many decimals are ties, broken by image id
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


def hard_negatives(embeddings: np.ndarray, image_ids: Sequence[str], k: int,
                   block: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """For each row, the `k` most cosine-similar other rows: (indices (n, k), similarities (n, k)).

    Similarities are rounded to SIM_DECIMALS; ties go to the smaller image id, so the choice
    does not depend on input order or float noise below the rounding.
    """
    n = len(image_ids)
    if k >= n:
        raise ValueError(f"{k} hard negatives need a pool of more than {k} images (got {n})")
    x = np.asarray(embeddings, dtype=np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    id_rank = np.empty(n, dtype=np.int64)
    id_rank[np.argsort(np.asarray(image_ids, dtype=object), kind="stable")] = np.arange(n)
    idx = np.empty((n, k), dtype=np.int64)
    sims = np.empty((n, k), dtype=np.float64)
    for start in range(0, n, block):
        rows = np.arange(start, min(n, start + block))
        s = np.round(x[rows] @ x.T, SIM_DECIMALS)
        s[np.arange(len(rows)), rows] = -np.inf          # never a negative of itself
        keys = np.broadcast_to(id_rank, s.shape)
        order = np.lexsort((keys, -s), axis=-1)[:, :k]
        idx[rows] = order
        sims[rows] = np.take_along_axis(s, order, axis=1)
    return idx, sims


def embed_captions(texts: Sequence[str], model_name: str | None, batch_size: int = 256,
                   progress: bool = False) -> tuple[np.ndarray, dict[str, Any]]:
    """Caption vectors from a sentence-transformers model; `None`/"minilm" is the packaged MiniLM."""
    from mmbench.models.sentence_transformer import MINILM_HUB_ID, SentenceTransformerModel, packaged_minilm_path

    if model_name in (None, "minilm"):
        local = packaged_minilm_path()
        model_id, name = (str(local) if local else MINILM_HUB_ID), "all-MiniLM-L6-v2 (packaged)"
    else:
        model_id, name = model_name, model_name
    model = SentenceTransformerModel(model_id, name=name)
    chunks = []
    for start in tqdm(range(0, len(texts), batch_size), desc="embed captions", disable=not progress):
        docs = [Document(f"c{i}", [Text(t)]) for i, t in enumerate(texts[start:start + batch_size], start)]
        chunks.append(model.encode(docs, "document", None))
    info = {"name": name, "revision": model.card.revision, "dim": model.card.dim, "similarity": "cosine"}
    return np.concatenate(chunks) if chunks else np.zeros((0, model.card.dim or 0)), info


def load_source(source: str, seed: int, dataset: str | None, annotations: str | None, image_root: str | None,
                split: str | None, hf_split: str, sample_images: int) -> tuple[list[CaptionedImage], dict[str, str]]:
    if source == "sample":
        return sample_flickr(sample_images, seed), {"images": f"mmbench procedural sample ({sample_images} scenes, "
                                                              f"seed {seed})"}
    if source == "hf":
        images = read_hf(dataset, hf_split=hf_split, split=split)
        named = hub.fingerprint(dataset, "dataset", split=hf_split) if hub.is_hub(dataset) else f"{dataset} [{hf_split}]"
        return images, {"dataset": named}
    if source == "karpathy":
        return read_karpathy(annotations, image_root, split), {"annotations": source_fingerprint(annotations),
                                                               "image_root": str(image_root)}
    if source == "csv":
        return read_annotations_csv(annotations, image_root, split), {"annotations": source_fingerprint(annotations),
                                                                      "image_root": str(image_root)}
    raise ValueError(f"unknown source {source!r} for {TASK_NAME}; use one of {', '.join(SOURCES)}")


def build(source: str, out: Path, seed: int = 0, pool_size: int | None = None, n_queries: int | None = None,
          n_negatives: int = 24, caption_model: str | None = None, dataset: str | None = None,
          annotations: str | None = None, image_root: str | None = None, split: str | None = None,
          hf_split: str = "test", sample_images: int = 100, progress: bool = True) -> PoolSet:
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
    images, sources = load_source(source, seed, dataset, annotations, image_root, split, hf_split, sample_images)
    ids = [r.image_id for r in images]
    if len(ids) != len(set(ids)):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"source {source}: image id {dup!r} appears more than once")
    usable = [r for r in images if len(r.captions) >= N_CAPTIONS and all(c for c in r.captions[:N_CAPTIONS])]
    usable_ids = {r.image_id for r in usable}
    skipped = sorted(i for i in ids if i not in usable_ids)
    pool = sample_pool(usable, pool_size, seed)
    pool_ids = [r.image_id for r in pool]
    strata = stratify(pool_ids, seed)
    texts = [r.captions[strata[r.image_id]] for r in pool]
    vectors, model_info = embed_captions(texts, caption_model, progress=progress)
    neg_idx, neg_sims = hard_negatives(vectors, pool_ids, n_negatives)
    query_rows = sorted(int(i) for i in _rng(seed, "queries").choice(pool_size, size=n_queries, replace=False))

    out = Path(out)
    with build_scratch(out) as scratch:
        media = MediaStore(scratch)
        counter = UnifiedTokenCounter.default()
        queries, pools, needed = [], [], set()
        for row in query_rows:
            rec = pool[row]
            members = [row, *(int(j) for j in neg_idx[row])]
            order = _rng(seed, "order", rec.image_id).permutation(len(members))
            cand_ids = [f"img-{pool_ids[members[i]]}" for i in order]
            needed.update(members)
            queries.append(Document(id=f"q-{rec.image_id}", segments=[Text(texts[row])], tokens=counter.text(texts[row]),
                                    meta={"image_id": rec.image_id, "caption_index": strata[rec.image_id]}))
            pools.append(PoolItem(
                id=rec.image_id, query_id=f"q-{rec.image_id}", subset="hard_negatives", candidate_ids=cand_ids,
                relevant_ids=[f"img-{rec.image_id}"],
                meta={"caption_index": strata[rec.image_id], "dataset": "sample" if kind == "sample" else "flickr30k",
                      "gt_position": cand_ids.index(f"img-{rec.image_id}") + 1,
                      "negative_similarity_max": float(neg_sims[row, 0]),
                      "negative_similarity_min": float(neg_sims[row, -1])}))
        candidates = []
        for row in tqdm(sorted(needed), desc="store images", disable=not progress):
            rec = pool[row]
            data, suffix, w, h = rec.read()
            seg = ImageSegment(ref=media.put_bytes(data, suffix), width=w, height=h)
            candidates.append(Document(id=f"img-{rec.image_id}", segments=[seg], tokens=image_tokens(w, h),
                                       meta={"image_id": rec.image_id, "caption_index": strata[rec.image_id],
                                             "captions": list(rec.captions[:N_CAPTIONS])}))
        ps = PoolSet(task=TASK_NAME, task_version=TASK_VERSION, queries=queries, candidates=candidates, pools=pools,
                     seed=seed, sources=sources)
        ps.builder = {
            "name": "mmbench.builders.flickr_hard_negatives", "source": source,
            "params": {"pool_size": pool_size, "n_queries": n_queries, "n_negatives": n_negatives,
                       "candidates_per_query": n_negatives + 1, "split": split, "hf_split": hf_split if source == "hf"
                       else None, "sample_images": sample_images if kind == "sample" else None},
            "caption_model": model_info,
            "stratification": {"caption_indices": list(range(N_CAPTIONS)),
                               "group_sizes": [sum(1 for v in strata.values() if v == g) for g in range(N_CAPTIONS)],
                               "rule": "pool shuffled with seed, split into 5 near-equal groups; group g uses caption g"},
            "hard_negatives": {"similarity": "cosine of the representative captions' embeddings",
                               "tie_break": f"similarities rounded to {SIM_DECIMALS} decimals; ties go to the smaller "
                                            "image id; the image itself is excluded"},
            "candidate_order": "seeded random permutation per query (seed, 'order', image id); LLM rankers number "
                               "the images in this order",
            "source_images": len(images), "skipped_images": {"count": len(skipped), "first": skipped[:20],
                                                             "reason": f"fewer than {N_CAPTIONS} non-empty captions"},
            "pool": [[pid, strata[pid]] for pid in pool_ids],
            "queries": [pool_ids[r] for r in query_rows],
        }
        write_valid_poolset(ps, out, media_from=scratch)
    return ps
