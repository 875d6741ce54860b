"""Pool sets: a built task as a folder anyone can read without mmbench.

Layout::

    manifest.json        task, version, builder parameters, seed, sources, counts, content hash
    queries.parquet      one row per query document
    candidates.parquet   one row per candidate document
    pools.parquet        one row per evaluation item: which candidates a query is ranked against
    provenance.parquet   how each document was built (the task's provenance columns), kept out of the two
                         document tables an evaluator reads; merged back into `meta` by `load_poolset`
    media/               content-addressed images and frames
    README.md            dataset card (benchmark/dataset_card.py): configs for the three tables, licences

Each table loads with ``datasets.load_dataset(folder, "queries")`` (the card declares the configs). The content hash
covers every record and the task identity, and not the time of building, so the same
sources, parameters and seed give a byte-identical hash.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from mmbench.common.json_rows import JSONRowError, parse_json_rows
from mmbench.common.scratch import absolute, check_replaceable, clean_stale, locked_workdir, release_lock_file
from mmbench.data.documents import DeferredText, Document, RecordDocument
from mmbench.data.hash_memo import remember_hashes
from mmbench.data.media import MediaError, MediaStore, atomic_write_bytes, default_mode
from mmbench.data.poolset_tables import (PROVENANCE_TABLE, SCHEMAS, LazyColumn, PoolSetError, file_sha256, parse_rows,
                                         read_columns, read_rows, split_provenance, write_table)

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
POOLSET_FORMAT = "mmbench-poolset/1"
TABLES = ("queries", "candidates", "pools")
PROVENANCE_COLUMNS = "provenance_columns"   # manifest field: the meta keys stored in provenance.parquet
TABLE_DIGESTS = "table_digests"  # manifest field: each table file's SHA-256 as built, and their seal


@dataclass
class PoolItem:
    """One evaluation item: a query ranked against its own candidates."""

    id: str
    query_id: str
    subset: str
    candidate_ids: list[str]
    relevant_ids: list[str]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.id, "query_id": self.query_id, "subset": self.subset,
            "candidate_ids": list(self.candidate_ids), "relevant_ids": list(self.relevant_ids),
            "meta": json.dumps(self.meta, sort_keys=True, ensure_ascii=False),
        }

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> "PoolItem":
        try:
            return cls(id=str(r["id"]), query_id=str(r["query_id"]), subset=str(r["subset"]),
                       candidate_ids=[str(c) for c in r["candidate_ids"]],
                       relevant_ids=[str(c) for c in r["relevant_ids"]],
                       meta=json.loads(r.get("meta") or "{}"))
        except (KeyError, TypeError, ValueError) as exc:
            raise PoolSetError(f"pool item {r.get('id', '?')!r}: malformed record ({exc})") from exc


@dataclass
class PoolSet:
    """A built task in memory; `root` is set once it is written or loaded."""

    task: str
    task_version: str
    queries: list[Document]
    candidates: list[Document]
    pools: list[PoolItem]
    builder: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    sources: dict[str, str] = field(default_factory=dict)
    root: Path | None = None
    manifest: dict[str, Any] = field(default_factory=dict)
    table_digests: dict[str, str] = field(default_factory=dict)  # of the table files as loaded (load_poolset)
    # meta keys that record how a document was built and can name its label (its source record, its image): written
    # to provenance.parquet instead of the document tables, so a reader of those tables never sees them
    provenance_columns: tuple[str, ...] = ()

    @property
    def content_hash(self) -> str:
        return self.manifest.get("content_hash") or compute_content_hash(self)

    @property
    def media(self) -> MediaStore:
        if self.root is None:
            raise PoolSetError("pool set has not been written to disk, so it has no media folder")
        return MediaStore(self.root / "media", boundary=self.root)

    def query_by_id(self) -> dict[str, Document]:
        return {d.id: d for d in self.queries}

    def candidate_by_id(self) -> dict[str, Document]:
        return {d.id: d for d in self.candidates}

    def validate(self) -> None:
        """Every pool references existing documents and has at least one relevant candidate."""
        qids = {d.id for d in self.queries}
        cids = {d.id for d in self.candidates}
        for name, ids in (("query", [d.id for d in self.queries]), ("candidate", [d.id for d in self.candidates])):
            if len(ids) != len(set(ids)):
                twice = sorted({i for i in ids if ids.count(i) > 1})
                raise PoolSetError(f"duplicate {name} ids in pool set {self.task}: {twice[:3]}")
        if not self.pools:
            raise PoolSetError(f"pool set {self.task} has no evaluation items (pools table is empty)")
        seen: set[str] = set()
        for item in self.pools:
            if item.id in seen:
                raise PoolSetError(f"duplicate pool item id {item.id!r}")
            seen.add(item.id)
            if item.query_id not in qids:
                raise PoolSetError(f"pool item {item.id!r}: unknown query {item.query_id!r}")
            if not cids.issuperset(item.candidate_ids):
                missing = [c for c in item.candidate_ids if c not in cids]
                raise PoolSetError(f"pool item {item.id!r}: unknown candidates {missing[:3]}")
            if len(set(item.candidate_ids)) != len(item.candidate_ids):
                twice = sorted({c for c in item.candidate_ids if item.candidate_ids.count(c) > 1})
                raise PoolSetError(f"pool item {item.id!r}: candidates listed more than once {twice[:3]}")
            if not item.relevant_ids or not set(item.relevant_ids) <= set(item.candidate_ids):
                raise PoolSetError(f"pool item {item.id!r}: relevant ids must be a non-empty subset of its candidates")


def source_fingerprint(path: str | Path, pattern: str = "*") -> str:
    """How a manifest names a source: a file's name and the start of its SHA-256; for a folder, the
    SHA-256 over the relative paths and contents of its files matching `pattern` (recursively)."""
    path = Path(path)
    if not path.is_dir():
        return f"{path.name} sha256:{file_sha256(path).hex()[:16]}"
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob(pattern) if p.is_file())
    for f in files:
        h.update(f.relative_to(path).as_posix().encode() + b"\0" + file_sha256(f))
    kind = "" if pattern == "*" else pattern.lstrip("*") + " "
    return f"{path.name}/ ({len(files)} {kind}files) sha256:{h.hexdigest()[:16]}"


@contextmanager
def build_scratch(out: Path) -> Iterator[Path]:
    """A temporary folder beside `out` for a build's media and intermediate files, removed afterwards.

    Leftovers of killed builds of the same `out` are removed first (only mmbench's own, see scratch.py),
    and `out` is checked now, so a build that could not replace it fails before the work, not after.
    """
    check_replaceable(out)
    clean_stale(out)
    with locked_workdir(out, "scratch") as scratch:
        try:
            yield scratch
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def compute_content_hash(ps: PoolSet) -> str:
    """SHA-256 over the task identity and every record, in a canonical order (by id).

    Records are serialised one at a time, so hashing a pool set of 128K-token documents holds one record's
    JSON beside the documents, not a second copy of every table.
    """
    h = hashlib.sha256()
    h.update(json.dumps({"task": ps.task, "task_version": ps.task_version}, sort_keys=True).encode())
    for table, items in _tables(ps).items():
        h.update(table.encode())
        for item in sorted(items, key=lambda x: x.id):
            h.update(json.dumps(item.to_record(), sort_keys=True, ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()


def _tables(ps: PoolSet) -> dict[str, list[Any]]:
    """The records of each table (documents or pool items), not yet serialised."""
    return {"queries": ps.queries, "candidates": ps.candidates, "pools": ps.pools}


def write_poolset(ps: PoolSet, out: Path, media_from: Path | None = None,
                  extra_manifest: dict[str, Any] | None = None) -> Path:
    """Write `ps` to `out` atomically (a temporary sibling folder renamed into place).

    `media_from` is the media folder the builder wrote into; only referenced files are kept.
    `extra_manifest` (validity report, drop counts) goes into the manifest; it is not hashed.
    """
    ps.validate()
    given, out = Path(out), absolute(out)
    check_replaceable(out)
    clean_stale(out)
    with locked_workdir(out, "building") as tmp:
        try:
            os.chmod(tmp, default_mode(0o777))  # mkdtemp's folder is owner-only; the pool set is renamed from it
            refs = _write_contents(ps, tmp, media_from, extra_manifest)
            _swap_into_place(tmp, out)
            release_lock_file(out)  # moved in with the folder (so it was never lock-less); a kill here leaves
            # only a hidden empty file inside a complete pool set
        except OSError as exc:  # a full disk: nothing of the new pool set stays, the old one (if any) stands
            shutil.rmtree(tmp, ignore_errors=True)
            raise OSError(exc.errno, f"could not write the pool set {out}: {exc.strerror or exc}") from exc
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    log.debug("wrote %s (%d media files)", out, len(refs))
    ps.root = given
    return given


def _write_contents(ps: PoolSet, tmp: Path, media_from: Path | None,
                    extra_manifest: dict[str, Any] | None) -> list[str]:
    """Tables, referenced media and the manifest of `ps`, written into the folder `tmp`."""
    table_digests = {}
    provenance: list[dict[str, Any]] = []   # provenance rows, split off the document tables
    for table, items in _tables(ps).items():
        records = (x.to_record() for x in sorted(items, key=lambda x: x.id))
        if table != "pools" and ps.provenance_columns:
            records = (split_provenance(r, table, ps.provenance_columns, provenance) for r in records)
        table_digests[f"{table}.parquet"] = write_table(records, SCHEMAS[table], tmp / f"{table}.parquet")
    if ps.provenance_columns:
        path = tmp / f"{PROVENANCE_TABLE}.parquet"
        table_digests[path.name] = write_table(iter(provenance), SCHEMAS[PROVENANCE_TABLE], path)
    refs = sorted(_media_refs(ps.queries + ps.candidates))
    if refs:
        if media_from is None:
            raise PoolSetError("documents reference media but no media folder was given")
        for ref in refs:
            src = Path(media_from) / ref
            if not src.is_file():
                raise PoolSetError(f"media file {src} referenced by the pool set does not exist")
            dst = tmp / "media" / ref
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
    ps.manifest = {
        "task": ps.task,
        "task_version": ps.task_version,
        "builder": ps.builder,
        "seed": ps.seed,
        "sources": ps.sources,
        "counts": {"queries": len(ps.queries), "candidates": len(ps.candidates), "pools": len(ps.pools),
                   "media_files": len(refs),
                   "candidates_per_query": _candidates_per_query(ps.pools)},
        "content_hash": compute_content_hash(ps),
        "format": POOLSET_FORMAT,
        **({PROVENANCE_COLUMNS: sorted(ps.provenance_columns)} if ps.provenance_columns else {}),
        **(extra_manifest or {}),
    }
    ps.manifest[TABLE_DIGESTS] = {"files": table_digests, "seal": _seal(ps.manifest, table_digests)}  # not hashed
    atomic_write_bytes(tmp / MANIFEST, (json.dumps(ps.manifest, indent=2, sort_keys=True) + "\n").encode())
    from mmbench.data.dataset_card import write_card  # here: it imports yaml, which loading a pool set does not need

    write_card(tmp, ps.manifest)  # README.md: `datasets.load_dataset(out, "queries")` reads the tables
    return refs


def _merge_provenance(ps: PoolSet, path: Path, raw: bytes) -> None:
    """Put provenance.parquet's columns back into the meta of the documents it names (a row naming no document,
    or a column the manifest does not declare, is a PoolSetError naming the file and the row)."""
    docs = {"queries": ps.query_by_id(), "candidates": ps.candidate_by_id()}
    columns = read_columns(path, raw, ["table", "id", "meta"])
    try:
        metas = parse_json_rows([m or "{}" for m in columns["meta"]])
    except (JSONRowError, TypeError) as exc:
        where = f"row {exc.index}" if isinstance(exc, JSONRowError) else "meta"
        raise PoolSetError(f"{path}: {where}: names no document of the pool set ({exc})") from None
    declared = set(ps.provenance_columns)
    for i, (table, doc_id, apart) in enumerate(zip(columns["table"], columns["id"], metas)):
        try:
            doc = docs[str(table)][str(doc_id)]
        except KeyError as exc:
            raise PoolSetError(f"{path}: row {i}: names no document of the pool set ({exc})") from None
        if not isinstance(apart, dict):
            raise PoolSetError(f"{path}: row {i}: meta is not a JSON object")
        undeclared = sorted(set(apart) - declared)
        if undeclared:
            raise PoolSetError(f"{path}: row {i}: column {undeclared[:1]} is not among the manifest's "
                               f"{PROVENANCE_COLUMNS}")
        doc.meta = {**doc.meta, **apart}


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Rename the finished folder `tmp` to `out`; a previous pool set there is moved aside, then removed.

    `out` is checked again here: it may have changed during the build. A kill between the two renames
    leaves the previous pool set in `.NAME.old.XXXX`, which the next build of `out` removes.
    """
    check_replaceable(out)
    old = None
    if out.exists():
        old = tmp.with_name(tmp.name.replace(".building.", ".old.", 1))
        os.replace(out, old)
    os.replace(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _candidates_per_query(pools: list[PoolItem]) -> float | None:
    return round(sum(len(p.candidate_ids) for p in pools) / len(pools), 4) if pools else None


def _media_refs(docs: Iterable[Document]) -> set[str]:
    return {ref for d in docs for ref in d.media_refs()}


def load_poolset(root: Path, verify: bool = False) -> PoolSet:
    """Read a pool set folder; `verify` recomputes the content hash and checks media files exist."""
    root = Path(root)
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        raise PoolSetError(f"{root} is not a pool set: {MANIFEST} is missing")
    try:
        manifest = json.loads(manifest_path.read_text())
    except ValueError as exc:
        raise PoolSetError(f"{manifest_path}: invalid JSON ({exc})") from exc
    for key in ("task", "task_version", "content_hash"):
        if key not in manifest:
            raise PoolSetError(f"{manifest_path}: missing field {key!r}")
    raw, digests = {}, {}
    declared = tuple(manifest.get(PROVENANCE_COLUMNS) or ())
    for table in (*TABLES, *((PROVENANCE_TABLE,) if declared else ())):
        path = root / f"{table}.parquet"
        if not path.is_file():
            raise PoolSetError(f"pool set {root}: {path.name} is missing")
        raw[table] = path.read_bytes()  # digested and parsed from the same bytes: what is checked is what is scored
        digests[path.name] = "sha256:" + hashlib.sha256(raw[table]).hexdigest()
    # tables that are the bytes the build wrote (their digests sealed with the manifest's claim) hold records
    # the build serialised itself: their segments are decoded when first used; any other table, now
    recorded = manifest.get(TABLE_DIGESTS)
    sealed = isinstance(recorded, dict) and recorded.get("seal") == _seal(manifest, digests)
    if sealed:
        records = {table: _sealed_records(root / f"{table}.parquet", raw.pop(table), table) for table in TABLES}
    else:
        parsers = {"queries": Document.from_record, "candidates": Document.from_record, "pools": PoolItem.from_record}
        records = {table: parse_rows(root / f"{table}.parquet", read_rows(root / f"{table}.parquet", raw.pop(table)),
                                      parsers[table]) for table in TABLES}
    ps = PoolSet(
        task=manifest["task"], task_version=manifest["task_version"],
        queries=records["queries"], candidates=records["candidates"], pools=records["pools"],
        builder=manifest.get("builder", {}), seed=manifest.get("seed", 0),
        sources=manifest.get("sources", {}), root=root, manifest=manifest, table_digests=digests,
        provenance_columns=declared,
    )
    if declared:
        path = root / f"{PROVENANCE_TABLE}.parquet"
        _merge_provenance(ps, path, raw.pop(PROVENANCE_TABLE))
    for table in ("queries", "candidates"):  # each document's content hash, remembered by its table's digest
        remember_hashes(getattr(ps, table), digests[f"{table}.parquet"])
    try:
        ps.validate()  # cheap (id sets): a run never scores against dangling or duplicated references
    except PoolSetError as exc:
        raise PoolSetError(f"pool set {root}: {exc}") from None
    if verify:
        check_content_hash(ps)
        check_media(ps)
    return ps


def _sealed_records(path: Path, raw: bytes, table: str) -> list[Any]:
    """The records of a sealed table (the bytes the build wrote, so its cells have the schema's types), read a
    column at a time; a document's segments stay in the table's bytes (`DeferredText`) until first used."""
    names = SCHEMAS[table].names if table == "pools" else ["id", "tokens", "meta"]
    columns = read_columns(path, raw, names)
    try:
        metas = parse_json_rows([m or "{}" for m in columns["meta"]])
    except JSONRowError as exc:
        raise PoolSetError(f"{path}: row {exc.index}: malformed meta ({exc.reason})") from None
    if table == "pools":
        return [PoolItem(item_id, query_id, subset, candidate_ids, relevant_ids, meta)
                for item_id, query_id, subset, candidate_ids, relevant_ids, meta in zip(
                    columns["id"], columns["query_id"], columns["subset"], columns["candidate_ids"],
                    columns["relevant_ids"], metas)]
    segments = LazyColumn(path, raw, "segments")
    return [RecordDocument.sealed(str(doc_id), int(tokens or 0), meta, DeferredText(segments, i))
            for i, (doc_id, tokens, meta) in enumerate(zip(columns["id"], columns["tokens"], metas))]


def check_media(ps: PoolSet) -> None:
    """Every referenced media file exists inside the pool set and hashes to its content-addressed name."""
    store = ps.media
    for ref in sorted(_media_refs(ps.queries + ps.candidates)):
        if not (store.root / ref).is_file():
            raise PoolSetError(f"pool set {ps.root}: missing media file media/{ref}")
        try:
            store.verify(ref, item="the pool set")
        except MediaError as exc:
            raise PoolSetError(f"pool set {ps.root}: {exc}") from None


def check_media_folder(ps: PoolSet) -> None:
    """Refuse, in one line, a pool set whose media folder is gone while its manifest counts media files (each
    document would otherwise fail on its own, one error per document)."""
    counts = ps.manifest.get("counts")
    wanted = counts.get("media_files") if isinstance(counts, dict) else None
    if ps.root is None or not isinstance(wanted, int) or wanted <= 0 or (Path(ps.root) / "media").is_dir():
        return
    raise PoolSetError(f"pool set {ps.root}: its media folder is missing ({Path(ps.root) / 'media'}; the manifest "
                       f"counts {wanted:,} media files); copy it back or build the pool set again")


def check_integrity(ps: PoolSet, full: bool = False) -> str:
    """Refuse a pool set edited after its build, as cheaply as the manifest allows; returns how it was checked.

    A manifest that records its tables' digests (pool sets built since `table_digests`) is checked against the
    digests of the bytes `load_poolset` parsed: equal digests mean the very bytes the content hash was computed
    from, so the records need not be hashed again. Otherwise (an older pool set, a table rewritten, or `full`)
    the content hash is recomputed from the records; `full` also checks every media file against its name.
    """
    check_media_folder(ps)
    recorded = ps.manifest.get(TABLE_DIGESTS)
    if not full and isinstance(recorded, dict) and ps.table_digests:
        if recorded.get("seal") == _seal(ps.manifest, ps.table_digests):
            return "table digests"
        files = recorded.get("files")
        files = files if isinstance(files, dict) else {}
        changed = sorted(n for n in ps.table_digests if files.get(n) != ps.table_digests[n]) or ["manifest.json"]
        log.info("pool set %s: %s changed since the build; checking the records' content hash",
                 ps.root, ", ".join(changed))
    check_content_hash(ps)
    if full:
        check_media(ps)
        return "content hash and media"
    return "content hash"


def _seal(manifest: dict[str, Any], digests: dict[str, str]) -> str:
    """Binds the tables' digests to the identity the manifest claims for them (task, version, content hash),
    so an edited table, or an edited or copied manifest, is not taken for the pool set that was built."""
    claim = {k: manifest.get(k) for k in ("task", "task_version", "content_hash")}
    return hashlib.sha256(json.dumps({**claim, "files": digests}, sort_keys=True).encode()).hexdigest()


def check_content_hash(ps: PoolSet) -> None:
    """Refuse a pool set whose records no longer hash to its manifest's content hash (edited after the build)."""
    actual = compute_content_hash(ps)
    if actual != ps.manifest.get("content_hash"):
        raise PoolSetError(f"pool set {ps.root}: content hash mismatch (manifest {ps.manifest['content_hash'][:12]}, "
                           f"records {actual[:12]}): its tables were changed after the build; rebuild it")
