"""Decompression bombs: Parquet files that are small on disk but huge once decoded are refused from their
metadata, before reading (or while reading, when the metadata understates them), with one line naming the
file and the limit."""
from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from leaderboard_helpers import edit_summary, make_results, official_registry
from mmbench.cli import main
from mmbench.leaderboards.files import Limits, read_parquet
from mmbench.leaderboards.problems import SubmissionRejected
from mmbench.leaderboards.schema import validate_submission


def _bomb(rows_per_group: int, groups: int) -> bytes:
    """Run-length-encoded zeros: ~7 KB per million rows on disk, ~40 MB per million rows once read."""
    batch = pa.table({"item_id": pa.array(["x"] * rows_per_group), "precision_at_1": pa.array(np.zeros(rows_per_group))})
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, batch.schema, compression="zstd") as writer:
        for _ in range(groups):
            writer.write_table(batch)
    return sink.getvalue()


@pytest.fixture(scope="module")
def setup(vg_tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("lblimits")
    registry = official_registry(vg_tiny, root / "official.json")
    return registry, make_results(vg_tiny, root / "good", name="model-l", dim=16), root / "official.json"


def _reason(exc: SubmissionRejected, field: str) -> str:
    return next(p.reason for p in exc.problems if p.field == field)


def test_a_bomb_is_refused_from_its_metadata_before_reading(setup, tmp_path, monkeypatch, capsys):
    registry, good, official = setup
    data = _bomb(500_000, 4)                                 # 2 million rows in a few KB
    assert len(data) < 64 * 1024
    folder = Path(shutil.copytree(good, tmp_path / "bomb"))
    (folder / "per_query.parquet").write_bytes(data)
    edit_summary(folder, lambda s: s["mmbench"]["files"].update(
        {"per_query.parquet": __import__("hashlib").sha256(data).hexdigest()}))
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", lambda *a, **k: pytest.fail("decoded before the check"))
    with pytest.raises(SubmissionRejected) as info:
        validate_submission(folder, registry)
    assert _reason(info.value, "file per_query.parquet") == ("has rows: 2000000, over the limit of 1000000; "
                                                             "refused before reading it")
    assert main(["leaderboard", "submit", str(folder), "--board", str(tmp_path / "b"), "--official", str(official)]) == 2
    err = capsys.readouterr().err
    assert "file per_query.parquet: has rows: 2000000, over the limit of 1000000" in err


@pytest.mark.parametrize("limits, says", [
    (Limits(max_values=100_000), "holds values (list elements included): 400000, over the limit of 100000"),
    (Limits(max_uncompressed_bytes=1000), "states an uncompressed size of (bytes)"),
    (Limits(max_row_groups=3), "has row groups: 4, over the limit of 3"),
    (Limits(max_columns=1), "has columns: 2, over the limit of 1"),
])
def test_each_metadata_limit_is_checked(limits, says):
    with pytest.raises(SubmissionRejected) as info:
        read_parquet(_bomb(50_000, 4), "per_query.parquet", limits)
    assert says in _reason(info.value, "file per_query.parquet")


def test_contents_beyond_what_the_metadata_states_are_caught_while_reading():
    # metadata within its limits, decoded size over the (here tight) budget: counted batch by batch
    limits = Limits(max_decoded_bytes=1_000_000, read_batch_rows=10_000)
    with pytest.raises(SubmissionRejected) as info:
        read_parquet(_bomb(50_000, 4), "seen.parquet", limits)
    assert "decodes to more than 1000000 bytes" in _reason(info.value, "file seen.parquet")


def test_a_huge_footer_is_refused_before_parsing():
    data = bytearray(_bomb(10, 1))
    data[-8:-4] = (2 ** 31 - 1).to_bytes(4, "little")
    with pytest.raises(SubmissionRejected) as info:
        read_parquet(bytes(data), "per_query.parquet", Limits())
    assert "footer" in _reason(info.value, "file per_query.parquet")


def test_honest_tables_read_as_before(setup):
    _, good, _ = setup
    data = (good / "per_query.parquet").read_bytes()
    ours = read_parquet(data, "per_query.parquet", Limits(read_batch_rows=7))    # many small batches
    assert ours.equals(pq.read_table(pa.BufferReader(data)).to_pandas())


def test_a_small_file_of_repeated_long_strings_is_refused_in_bounded_memory():
    """Issue 26 #4: a few KB whose one long string repeats on every row (a dictionary page, without the Arrow
    schema) decoded batch by batch up to the 1 GiB budget: ~3.6 GB of memory and ~19 s before the refusal.
    Text columns are now measured as dictionaries; the refusal comes before any of them is expanded.
    (Its time, against an honest read: perf/parquet_refusal.py.)"""
    import resource

    n = 4000
    junk = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array(["x" * (512 << 10)]))
    sink = io.BytesIO()
    pq.write_table(pa.table({"item_id": pa.array([f"i{i}" for i in range(n)]), "junk": junk}), sink,
                   compression="zstd", store_schema=False)
    data = sink.getvalue()
    assert len(data) < 32 * 1024
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(SubmissionRejected, match="decodes to more than 1073741824 bytes"):
        read_parquet(data, "per_query.parquet", Limits())
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 300 * 1024  # KiB: under 300 MB more


def test_text_columns_read_back_in_their_declared_types():
    table = pa.table({"item_id": ["a", "b", None], "blob": pa.array([b"x", b"yy", b"x"]), "n": [1, 2, 3]})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    frame = read_parquet(sink.getvalue(), "t.parquet", Limits())
    pd.testing.assert_frame_equal(frame, table.to_pandas())
