"""A pool set written in mteb's Hugging Face retrieval layout, so mteb's own loader reads it.

The rows are those of `mmbench.interop.mteb_task.export_mteb_task` (one mapping from pools to
mteb data: a query row per pool item, its pool as a `top_ranked` list), written per mteb subset
and split as parquet files named by a dataset card::

    README.md                     configs (below), task name, main score, source pool set hash
    mteb_export.json              what the export holds and what the text+image mapping dropped
    <cfg>corpus/<split>-<tag>.parquet   id, text[, image], media (one row per pool and candidate, see below)
    <cfg>queries/<split>-<tag>.parquet  id, text[, image], media
    <cfg>qrels/<split>-<tag>.parquet    query-id, corpus-id, score
    <cfg>top_ranked/<split>-<tag>.parquet  query-id, corpus-ids (the pool each query is ranked in)

`<tag>` is 12 hex digits of SHA-256 over (pool set hash, limit, seed, the selected item ids): `datasets` caches a local folder by
its name and data-file paths only, so a later export to a folder of the same name would otherwise load the
earlier one's cached rows.
    media/                        every image and frame a row names (copied from the pool set)

`<cfg>` is empty for mteb's "default" subset (configs `corpus`, `queries`, `default` (qrels),
`top_ranked`) and `<subset>-` otherwise, as `mteb.abstasks.retrieval_dataset_loaders` expects.
`media` lists a document's images in reading order as a JSON list of paths relative to the export
folder; `image` (tasks with images) is the first image, the one mteb's encoders see.

mteb breaks equal scores by descending document id, mmbench by a permutation seeded per pool item. So each
candidate is written once per pool, with the id `<item no>.<tie key>~<candidate id>` whose order within the
pool is mmbench's tie-break order for the export's seed: a stock mteb retrieval task over the folder ranks
every pool as `mmbench run --seed S` does. A task whose documents mteb's rows cannot hold (a video) is refused.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from mmbench.data.documents import Document, Video
from mmbench.data.media import atomic_write_bytes, default_mode
from mmbench.data.poolset import PoolSet
from mmbench.models.base import EmbeddingModel
from mmbench.interop.mteb_task import candidate_of

MARKER = "mteb_export.json"
SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")   # what `datasets` accepts as a split name
BAD_CONFIG_CHARS = re.compile(r"[<>:/\\|?*]")   # what `datasets` refuses in a config name


class ExportError(RuntimeError):
    """The export cannot be written; the message names the pool set or the folder."""


def written_split_name(split: str) -> str:
    """The split name on disk: mteb's, with characters `datasets` refuses (e.g. "-") made "_"."""
    if SPLIT_NAME.match(split):
        return split
    name = re.sub(r"\W", "_", split).strip(".") or "split"
    return name if SPLIT_NAME.match(name) else "s_" + name.replace(".", "_")


def _config(subset: str, part: str) -> str:
    if subset == "default":
        return "default" if part == "qrels" else part
    return f"{subset}-{part}"


def _folder(subset: str, part: str) -> str:
    name = part if subset == "default" else f"{subset}-{part}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def media_paths(doc: Document) -> list[str]:
    return [f"media/{ref}" for ref in doc.media_refs()]


def write_mteb_layout(ps: PoolSet, out: Path, overwrite: bool = False, limit: int | None = None,
                      seed: int = 0, accept_image_loss: bool = False, seen_by: EmbeddingModel | None = None
                      ) -> dict[str, Any]:
    """Write `ps` (loaded from its folder) in mteb's layout at `out`, atomically; returns the summary.

    `limit` and `seed` mean what they mean to `mmbench run`: the same items, ties broken the same way.
    Documents with several images are refused unless `accept_image_loss` (an mteb row's `image` holds the
    first one only); the summary then records the loss under `image_loss`. With `seen_by`, each document is
    written as that model sees it in `mmbench run` (`seen_views`), recorded under `seen_by`."""
    from mmbench.interop.mteb_task import export_mteb_task

    out = Path(out)
    _check_target(out, overwrite)
    views = None
    if seen_by is not None:
        ps, views = seen_views(ps, seen_by)
    refuse_unrepresentable(ps)
    try:
        task = export_mteb_task(ps, limit=limit, seed=seed)
        task.load_data()
    except ValueError as exc:
        raise ExportError(f"{ps.root}: cannot be laid out as an mteb task ({exc})") from None
    loss = image_loss(task.export_report, accept_image_loss)
    if loss["documents"] and not accept_image_loss:
        raise ExportError(f"{ps.root}: {ps.task}: {loss['documents']} documents hold more than one image and an mteb "
                          f"row holds one, so {loss['dropped_images']} images would be lost; not exported (pass "
                          "--accept-image-loss to export the first image of each, recording the loss)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with _quiet_datasets():
        return _write(ps, task, out, limit, seed, loss, views)


def seen_views(ps: PoolSet, model: EmbeddingModel) -> tuple[PoolSet, dict[str, Any]]:
    """`ps` with each query and candidate replaced by what `model` sees of it in `mmbench run`
    (`mmbench.running.views.model_view`: its own modalities, middle-truncated to its window), and a record of it.
    A stock encoder given such an export reads the very text mmbench gives the model, so stock mteb scores what
    mmbench scores (a stock SentenceTransformer would otherwise keep each text's head only)."""
    from mmbench.running.views import model_view

    counts = {"documents": 0, "truncated": 0, "with_unseen_modalities": 0}

    def view(doc: Document) -> Document:
        seen, record = model_view(doc, model)
        counts["documents"] += 1
        counts["truncated"] += int(record.truncated)
        counts["with_unseen_modalities"] += int(bool(record.unseen_modalities))
        return Document(id=doc.id, segments=seen.segments, tokens=doc.tokens, meta=doc.meta)

    viewed = dataclasses.replace(ps, queries=[view(d) for d in ps.queries], candidates=[view(d) for d in ps.candidates])
    return viewed, {"model": model.card.identity(), "window_tokens": model.card.max_tokens,
                    "truncation": "middle (head and tail kept), as mmbench run", **counts}


def refuse_unrepresentable(ps: PoolSet) -> None:
    """One line naming what mteb's retrieval rows (one text, one image) cannot hold, for a task whose documents
    need it: a video (its frames in time order) is not an image, so a Temporal Summarization pool set is refused."""
    for doc in [*ps.queries, *ps.candidates]:
        if any(isinstance(s, Video) for s in doc.segments):
            raise ExportError(f"{ps.root}: {ps.task} document {doc.id!r} is a video; mteb's retrieval rows hold one "
                              "text and one image, not frames in time order, so this task is not exported")


def image_loss(report: dict[str, Any], accepted: bool) -> dict[str, Any]:
    """What the one-text-one-image rows leave out of the exported documents: the documents with further
    images, how many images that is, and whether the export was asked to accept it."""
    docs = sorted(d for d, v in report["per_document"].items() if v["images"])
    return {"accepted": bool(accepted), "documents": len(docs), "dropped_images": report["dropped_images"],
            "document_ids": docs}


@contextmanager
def _quiet_datasets():
    """No "Creating parquet" bars per file: the command prints one summary line."""
    from datasets.utils import logging as ds_logging

    was = ds_logging.is_progress_bar_enabled()
    ds_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            ds_logging.enable_progress_bar()


def _per_pool_corpus(corpus, top_ranked: dict[str, list[str]], relevant: dict[str, dict[str, int]], seed: int):
    """One corpus row per (pool, candidate), ids sorted in mmbench's tie-break order within each pool.

    mteb (pytrec_eval) orders equal scores by descending document id; mmbench orders them by a permutation
    seeded from (seed, item id) (`mmbench.running.runner.rank`). A candidate shared by several pools gets one
    copy per pool, whose id puts it where mmbench's permutation puts it there."""
    from mmbench.interop.mteb_task import pool_doc_id
    from mmbench.running.scoring import tiebreak_keys

    row_of = {cid: k for k, cid in enumerate(corpus["id"])}
    rows, ids, pools, qrels = [], [], {}, {}
    for no, item in enumerate(sorted(top_ranked)):
        cands = list(top_ranked[item])
        keys = tiebreak_keys(item, len(cands), seed)
        width = len(cands)
        new = [pool_doc_id(no, width - 1 - int(t), c) for c, t in zip(cands, keys)]
        rows += [row_of[c] for c in cands]
        ids += new
        pools[item] = new
        qrels[item] = {n: relevant.get(item, {}).get(c, 0) for n, c in zip(new, cands)
                       if relevant.get(item, {}).get(c, 0)}
    copied = corpus.select(rows).remove_columns("id").add_column("id", ids)
    return copied.select_columns(["id", *[c for c in copied.column_names if c != "id"]]), pools, qrels


def _write(ps: PoolSet, task: Any, out: Path, limit: int | None, seed: int, loss: dict[str, Any],
           views: dict[str, Any] | None) -> dict[str, Any]:
    from datasets import Dataset, Features, Sequence, Value

    queries, candidates = ps.query_by_id(), ps.candidate_by_id()
    item_query = {p.id: p.query_id for p in ps.pools}
    # `datasets` caches a local folder by its name and its data-file paths, not their contents: file names
    # that differ per export keep a second export to a folder of the same name from loading the first's cache
    chosen = ",".join(sorted(item for splits in task.dataset.values() for data in splits.values()
                             for item in data["top_ranked"]))   # the exported items: what `--limit` selects may change
    seen = f":{json.dumps(views['model'], sort_keys=True, default=str)}" if views else ""  # another model's views
    tag = hashlib.sha256(f"{ps.content_hash}:{limit}:{seed}:{chosen}{seen}".encode()).hexdigest()[:12]
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.exporting."))
    configs: dict[str, list[dict[str, str]]] = {}
    renamed: dict[str, str] = {}   # mteb split -> the name written (`datasets` refuses some characters)
    counts: dict[str, dict[str, dict[str, int]]] = {}
    refs: set[str] = set()
    try:
        os.chmod(tmp, default_mode(0o777))
        for subset, splits in sorted(task.dataset.items()):
            if BAD_CONFIG_CHARS.search(subset):
                raise ExportError(f"pool set {ps.root}: mteb subset {subset!r} holds a character `datasets` refuses "
                                  "in a config name (one of < > : / \\ | ? *)")
            for mteb_split, data in sorted(splits.items()):
                split = written_split_name(mteb_split)
                if split in counts.get(subset, {}):
                    raise ExportError(f"pool set {ps.root}: splits {mteb_split!r} and another both become {split!r}")
                if split != mteb_split:
                    renamed[mteb_split] = split
                copied, pools, relevant = _per_pool_corpus(data["corpus"], data["top_ranked"],
                                                           data["relevant_docs"], seed)
                corpus = _with_media(copied, lambda i: candidates[candidate_of(i)], refs)
                qs = _with_media(data["queries"], lambda i: queries[item_query.get(i, i)], refs)
                data = {**data, "top_ranked": pools}
                qrels = Dataset.from_list(
                    [{"query-id": q, "corpus-id": c, "score": int(s)}
                     for q, rel in sorted(relevant.items()) for c, s in sorted(rel.items())],
                    features=Features({"query-id": Value("string"), "corpus-id": Value("string"),
                                       "score": Value("int32")}))
                parts = {"corpus": corpus, "queries": qs, "qrels": qrels}
                if data.get("top_ranked"):
                    parts["top_ranked"] = Dataset.from_list(
                        [{"query-id": q, "corpus-ids": list(c)} for q, c in sorted(data["top_ranked"].items())],
                        features=Features({"query-id": Value("string"), "corpus-ids": Sequence(Value("string"))}))
                for part, ds in parts.items():
                    rel = f"{_folder(subset, part)}/{split}-{tag}.parquet"
                    (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                    ds.to_parquet(str(tmp / rel))
                    configs.setdefault(_config(subset, part), []).append({"split": split, "path": rel})
                    counts.setdefault(subset, {}).setdefault(split, {})[part] = len(ds)
        for ref in sorted(refs):
            src = ps.root / ref
            if not src.is_file():
                raise ExportError(f"pool set {ps.root}: {ref} is named by a document but missing")
            (tmp / ref).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, tmp / ref)
        summary = {"format": "mteb-retrieval", "task": task.metadata.name, "main_score": task.metadata.main_score,
                   "revision": task.metadata.dataset["revision"], "type": task.metadata.type,
                   "source": {"task": ps.task, "task_version": ps.task_version, "content_hash": ps.content_hash},
                   "subsets": counts, "renamed_splits": renamed, "media_files": len(refs),
                   "limit": limit, "seed": seed, "image_loss": loss, **({"seen_by": views} if views else {}),
                   "tie_break": "one corpus row per (pool, candidate); within a pool, ids sort descending in "
                                f"mmbench's tie-break order for seed {seed} (mteb orders equal scores by descending id)",
                   "dropped_by_text_image_mapping": {k: task.export_report[k] for k in
                                                     ("documents", "dropped_images", "dropped_videos")}}
        atomic_write_bytes(tmp / MARKER, (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode())
        atomic_write_bytes(tmp / "README.md", _card(summary, configs).encode("utf-8"))
        if out.exists():
            shutil.rmtree(out)   # only an earlier export (checked above), with --overwrite
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary


def _with_media(ds, doc_of, refs: set[str]):
    """Add the `media` column: the paths (relative to the export) of a row's images and frames, in reading
    order, as a JSON list in a string (mteb's loader cannot turn lists of different lengths into arrays)."""
    paths = [media_paths(doc_of(i)) for i in ds["id"]]
    for p in paths:
        refs.update(p)
    from datasets import Value

    return ds.add_column("media", [json.dumps(p) for p in paths], feature=Value("string"))


def _check_target(out: Path, overwrite: bool) -> None:
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not (out / MARKER).is_file():
        raise ExportError(f"{out} exists and is not an mmbench export; choose another --out")
    if not overwrite:
        raise ExportError(f"{out} already holds an export; pass --overwrite to replace it")


def _card(summary: dict[str, Any], configs: dict[str, list[dict[str, str]]]) -> str:
    src = summary["source"]
    front = {"pretty_name": f"{summary['task']} (mteb layout of mmbench {src['task']} {src['task_version']})",
             "tags": ["mteb", "mmbench", "retrieval"],
             "configs": [{"config_name": name, "data_files": files} for name, files in configs.items()],
             "mteb": {k: summary[k] for k in ("task", "main_score", "revision", "type")},
             "mmbench": src}
    splits = sorted({s for sub in summary["subsets"].values() for s in sub})
    return "\n".join([
        "---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True).rstrip(), "---", "",
        f"# {summary['task']}: mteb retrieval layout", "",
        f"Exported by `mmbench export --format mteb` from pool set `{src['content_hash']}` "
        f"({src['task']} v{src['task_version']}). Splits: {', '.join(splits)}. Each query row is one pool "
        "item; `top_ranked` lists the candidates it is ranked against, `qrels` the relevant ones.", "",
        "```python",
        "from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader",
        f'data = RetrievalDatasetLoader("<this folder>", revision="{summary["revision"]}", split="{splits[0]}").load()',
        "```", "",
        "`media` holds each row's image and frame paths relative to this folder; `image` (where present) is "
        "the first image. See `mteb_export.json` for counts and what the one-text-one-image mapping dropped.", "",
        *(["Split names `datasets` refuses were renamed: "
           + ", ".join(f"`{a}` -> `{b}`" for a, b in sorted(summary["renamed_splits"].items())) + ".", ""]
          if summary["renamed_splits"] else []),
    ])
