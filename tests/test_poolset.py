import json

import pytest

from mmbench.data.documents import Document, Text, Video
from mmbench.data.media import MediaStore
from mmbench.data.poolset import PoolItem, PoolSet, PoolSetError, load_poolset, write_poolset


def _poolset(tmp_path):
    from PIL import Image as PILImage

    media = MediaStore(tmp_path / "scratch")
    img = media.put_image(PILImage.new("RGB", (40, 30), (200, 10, 10)))
    q = [Document("q1", [Text("red square?")], 3)]
    c = [Document("c1", [Text("a"), img], 5, {"depth": 0.5}),
         Document("c2", [Text("b"), Video((img.ref, img.ref), 1.0, 40, 30)], 7)]
    pools = [PoolItem("i1", "q1", "s", ["c1", "c2"], ["c1"], {"length_bin": "256"})]
    return PoolSet("toy", "1", q, c, pools, builder={"p": 1}, seed=3), media


def test_roundtrip_and_hash(tmp_path):
    ps, media = _poolset(tmp_path)
    out = write_poolset(ps, tmp_path / "ps", media_from=media.root)
    loaded = load_poolset(out, verify=True)
    assert loaded.content_hash == ps.manifest["content_hash"]
    assert [d.to_record() for d in loaded.candidates] == [d.to_record() for d in ps.candidates]
    assert loaded.pools[0].meta == {"length_bin": "256"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"] == {"queries": 1, "candidates": 2, "pools": 1, "media_files": 1,
                                  "candidates_per_query": 2.0}
    # rewriting the same content gives the same hash and the same bytes in the manifest
    ps2, media2 = _poolset(tmp_path / "again")
    out2 = write_poolset(ps2, tmp_path / "ps2", media_from=media2.root)
    assert (out2 / "manifest.json").read_bytes() == (out / "manifest.json").read_bytes()


def test_hash_changes_with_content(tmp_path):
    ps, media = _poolset(tmp_path)
    h1 = write_poolset(ps, tmp_path / "a", media_from=media.root) and ps.manifest["content_hash"]
    ps.candidates[0].segments[0] = Text("changed")
    write_poolset(ps, tmp_path / "b", media_from=media.root)
    assert ps.manifest["content_hash"] != h1


def test_readable_with_datasets(tmp_path):
    from datasets import load_dataset

    ps, media = _poolset(tmp_path)
    out = write_poolset(ps, tmp_path / "ps", media_from=media.root)
    ds = load_dataset("parquet", data_files={"pools": str(out / "pools.parquet")}, split="pools")
    assert ds[0]["candidate_ids"] == ["c1", "c2"]
    assert json.loads(ds[0]["meta"]) == {"length_bin": "256"}


def test_errors_name_the_problem(tmp_path):
    ps, media = _poolset(tmp_path)
    out = write_poolset(ps, tmp_path / "ps", media_from=media.root)
    (out / "pools.parquet").unlink()
    with pytest.raises(PoolSetError, match="pools.parquet is missing"):
        load_poolset(out)
    with pytest.raises(PoolSetError, match="manifest.json is missing"):
        load_poolset(tmp_path)
    ps.pools.append(PoolItem("i2", "q1", "s", ["c1", "nope"], ["c1"]))
    with pytest.raises(PoolSetError, match="i2.*unknown candidates"):
        write_poolset(ps, tmp_path / "bad", media_from=media.root)
    assert not (tmp_path / "bad").exists()  # nothing partial is left


def test_verify_detects_tampering_and_missing_media(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    ps, media = _poolset(tmp_path)
    out = write_poolset(ps, tmp_path / "ps", media_from=media.root)
    rows = pq.read_table(out / "queries.parquet").to_pylist()
    rows[0]["segments"] = json.dumps([{"kind": "text", "text": "tampered"}])
    pq.write_table(pa.Table.from_pylist(rows), out / "queries.parquet")
    with pytest.raises(PoolSetError, match="content hash mismatch"):
        load_poolset(out, verify=True)
    out = write_poolset(ps, tmp_path / "ps2", media_from=media.root)
    next((out / "media").rglob("*.png")).unlink()
    with pytest.raises(PoolSetError, match="missing media file"):
        load_poolset(out, verify=True)


def test_media_refs_cannot_escape(tmp_path):
    from mmbench.data.media import MediaError

    with pytest.raises(MediaError, match="escapes"):
        MediaStore(tmp_path).path("../etc/passwd")


def test_written_files_get_the_usual_permissions_not_owner_only(tmp_path):
    """A pool set, its manifest and a run's results are readable by others under a 022 umask."""
    import os
    import stat

    import pandas as pd

    from mmbench.results.store import write_results

    old = os.umask(0o022)
    try:
        ps, media = _poolset(tmp_path)
        out = write_poolset(ps, tmp_path / "ps", media_from=media.root)
        res = write_results(tmp_path / "res", pd.DataFrame({"a": [1]}), pd.DataFrame({"b": [2]}), {"x": 1})
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(out) == 0o755
    for path in [out / "manifest.json", *out.glob("*.parquet"), *(out / "media").rglob("*.png"), *res.iterdir()]:
        assert mode(path) == 0o644, path


def _rewrite(path, change):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = change(pq.read_table(path).to_pylist())
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path) if rows else None), path)


@pytest.mark.parametrize("table,change,needle", [
    ("candidates", lambda rows: [{**rows[0], "segments": "{not json"}, *rows[1:]], "candidates.parquet: row 0: document 'c1'"),
    ("queries", lambda rows: [{**rows[0], "segments": json.dumps(["hello"])}], "queries.parquet: row 0: .*segment 0 must be an object"),
    ("pools", lambda rows: [{**rows[0], "candidate_ids": ["c1", "c2", "c1"]}], "'i1': candidates listed more than once \\['c1'\\]"),
    ("pools", lambda rows: [], "no evaluation items"),
])
def test_malformed_tables_are_pool_set_errors_naming_file_and_row(tmp_path, table, change, needle):
    """Loading (not only verifying) refuses a broken record with a message that says where it is."""
    ps, media = _poolset(tmp_path)
    out = write_poolset(ps, tmp_path / "ps", media_from=media.root)
    _rewrite(out / f"{table}.parquet", change)
    with pytest.raises(PoolSetError, match=needle):
        load_poolset(out)


def test_a_table_without_its_id_column_is_named(tmp_path):
    import pyarrow.parquet as pq

    ps, media = _poolset(tmp_path)
    out = write_poolset(ps, tmp_path / "ps", media_from=media.root)
    pq.write_table(pq.read_table(out / "candidates.parquet").drop(["id"]), out / "candidates.parquet")
    with pytest.raises(PoolSetError, match="candidates.parquet: row 0: missing field 'id'"):
        load_poolset(out)


def test_source_fingerprint_of_files_and_folders(tmp_path):
    from mmbench.data.poolset import source_fingerprint

    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "a.json").write_text("{}")
    (tmp_path / "src" / "sub" / "b.json").write_text("[]")
    (tmp_path / "src" / "notes.txt").write_text("x")
    assert source_fingerprint(tmp_path / "src" / "a.json").startswith("a.json sha256:")
    before = source_fingerprint(tmp_path / "src", "*.json")
    assert before.startswith("src/ (2 .json files) sha256:")
    (tmp_path / "src" / "notes.txt").write_text("y")  # not matched by the pattern
    assert source_fingerprint(tmp_path / "src", "*.json") == before
    assert source_fingerprint(tmp_path / "src").startswith("src/ (3 files) sha256:")
    (tmp_path / "src" / "sub" / "b.json").write_text("[1]")
    changed = source_fingerprint(tmp_path / "src", "*.json")
    (tmp_path / "src" / "sub" / "b.json").rename(tmp_path / "src" / "c.json")
    assert len({before, changed, source_fingerprint(tmp_path / "src", "*.json")}) == 3
