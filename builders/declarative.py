"""A declarative task's builder: a user's documents and queries, binned, pooled and checked like a built-in task.

The task file (`builders/parts/task_file.py`, schema `task_file.schema.json`) names the sources (read by
`builders/sources/local_files.py`) and the design:

- **length bins** by the unified token count: a document of n tokens is in bin (lo, hi] when lo < n <= hi;
  documents in no bin are dropped and counted. A bin holding fewer than `min_documents_per_bin` documents
  (default: the pool size) is an error naming the bin.
- **items**: one per query and bin holding a relevant document of the query; its relevant candidates are the
  query's relevant documents in that bin, its subset the bin's name.
- **distractors** fill each pool to `pool_size`: `same_bin` a seeded draw of the bin's other documents; `bm25` the
  bin's documents BM25 ranks highest for the query (`parts/lookalikes.LookalikeIndex`, the look-alike index of
  Logical Summarization's Hard distractors; documents it scores 0 are left to a seeded draw); `none` ranks the query
  against every document of its bin. A query's other relevant documents are never distractors.
- **depth** (needle-style): each query's one relevant document is a needle; a document no query names is a
  haystack. For each query, bin and depth, the relevant candidate is a seeded haystack of the bin with the needle
  inserted at the sentence or segment boundary nearest that relative depth; each distractor is another haystack
  of the bin holding another query's needle at the same depth, so every candidate holds a needle. The bin is
  that of the composed candidate; the recorded depth is the share of tokens before the needle.

`write_valid_poolset` then runs the common invariants, the leak audit and the shortcut probes with this task's own
checks (`builders/checks/declarative.py`), and refuses a pool set that breaks one. The manifest records the task
file's text and SHA-256 and the sources' fingerprints, so the build is reproducible from the file and its sources.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mmbench.builders.checks import declarative as checks
from mmbench.builders.parts.lookalikes import B, K1, METHOD, LookalikeIndex
from mmbench.builders.parts.seeding import seeded_rng
from mmbench.builders.parts.task_file import SOURCE, TaskFile, TaskFileError, read_task_file
from mmbench.builders.parts.validity import write_valid_poolset
from mmbench.builders.sources.local_files import LocalSource, SourceError, SourceRecord, read_local_source
from mmbench.data.documents import Document, Image, Segment, Text, Video
from mmbench.data.drops import DropLog
from mmbench.data.media import MediaStore
from mmbench.data.poolset import PoolItem, PoolSet, build_scratch, source_fingerprint
from mmbench.data.tokens import UnifiedTokenCounter

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def build(source: str, out: Path, seed: int = 0, task_file: str = "", task_text: str | None = None,
          progress: bool = True, tokenizer_json: str | None = None) -> PoolSet:
    """Build the task `task_file` declares (its `task_text` when given: the text a manifest recorded) into `out`."""
    if source != SOURCE:
        raise ValueError(f"a declarative task builds from the files its task file names: --source {SOURCE}, "
                         f"not {source!r}")
    tf = read_task_file(task_file, task_text)
    try:
        src = read_local_source(tf.data["sources"], tf.base)
    except SourceError as exc:
        raise TaskFileError(str(exc)) from None
    counter = UnifiedTokenCounter.default(tokenizer_json)
    out = Path(out)
    with build_scratch(out) as scratch:
        media = MediaStore(scratch)
        drops = {"documents": DropLog("documents"), "queries": DropLog("queries"), "items": DropLog("items")}
        design = tf.design
        if "depth" in design:
            queries, candidates, pools = _needle_pools(tf, src, counter, media, seed, drops)
        else:
            queries, candidates, pools = _plain_pools(tf, src, counter, media, seed, drops)
        if not pools:
            why = "; ".join(f"{k}: {d.to_dict()}" for k, d in drops.items() if d.dropped)
            raise TaskFileError(f"{tf.path}: design: no item could be built ({why or 'no queries'})")
        ps = PoolSet(task=tf.name, task_version=tf.version, queries=queries, candidates=candidates, pools=pools,
                     seed=seed, sources={str(p.name): source_fingerprint(p) for p in src.files})
        ps.builder = {"name": "mmbench.builders.declarative", "validator": checks.__name__, "source": SOURCE,
                      "task_file": tf.record(),
                      "params": {"design": design}, "token_counter": getattr(counter.tokenizer, "name", "qwen3"),
                      "length_bins": {b: list(r) for b, r in design["length_bins"].items()},
                      "pool_size": design["pool_size"], "distractors": design["distractors"],
                      "depths": list(design.get("depth", {}).get("depths", []))}
        if design["distractors"] == "bm25":
            ps.builder["lookalike_index"] = {"library": "bm25s", "method": METHOD, "k1": K1, "b": B,
                                             "tokenizer": r"lowercase \w+", "documents": "each bin's own"}
        write_valid_poolset(ps, out, checks, media_from=scratch, drops=drops)
    return ps


# ---- documents ---------------------------------------------------------------------------

def _document(rec: SourceRecord, built_id: str, media: MediaStore, counter: UnifiedTokenCounter,
              meta: dict[str, Any]) -> Document:
    doc = Document(built_id, [_segment(s, media) for s in rec.segments], meta=dict(meta))
    doc.tokens = counter.document(doc)
    return doc


def _segment(s, media: MediaStore) -> Segment:
    if s.kind == "text":
        return Text(s.text)
    refs = [media.put_bytes(m.data, m.suffix) for m in s.media]
    if s.kind == "image":
        return Image(refs[0], s.media[0].width, s.media[0].height)
    return Video(tuple(refs), s.fps, s.media[0].width, s.media[0].height)


def _bin_of(n: int, bins: dict[str, list[int]]) -> str | None:
    return next((name for name, (lo, hi) in bins.items() if lo < n <= hi), None)


def _enough(tf: TaskFile, members: dict[str, list[str]], what: str) -> None:
    need = tf.design["min_documents_per_bin"]
    for name, (lo, hi) in tf.design["length_bins"].items():
        n = len(members.get(name, []))
        if n < need:
            raise TaskFileError(f"{tf.path}: design.length_bins.{name}: {n} {what} of the sources lie in ({lo}, {hi}] "
                                f"unified tokens; the bin needs at least {need} (min_documents_per_bin, default "
                                "pool_size)")


def _queries(src: LocalSource, media: MediaStore, counter: UnifiedTokenCounter) -> dict[str, Document]:
    return {q.id: _document(q, f"q:{q.id}", media, counter, {"relevant_source_ids": list(q.relevant)})
            for q in src.queries}


# ---- plain retrieval ---------------------------------------------------------------------

def _plain_pools(tf: TaskFile, src: LocalSource, counter, media, seed: int, drops: dict[str, DropLog]):
    design, bins = tf.design, tf.design["length_bins"]
    docs: dict[str, Document] = {}
    members: dict[str, list[str]] = {b: [] for b in bins}
    for rec in src.documents:
        doc = _document(rec, f"d:{rec.id}", media, counter, {})
        b = _bin_of(doc.tokens, bins)
        if b is None:
            drops["documents"].drop("outside every length bin", f"{rec.id} ({doc.tokens} tokens)")
            continue
        drops["documents"].keep()
        doc.meta["length_bin"] = b
        docs[rec.id] = doc
        members[b].append(rec.id)
    _enough(tf, members, "documents")
    texts = {d.id: d.text for d in src.documents}
    indexes = {b: LookalikeIndex(ids, [texts[i] for i in ids]) for b, ids in members.items()
               if design["distractors"] == "bm25" and len(ids) >= 2}
    qdocs = _queries(src, media, counter)
    pools, used = [], set()
    for q in src.queries:
        items = 0
        for b, ids in members.items():
            rel = [r for r in q.relevant if r in docs and docs[r].meta["length_bin"] == b]
            if not rel:
                continue
            others = [d for d in ids if d not in q.relevant]
            if design["distractors"] == "none":
                chosen = others
            elif len(rel) >= design["pool_size"]:
                drops["items"].drop("as many relevant documents in the bin as pool_size", f"{q.id} in {b}")
                continue
            else:
                chosen = _distractors((b, q.id), q.text, others, design["pool_size"] - len(rel),
                                      design["distractors"], indexes.get(b), q.relevant, seed)
            pools.append(PoolItem(f"{b}:{q.id}", f"q:{q.id}", b, [f"d:{d}" for d in rel + chosen],
                                  [f"d:{d}" for d in rel], meta={"length_bin": b}))
            used.update(rel + chosen)
            items += 1
            drops["items"].keep()
        if items:
            drops["queries"].keep()
        else:
            drops["queries"].drop("no relevant document in a length bin", q.id)
    queries = [qdocs[q] for q in sorted({p.query_id[2:] for p in pools})]
    return queries, [docs[d] for d in sorted(used)], pools


def _distractors(key: tuple[str, ...], query_text: str, others: list[str], k: int, policy: str,
                 index: LookalikeIndex | None, exclude: list[str], seed: int) -> list[str]:
    """`k` of `others` for the item `key` (bin, query): BM25 look-alikes first under `bm25`, then a seeded draw."""
    k = min(k, len(others))
    chosen: list[str] = []
    if policy == "bm25" and index is not None:
        near = index.nearest(query_text, len(index.ids), exclude=exclude)
        allowed = set(others)
        chosen = [la.doc_id for la in near if la.score > 0 and la.doc_id in allowed][:k]
    rest = [d for d in others if d not in chosen]
    order = seeded_rng(seed, "distractors", *key).permutation(len(rest))
    return chosen + [rest[int(i)] for i in order[:k - len(chosen)]]


# ---- needle-style: depth placement -------------------------------------------------------

def _needle_pools(tf: TaskFile, src: LocalSource, counter, media, seed: int, drops: dict[str, DropLog]):
    design, bins = tf.design, tf.design["length_bins"]
    depths = sorted(float(d) for d in design["depth"]["depths"])
    for q in src.queries:
        if len(q.relevant) != 1:
            raise TaskFileError(f"{q.where}: field 'relevant': a needle-style task (design.depth) needs exactly one "
                                "relevant document (the needle) per query")
    needle_ids = sorted({q.relevant[0] for q in src.queries})
    by_id = {d.id: d for d in src.documents}
    hay = {d.id: d for d in src.documents if d.id not in needle_ids}
    needles = {n: _document(by_id[n], f"n:{n}", media, counter, {}) for n in needle_ids}
    hay_units = {h: _units(_document(r, f"h:{h}", media, counter, {}), counter) for h, r in hay.items()}
    hay_tokens = {h: sum(t for _, t in u) for h, u in hay_units.items()}
    needle_of = {q.id: q.relevant[0] for q in src.queries}
    members: dict[str, list[str]] = {b: [] for b in bins}
    for h in sorted(hay):   # a haystack's bin: the one its length with the longest needle still fits
        b = _bin_of(hay_tokens[h] + max(n.tokens for n in needles.values()), bins)
        if b is None or _bin_of(hay_tokens[h] + min(n.tokens for n in needles.values()), bins) != b:
            drops["documents"].drop("haystack outside every length bin with every needle", f"{h} ({hay_tokens[h]} tokens)")
            continue
        drops["documents"].keep()
        members[b].append(h)
    _enough(tf, members, "haystacks")
    qdocs = _queries(src, media, counter)
    candidates: dict[str, Document] = {}

    def place(h: str, n: str, depth: float, b: str) -> str:
        cid = f"{h}@{n}@{depth:g}"
        if cid not in candidates:
            segs, at = _insert(hay_units[h], needles[n].segments, depth)
            doc = Document(cid, segs, meta={"length_bin": b, "depth": at, "depth_target": depth})
            doc.tokens = counter.document(doc)
            candidates[cid] = doc
        return cid

    indexes = {b: LookalikeIndex(ids, [hay[i].text for i in ids]) for b, ids in members.items()
               if design["distractors"] == "bm25" and len(ids) >= 2}
    pools = []
    for q in src.queries:
        for b, ids in members.items():
            rng = seeded_rng(seed, "needle", b, q.id)
            for depth in depths:
                own = ids[int(rng.integers(len(ids)))]
                others = [h for h in ids if h != own]
                chosen = others if design["distractors"] == "none" else _distractors(
                    (b, q.id, f"{depth:g}"), q.text, others, design["pool_size"] - 1, design["distractors"],
                    indexes.get(b), [own], seed)
                foreign = [needle_of[o.id] for o in src.queries if needle_of[o.id] != needle_of[q.id]]
                if not foreign:
                    raise TaskFileError(f"{tf.path}: design.depth: a needle-style task needs queries with at least two "
                                        "different needles")
                pick = rng.permutation(len(foreign))
                cands = [place(own, needle_of[q.id], depth, b)] + [
                    place(h, foreign[int(pick[i % len(pick)])], depth, b) for i, h in enumerate(chosen)]
                pools.append(PoolItem(f"{b}:{q.id}:{depth:g}", f"q:{q.id}", b, cands, cands[:1],
                                      meta={"length_bin": b, "depth": candidates[cands[0]].meta["depth"],
                                            "depth_target": depth}))
                drops["items"].keep()
        drops["queries"].keep()
    return [qdocs[q.id] for q in src.queries], list(candidates.values()), pools


def _units(doc: Document, counter: UnifiedTokenCounter) -> list[tuple[Segment, int]]:
    """A haystack as insertion units: each sentence of its text, each image or video, with its tokens."""
    out: list[tuple[Segment, int]] = []
    for s in doc.segments:
        if isinstance(s, Text):
            out += [(Text(p), counter.text(p)) for p in SENTENCE_END.split(s.text) if p.strip()]
        else:
            out.append((s, counter.segment(s)))
    return out


def _insert(units: list[tuple[Segment, int]], needle: list[Segment], depth: float) -> tuple[list[Segment], float]:
    """The haystack with `needle` at the unit boundary nearest `depth`, and the share of tokens before it."""
    total = sum(t for _, t in units)
    cum = [0]
    for _, t in units:
        cum.append(cum[-1] + t)
    at = min(range(len(cum)), key=lambda i: (abs(cum[i] - depth * total), i))
    segs = [s for s, _ in units[:at]] + list(needle) + [s for s, _ in units[at:]]
    return segs, round(cum[at] / total, 4) if total else 0.0
