"""Small sources for declarative tasks, written by the tests: JSONL documents with text and images, queries, and
the same data in mteb's retrieval layout (parquet as `mmbench export --format mteb` writes it, or BEIR files).

Documents are seeded pseudo-prose over a shared vocabulary, each with a few topic words of its own that its query
repeats (so BM25 has look-alikes to find); every third document carries a small PNG. Bin ranges are chosen so each
of three bins holds `per_bin` documents, of which `queries_per_bin` are some query's relevant one.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

BINS = {"short": [0, 200], "medium": [200, 600], "long": [600, 2048]}
LENGTHS = {"short": (20, 60), "medium": (90, 170), "long": (240, 500)}   # words per document, drawn uniformly


PLANTS = ("longest", "shortest", "image")


def _words(n: int, rng) -> list[str]:
    syll = ["ka", "lo", "mi", "ter", "van", "os", "pel", "ru", "sin", "dor", "ex", "qua", "bre", "nu", "fal"]
    out = set()
    while len(out) < n:
        out.add("".join(rng.choice(syll, size=int(rng.integers(2, 4)))))
    return sorted(out)


def write_jsonl_sources(folder: Path, per_bin: int = 14, queries_per_bin: int = 12, seed: int = 0,
                        plant: str | None = None, images: bool = True) -> dict[str, object]:
    """Write docs.jsonl, queries.jsonl and img/*.png under `folder`; returns {documents, queries} as written.

    `plant` plants a shortcut in the sources (PLANTS): "longest", each bin's relevant documents drawn from the top
    fifth of its length range and the others below it; "shortest", the reverse; "image", the relevant documents
    carry an image and no other does."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    vocab = _words(400, rng)
    common, topical = vocab[:120], vocab[120:180]   # topics overlap: BM25 has look-alikes to find
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "img").mkdir(exist_ok=True)
    docs, queries = [], []
    k = 0
    for b, (lo, hi) in LENGTHS.items():
        relevant_slots = sorted(rng.choice(per_bin, size=queries_per_bin, replace=False).tolist())
        for i in range(per_bin):
            k += 1
            did = f"{b}-{i:02d}"
            topic = list(rng.choice(topical, size=4, replace=False))
            n = int(rng.integers(lo, hi))
            relevant = i in relevant_slots
            if plant in ("longest", "shortest"):
                cut = hi - (hi - lo) // 5 if plant == "longest" else lo + (hi - lo) // 5
                top, bottom = (cut, hi), (lo, cut)
                n = int(rng.integers(*(top if relevant == (plant == "longest") else bottom)))
            words = [str(w) for w in rng.choice(common + topic * 6, size=n)]
            text = " ".join(words).capitalize() + "."
            segments: list[dict[str, object]] = [{"text": text}]
            if (relevant if plant == "image" else images and k % 3 == 0):
                img = Image.new("RGB", (64, 48), tuple(int(c) for c in rng.integers(0, 255, size=3)))
                img.save(folder / "img" / f"{did}.png")
                segments.append({"image": f"img/{did}.png"})
            docs.append({"id": did, "segments": segments})
            if relevant:
                queries.append({"id": f"q-{did}", "text": f"Which text speaks of {' '.join(topic[:3])}?",
                                "relevant": [did]})
    _write_jsonl(folder / "docs.jsonl", docs)
    _write_jsonl(folder / "queries.jsonl", queries)
    return {"documents": docs, "queries": queries}


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def task_yaml(name: str = "my_files", sources: str = "", distractors: str = "bm25", pool_size: int = 6,
              extra: str = "") -> str:
    """A task file over the JSONL sources (or `sources`, a YAML block), three bins of BINS."""
    sources = sources or "  format: jsonl\n  documents: data/docs.jsonl\n  queries: data/queries.jsonl\n"
    bins = "".join(f"    {b}: [{lo}, {hi}]\n" for b, (lo, hi) in BINS.items())
    return (f"name: {name}\nversion: '1'\ndescription: test task over local files\nsources:\n{sources}"
            f"design:\n  length_bins:\n{bins}  pool_size: {pool_size}\n  distractors: {distractors}\n  seed: 0\n{extra}")


def write_mteb_layout(folder: Path, written: dict[str, object], media_from: Path) -> None:
    """The JSONL sources `written` in mteb's parquet layout (corpus/, queries/, qrels/, media/)."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    for part in ("corpus", "queries", "qrels"):
        (folder / part).mkdir(parents=True, exist_ok=True)
    (folder / "media").mkdir(exist_ok=True)
    corpus = []
    for d in written["documents"]:  # type: ignore[union-attr]
        texts = [s["text"] for s in d["segments"] if "text" in s]
        media = []
        for s in d["segments"]:
            if "image" in s:
                shutil.copyfile(media_from / s["image"], folder / "media" / Path(s["image"]).name)
                media.append(f"media/{Path(s['image']).name}")
        corpus.append({"id": d["id"], "text": "\n".join(texts), "media": json.dumps(media)})
    rows = list(reversed(corpus))    # another order than the JSONL: the reader sorts by id
    pq.write_table(pa.Table.from_pylist(rows), folder / "corpus" / "test-000000000000.parquet")
    qs = [{"id": q["id"], "text": q["text"], "media": "[]"} for q in written["queries"]]  # type: ignore[union-attr]
    pq.write_table(pa.Table.from_pylist(qs), folder / "queries" / "test-000000000000.parquet")
    qrels = [{"query-id": q["id"], "corpus-id": r, "score": 1} for q in written["queries"] for r in q["relevant"]]  # type: ignore[union-attr]
    pq.write_table(pa.Table.from_pylist(qrels), folder / "qrels" / "test-000000000000.parquet")
