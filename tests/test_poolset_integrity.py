"""A run checks a pool set from its tables' recorded digests; edits are still caught, and `--verify` checks all.

The tables are digested from the very bytes `load_poolset` parses, so no file stamp (size, mtime) is trusted:
an edit of one byte that keeps the size and the modification time is caught like any other.
"""
from __future__ import annotations

import json
import os
import shutil

import pyarrow.parquet as pq
import pytest

from mmbench.data import poolset as poolset_module
from mmbench.cli import main
from mmbench.data.poolset import PoolSetError, check_integrity, compute_content_hash, load_poolset


@pytest.fixture
def copy(vg_small, tmp_path):
    out = tmp_path / "ps"
    shutil.copytree(vg_small, out)
    return out


def _keep_stamp(path, edit):
    """Apply `edit` to the file and give it back its size check and its modification time."""
    st = path.stat()
    edit(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return st


def _flip(offset_fraction):
    def edit(path):
        data = bytearray(path.read_bytes())
        data[int(len(data) * offset_fraction)] ^= 0x20
        path.write_bytes(bytes(data))
    return edit


def test_built_manifest_records_table_digests_outside_the_content_hash(copy):
    manifest = json.loads((copy / "manifest.json").read_text())
    files = manifest["table_digests"]["files"]
    assert sorted(files) == ["candidates.parquet", "pools.parquet", "provenance.parquet", "queries.parquet"]
    assert all(v.startswith("sha256:") and len(v) == 71 for v in files.values())
    ps = load_poolset(copy)
    assert compute_content_hash(ps) == manifest["content_hash"]  # the digests are not part of it


def test_unchanged_tables_are_not_hashed_again(copy, monkeypatch):
    ps = load_poolset(copy)
    monkeypatch.setattr(poolset_module, "compute_content_hash", lambda ps: pytest.fail("records hashed again"))
    assert check_integrity(ps) == "table digests"


@pytest.mark.parametrize("table", ["candidates.parquet", "pools.parquet", "provenance.parquet", "queries.parquet"])
def test_one_byte_edited_same_size_same_mtime_is_caught(copy, table):
    path = copy / table
    st = _keep_stamp(path, _flip(0.5))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    try:
        ps = load_poolset(copy)
        how = check_integrity(ps)
    except PoolSetError as exc:  # unreadable, or records that no longer hash to the manifest's content hash
        # or a record the flipped byte made invalid, refused by name (a pool item whose label left its pool)
        assert table in str(exc) or "content hash mismatch" in str(exc) or "pool item '" in str(exc)
        return
    # the byte was one the records do not depend on (page statistics, say): noticed, and the records proven equal
    assert how == "content hash" and compute_content_hash(ps) == ps.manifest["content_hash"]


def test_an_edited_record_is_caught_by_the_content_hash(copy):
    path = copy / "candidates.parquet"
    table = pq.read_table(path).to_pylist()
    table[0]["tokens"] += 1
    _keep_stamp(path, lambda p: pq.write_table(pq.read_table(p).from_pylist(table, schema=pq.read_schema(p)), p,
                                              compression="zstd"))
    with pytest.raises(PoolSetError, match="content hash mismatch"):
        check_integrity(load_poolset(copy))


def test_tables_rewritten_with_the_same_records_still_load(copy):
    path = copy / "pools.parquet"
    pq.write_table(pq.read_table(path), path, compression="snappy")  # other bytes, same records
    assert check_integrity(load_poolset(copy)) == "content hash"


def test_an_edited_manifest_is_caught(copy):
    manifest = json.loads((copy / "manifest.json").read_text())
    for field, value in (("content_hash", "0" * 64), ("task_version", "9.9")):
        (copy / "manifest.json").write_text(json.dumps({**manifest, field: value}))
        with pytest.raises(PoolSetError, match="content hash mismatch"):
            check_integrity(load_poolset(copy))


def test_pool_sets_built_before_table_digests_get_the_full_check(copy, monkeypatch):
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["table_digests"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert check_integrity(load_poolset(copy)) == "content hash"
    _keep_stamp(copy / "candidates.parquet", _flip(0.5))
    with pytest.raises(PoolSetError):
        check_integrity(load_poolset(copy))


def test_media_edited_same_size_same_mtime_is_caught_by_verify(copy, capsys):
    ps = load_poolset(copy)
    ref = sorted((copy / "media").rglob("*.*"))[0]
    _keep_stamp(ref, _flip(0.6))
    # a run that reads no media does not look at it (its vectors are of the bytes the name is the digest of) ...
    assert check_integrity(load_poolset(copy)) == "table digests"
    # ... --verify (and mmbench validate) checks every media file against its name
    with pytest.raises(PoolSetError, match=ref.name[:12]):
        check_integrity(load_poolset(copy), full=True)
    code = main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(copy), "--verify", "--quiet",
                 "--output", str(copy.parent / "out")])
    assert code == 2 and ref.name[:12] in capsys.readouterr().err
    assert not (copy.parent / "out").exists()
    assert ps.content_hash == load_poolset(copy).content_hash


def test_sealed_tables_decode_segments_only_when_used(copy, tmp_path):
    """A warm run needs ids and content hashes, not the segments (most of a table's bytes)."""
    from mmbench.data.documents import Document, RecordDocument
    from mmbench.running.lazy_model import LazyModel, load_model_lazily
    from mmbench.running.runner import RunOptions, run_poolset
    from toy_models import HashingModel

    options = RunOptions(cache_dir=tmp_path / "cache", progress=False)
    cold_ps = load_poolset(copy)
    cold, _, _ = run_poolset(cold_ps, load_model_lazily("h", {}, tmp_path, lambda n, o: HashingModel()), options)
    ps = load_poolset(copy)
    docs = ps.queries + ps.candidates
    assert all(isinstance(d, RecordDocument) and "_raw" in d.__dict__ for d in docs)
    lazy = load_model_lazily("h", {}, tmp_path, lambda n, o: HashingModel())
    warm, _, info = run_poolset(ps, lazy, options)
    assert isinstance(lazy, LazyModel) and info["encode"]["encoded"] == 0
    assert all("_raw" in d.__dict__ for d in docs)  # never decoded
    assert warm.equals(cold)
    plain = [Document.from_record(d.to_record()) for d in docs[:20]]  # decoded now: equal to plain documents
    assert plain == docs[:20] and [d.content_hash() for d in plain] == [d.content_hash() for d in docs[:20]]
    # without the seal (an older pool set), documents are decoded, and checked, at load
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["table_digests"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert all(type(d) is Document for d in load_poolset(copy).candidates)


def test_a_sealed_tables_segments_stay_compressed_until_first_used(copy):
    """Issue 38: decompressing the segments column was most of a warm load; it is read on first use, once per
    table, and a document pickled (for a worker) carries its own segments' text, not its table's bytes."""
    import pickle

    from mmbench.data.documents import DeferredText, Document
    from mmbench.data.poolset_tables import read_rows

    load_poolset(copy)  # the first load hashes the documents (decoding them) and remembers the hashes
    docs = load_poolset(copy).candidates
    column = docs[0].__dict__["_raw"]._source
    assert all(isinstance(d.__dict__["_raw"], DeferredText) for d in docs) and column._values is None
    rows = list(read_rows(copy / "candidates.parquet", (copy / "candidates.parquet").read_bytes()))
    sent = pickle.loads(pickle.dumps(docs[1]))
    assert sent.__dict__["_raw"] == rows[1]["segments"] and len(pickle.dumps(docs[1])) < len(rows[1]["segments"]) + 4096
    assert docs[3].segments == Document.from_record(rows[3]).segments and column._values is not None  # read once, whole
    assert all(d.__dict__["_raw"]._source is column for d in docs[4:])


def test_segments_decoded_by_many_threads_at_once_are_decoded_once_and_whole(copy):
    """LLM rankers read documents from several threads; the first reads of a sealed table's documents once raced
    (KeyError '_raw' for a document whose segments another thread was decoding, a failed ranking item)."""
    from concurrent.futures import ThreadPoolExecutor

    from mmbench.data.documents import Document
    from mmbench.data.poolset_tables import read_rows

    load_poolset(copy)
    docs = load_poolset(copy).candidates
    rows = list(read_rows(copy / "candidates.parquet", (copy / "candidates.parquet").read_bytes()))
    want = [Document.from_record(r).segments for r in rows]
    for _ in range(3):
        fresh = load_poolset(copy).candidates
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda d: d.segments, fresh + fresh))
        assert got == want + want
    assert [d.segments for d in docs] == want
