"""The embedding cache: entries verified on read, damaged ones set aside and re-encoded; a local model's
cache identity follows the contents of its weights, not their sizes."""
from __future__ import annotations

import json
import logging
import os
import shutil
import struct

import numpy as np
import pandas as pd
import pytest

from mmbench.data import digests
from mmbench.data import embedding_cache as cache_module
from mmbench.data.embedding_cache import CacheRow, EmbeddingCache
from mmbench.models.hf_common import folder_revision
from mmbench.models.sentence_transformer import packaged_minilm_path
from mmbench.data.poolset import load_poolset
from mmbench.running.runner import RunOptions, run_poolset

from toy_models import HashingModel


# --- item 4: verified entries (one pack file per stored batch) ---------------------------------------------

def _entry(tmp_path):
    cache = EmbeddingCache(tmp_path / "c", "m")
    vec = np.arange(8, dtype=np.float32)
    [path] = cache.put_many("document", [CacheRow("ab" * 32, vec, {"seen_tokens": 3}, {"view_hash": "v"})])
    [other] = cache.put_many("document", [CacheRow("cd" * 32, vec + 1, {"seen_tokens": 4})])
    return cache, path, other, vec


def _truncate(path, other=None):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip_vector_byte(path, other=None):
    data = bytearray(path.read_bytes())
    i = data.index(struct.pack("<f", 5.0))  # inside the stored vector
    data[i] ^= 0x01
    path.write_bytes(bytes(data))


def _copy_other_over(path, other):
    shutil.copyfile(other, path)


@pytest.mark.parametrize("damage", [_truncate, _flip_vector_byte, _copy_other_over, lambda p, o: p.write_bytes(b"")],
                         ids=["truncated", "flipped-byte", "other-pack", "empty"])
def test_damaged_pack_is_named_set_aside_and_missed(tmp_path, caplog, damage):
    cache, path, other, vec = _entry(tmp_path)
    got = cache.get_entry("document", "ab" * 32)
    assert np.array_equal(got.vector, vec) and got.seen == {"seen_tokens": 3} and got.meta == {"view_hash": "v"}
    damage(path, other)
    with caplog.at_level(logging.WARNING, logger="mmbench.data.embedding_cache"):
        assert cache.get("document", "ab" * 32) is None
    assert str(path) in caplog.text and "damaged embedding cache pack" in caplog.text
    assert not path.exists() and path.with_name(path.name + ".corrupt").is_file()  # renamed, not deleted
    assert cache.set_aside == [path]
    assert cache.get("document", "cd" * 32) is not None  # the others are untouched
    assert EmbeddingCache(tmp_path / "c", "m").get("document", "ab" * 32) is None  # a new reader: a miss
    cache.put("document", "ab" * 32, vec, {"seen_tokens": 3}, {"view_hash": "v"})
    path.write_bytes(b"damaged again")
    assert EmbeddingCache(tmp_path / "c", "m").get("document", "ab" * 32) is None
    assert path.with_name(path.name + ".corrupt").is_file() and path.with_name(path.name + ".corrupt2").is_file()


def test_a_damaged_row_is_named_by_row_and_hash(tmp_path, caplog):
    """A pack whose bytes still match its name but whose row does not verify (written for another role)."""
    cache = EmbeddingCache(tmp_path / "c", "m")
    rows = [CacheRow(f"{i:02d}" * 32, np.full(4, i, dtype=np.float32), {"seen_tokens": i}) for i in range(3)]
    [path] = cache.put_many("document", rows)
    moved = tmp_path / "c" / "m" / "query" / "packs" / path.name
    moved.parent.mkdir(parents=True)
    shutil.copyfile(path, moved)  # a query reader must not take document vectors
    with caplog.at_level(logging.WARNING, logger="mmbench.data.embedding_cache"):
        assert EmbeddingCache(tmp_path / "c", "m").get_many("query", [r.content_hash for r in rows]) == {}
    assert str(moved) in caplog.text and "row 0 (000000000000)" in caplog.text
    assert moved.with_name(moved.name + ".corrupt").is_file()
    got = EmbeddingCache(tmp_path / "c", "m").get_many("document", [r.content_hash for r in rows])
    assert sorted(got) == [r.content_hash for r in rows] and got["02" * 32].seen == {"seen_tokens": 2}


def test_the_index_is_a_hint_rebuilt_from_the_packs(tmp_path, caplog):
    cache = EmbeddingCache(tmp_path / "c", "m")
    for i in range(3):
        cache.put("document", f"{i:02d}" * 32, np.full(4, i, dtype=np.float32), {"seen_tokens": i})
    index = tmp_path / "c" / "m" / "document" / "index.json"
    hashes = [f"{i:02d}" * 32 for i in range(3)]
    assert sorted(EmbeddingCache(tmp_path / "c", "m").get_many("document", hashes)) == hashes  # packs not yet listed
    assert index.is_file() and len(json.loads(index.read_text())["packs"]) == 3  # written by that reader
    for damage in (lambda: index.write_text("{not json"), lambda: index.unlink(),
                   lambda: index.write_text(json.dumps({"format": cache_module.INDEX_FORMAT, "packs": {}}))):
        damage()
        with caplog.at_level(logging.WARNING, logger="mmbench.data.embedding_cache"):
            got = EmbeddingCache(tmp_path / "c", "m").get_many("document", hashes)
        assert sorted(got) == hashes and got["01" * 32].seen == {"seen_tokens": 1}
    # an index listing a pack that is gone, and pointing a hash to the wrong pack: still only verified hits
    packs = json.loads(index.read_text())["packs"]
    names = sorted(packs)
    wrong = {names[0]: packs[names[1]], names[1]: packs[names[0]], "f" * 32: ["ff" * 32]}
    index.write_text(json.dumps({"format": cache_module.INDEX_FORMAT, "packs": {**wrong, names[2]: packs[names[2]]}}))
    got = EmbeddingCache(tmp_path / "c", "m").get_many("document", hashes + ["ff" * 32])
    assert sorted(got) == packs[names[2]]  # the swapped hashes are misses (encoded again), never wrong vectors
    assert all(entry.vector[0] == int(h[:2]) for h, entry in got.items())
    assert sorted(EmbeddingCache(tmp_path / "c", "m").get_many("document", hashes)) == hashes  # corrected by then
    index.unlink()  # rebuilt from the packs' own hash lists
    assert sorted(EmbeddingCache(tmp_path / "c", "m").get_many("document", hashes)) == hashes


def test_per_document_entries_of_the_earlier_layout_are_still_read(tmp_path, caplog):
    cache = EmbeddingCache(tmp_path / "c", "m")
    vec = np.arange(4, dtype=np.float32)
    cache_module.write_entry(cache._path("document", "ab" * 32), "document", "ab" * 32, vec, {"seen_tokens": 2},
                             {"view_hash": "v"})
    got = cache.get_entry("document", "ab" * 32)
    assert np.array_equal(got.vector, vec) and got.seen == {"seen_tokens": 2} and got.meta == {"view_hash": "v"}
    cache._path("document", "ab" * 32).write_bytes(b"PK\x03\x04 not a zip")
    with caplog.at_level(logging.WARNING, logger="mmbench.data.embedding_cache"):
        assert EmbeddingCache(tmp_path / "c", "m").get_entry("document", "ab" * 32) is None
    assert "damaged embedding cache entry" in caplog.text


def _writer(root, start, queue):  # a separate process writing packs into the shared folder
    cache = EmbeddingCache(root, "m")
    for b in range(start, start + 20):
        cache.put_many("document", [CacheRow(f"{b:03d}{i:061d}", np.full(8, b * 10 + i, dtype=np.float32),
                                             {"seen_tokens": i}) for i in range(5)])
        cache.save_index("document")
    queue.put(start)


def test_concurrent_writers_never_corrupt_each_other(tmp_path):
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    # three processes, two of them writing the same batches (same pack names), all rewriting index.json
    procs = [ctx.Process(target=_writer, args=(tmp_path / "c", start, queue)) for start in (0, 0, 20)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    hashes = [f"{b:03d}{i:061d}" for b in range(40) for i in range(5)]
    cache = EmbeddingCache(tmp_path / "c", "m")
    got = cache.get_many("document", hashes)
    assert sorted(got) == hashes and cache.set_aside == []
    assert all(got[h].vector[0] == int(h[:3]) * 10 + int(h[3:]) for h in hashes)
    assert len(cache.pack_paths("document")) == 40
    assert not [p for p in (tmp_path / "c").rglob("*") if p.name.endswith(".tmp")]


def test_a_run_over_a_damaged_pack_reencodes_it_and_scores_the_same(vg_tiny, tmp_path, caplog):
    ps = load_poolset(vg_tiny)
    opts = RunOptions(progress=False, cache_dir=tmp_path / "cache", batch_tokens=1024)
    first, _, _ = run_poolset(ps, HashingModel(), opts)
    entries = sorted((tmp_path / "cache").rglob("packs/*.npz"))
    assert len(entries) >= 8
    _truncate(entries[3])
    entries[7].write_bytes(b"PK\x03\x04 not a zip")
    with caplog.at_level(logging.WARNING, logger="mmbench.data.embedding_cache"):
        again, _, info = run_poolset(ps, HashingModel(), opts)
    assert str(entries[3]) in caplog.text and str(entries[7]) in caplog.text
    assert info["encode"]["cache_set_aside"] == 2 and info["n_failed_items"] == 0
    assert 0 < info["encode"]["encoded"] < info["encode"]["documents"]  # only the set-aside packs' batches
    assert list(again["ranked_ids"].map(list)) == list(first["ranked_ids"].map(list))
    assert entries[3].is_file() and entries[7].is_file()  # written again (the same batch: the same bytes)
    third, _, info3 = run_poolset(ps, HashingModel(), opts)
    assert info3["encode"]["cache_set_aside"] == 0 and info3["encode"]["encoded"] == 0


# --- item 2: a local model's revision follows its weights' contents ------------------------------------------

def _fake_model(folder, weights: bytes):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"hidden_size": 4}))
    (folder / "model.safetensors").write_bytes(weights)
    (folder / ".git").mkdir(exist_ok=True)
    (folder / ".git" / "HEAD").write_text("ref")  # hidden: not part of the revision


def test_weights_saved_over_old_ones_give_a_new_revision(tmp_path):
    model = tmp_path / "model"
    _fake_model(model, b"\x01" * 4096)
    before = folder_revision(str(model))
    st = (model / "model.safetensors").stat()
    (model / "model.safetensors").write_bytes(b"\x02" * 4096)  # same size
    os.utime(model / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns))  # even the same mtime
    after = folder_revision(str(model))
    assert after != before and after.startswith("local-")
    (model / ".git" / "HEAD").write_text("other")
    assert folder_revision(str(model)) == after
    _fake_model(tmp_path / "copy", b"\x02" * 4096)
    assert folder_revision(str(tmp_path / "copy")) == after  # contents, not location or time


def test_digests_are_memoised_by_stat(tmp_path, monkeypatch):
    model = tmp_path / "model"
    _fake_model(model, b"\x03" * 1000)
    reads = []
    real = digests.sha256_file
    monkeypatch.setattr(digests, "sha256_file", lambda p: reads.append(os.path.basename(p)) or real(p))
    first = folder_revision(str(model))
    assert sorted(reads) == ["config.json", "model.safetensors"]
    reads.clear()
    assert folder_revision(str(model)) == first and reads == []  # unchanged files are not read again
    digests._loaded_from = None  # a new process: the memo comes back from MMBENCH_HOME
    assert folder_revision(str(model)) == first and reads == []
    (model / "config.json").write_text(json.dumps({"hidden_size": 5}))
    assert folder_revision(str(model)) != first and reads == ["config.json"]


def _permute_word_embeddings(model_dir):
    """Retrain, in effect: shuffle the rows of the word-embedding matrix in place (same file size)."""
    path = model_dir / "model.safetensors"
    data = bytearray(path.read_bytes())
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    name = next(k for k in header if k.endswith("word_embeddings.weight"))
    start, end = (8 + n + o for o in header[name]["data_offsets"])
    rows, dim = header[name]["shape"]
    mat = np.frombuffer(bytes(data[start:end]), dtype=np.float32).reshape(rows, dim)
    data[start:end] = mat[np.random.default_rng(0).permutation(rows)].tobytes()
    st = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.skipif(packaged_minilm_path() is None, reason="needs the packaged MiniLM weights")
def test_retrained_local_model_is_not_scored_from_old_vectors(vg_tiny, tmp_path):
    from mmbench.models.registry import load_model

    model_dir = tmp_path / "minilm"
    shutil.copytree(packaged_minilm_path(), model_dir)
    ps = load_poolset(vg_tiny)
    opts = RunOptions(progress=False, cache_dir=tmp_path / "cache", limit=20)
    old, _, _ = run_poolset(ps, load_model(str(model_dir)), opts)
    _permute_word_embeddings(model_dir)
    retrained = load_model(str(model_dir))
    cached, _, info = run_poolset(ps, retrained, opts)
    fresh, _, _ = run_poolset(ps, retrained, RunOptions(progress=False, use_cache=False, limit=20))
    assert info["encode"]["cache_hits"] == 0
    assert list(cached["ranked_ids"].map(list)) == list(fresh["ranked_ids"].map(list))
    assert list(cached["ranked_ids"].map(list)) != list(old["ranked_ids"].map(list))


# --- item 11: loading options of sentence-transformers models are applied, not dropped ---------------------

@pytest.mark.skipif(packaged_minilm_path() is None, reason="needs the packaged MiniLM weights")
def test_sentence_transformer_options_are_applied_or_refused():
    import torch

    from mmbench.running.model_loading import ModelUnavailable, load_model_explained

    plain = load_model_explained("minilm", {})
    half = load_model_explained("minilm", {"dtype": "bfloat16", "attn_implementation": "eager"})
    assert next(half._model.parameters()).dtype == torch.bfloat16
    assert half._model[0].auto_model.config._attn_implementation == "eager"
    assert half.card.settings["dtype"] == "bfloat16" and plain.card.settings["dtype"] == "float32"
    from mmbench.data.embedding_cache import model_key

    assert model_key(half.card.identity()) != model_key(plain.card.identity())  # other vectors, other cache
    with pytest.raises(ValueError, match="unknown dtype 'float64'"):
        load_model_explained("minilm", {"dtype": "float64"})
    with pytest.raises(ModelUnavailable, match="unexpected keyword argument 'colour'"):
        load_model_explained("minilm", {"colour": "blue"})  # no option is swallowed silently
    with pytest.raises(ModelUnavailable, match="is not a folder"):
        load_model_explained("minilm", {"model_path": "/nonexistent/minilm"})


def test_hub_id_revision_is_the_cached_snapshot_commit(tmp_path):
    repo = tmp_path / "models--org--embedder"
    for commit in ("a" * 40, "b" * 40):
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    assert folder_revision("org/embedder", hub_cache=tmp_path) == "a" * 40
    (repo / "refs" / "main").write_text("b" * 40)  # the snapshot was updated
    assert folder_revision("org/embedder", hub_cache=tmp_path) == "b" * 40
    assert folder_revision("org/not-downloaded", hub_cache=tmp_path) == "main"


@pytest.mark.skipif(packaged_minilm_path() is None, reason="needs the packaged MiniLM weights")
def test_a_local_folder_is_named_by_its_contents_even_with_a_revision_given(tmp_path):
    from mmbench.models.sentence_transformer import SentenceTransformerModel

    model = SentenceTransformerModel(str(packaged_minilm_path()), revision="v1")
    assert model.card.revision == folder_revision(str(packaged_minilm_path()))


def test_a_cache_of_per_document_entries_serves_a_warm_run(vg_tiny, tmp_path):
    """A cache written before packs (one .npz per document) is still read: nothing is encoded again."""
    ps = load_poolset(vg_tiny)
    opts = RunOptions(progress=False, cache_dir=tmp_path / "cache", batch_tokens=1024)
    first, _, _ = run_poolset(ps, HashingModel(), opts)
    [model_dir] = (tmp_path / "cache").iterdir()
    cache = EmbeddingCache(tmp_path / "cache", model_dir.name)
    for role in ("document", "query"):
        for pack in cache.pack_paths(role):
            for h, entry in cache_module.read_pack(pack, role).items():
                cache_module.write_entry(cache._path(role, h), role, h, entry.vector, entry.seen, entry.meta)
        shutil.rmtree(model_dir / role / "packs")
        (model_dir / role / "index.json").unlink()
    again, _, info = run_poolset(load_poolset(vg_tiny), HashingModel(), opts)
    assert info["encode"]["encoded"] == 0 and info["encode"]["cache_hits"] == info["encode"]["documents"]
    pd.testing.assert_frame_equal(again, first)
