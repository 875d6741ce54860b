"""Issue 26 #5: a full disk (ENOSPC, simulated by making one write fail). The embedding cache only saves time:
one warning naming its folder and the run finishes uncached. The results, build and board folders: nothing
partial is left and the error is one line naming the folder."""
from __future__ import annotations

import errno
import logging
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq

from mmbench.cli import main
from mmbench.data import media

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _failing_writes(monkeypatch, when):
    """Every `write_temp_file` whose target satisfies `when(path)` fails as a full disk does (a bare ENOSPC)."""
    real = media.write_temp_file

    def write(path, data):
        if when(Path(path)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, data)

    monkeypatch.setattr(media, "write_temp_file", write)


def _run(vg, out, *extra):
    return main(["run", "--task", "visual_grounding", "--model", "minilm", "--data", str(vg), "--output", str(out),
                 "--quiet", "--limit", "5", *extra])


def test_a_full_cache_disk_warns_once_and_the_run_finishes(vg_tiny, tmp_path, monkeypatch, caplog):
    from mmbench.data.poolset import load_poolset
    from mmbench.running.runner import RunOptions, run_poolset
    from toy_models import HashingModel

    cache = tmp_path / "cache"
    _failing_writes(monkeypatch, lambda p: cache in p.parents)
    with caplog.at_level(logging.WARNING):
        per_query, _, info = run_poolset(load_poolset(vg_tiny), HashingModel(),
                                         RunOptions(cache_dir=cache, progress=False, batch_tokens=512))
    warned = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
    assert len(warned) == 1 and str(cache) in warned[0] and "without caching" in warned[0]
    assert info["n_failed_items"] == 0 and len(per_query) == info["n_items"] and info["encode"]["batches"] > 1
    assert not [p for p in cache.rglob("*") if p.is_file()]


def test_a_full_results_disk_leaves_nothing_and_names_the_folder(vg_tiny, tmp_path, monkeypatch, capsys):
    out = tmp_path / "res"
    _failing_writes(monkeypatch, lambda p: p.name == "results.json")
    assert _run(vg_tiny, out, "--no-cache") == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(out) in err and "No space left on device" in err
    assert not out.exists()  # no table without its results.json, no temporary file, no empty folder
    assert _run(vg_tiny, out, "--no-cache") == 1  # and the next run is not refused for what the first left


def test_a_full_disk_while_rewriting_results_keeps_the_old_ones(vg_tiny, tmp_path, monkeypatch, capsys):
    out = tmp_path / "res"
    assert _run(vg_tiny, out, "--no-cache") == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    _failing_writes(monkeypatch, lambda p: p.name == "mmbench.json")
    assert _run(vg_tiny, out, "--no-cache", "--overwrite", "--seed", "3") == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temporary file, no half rewrite


def test_a_full_disk_during_a_build_leaves_no_folder(tmp_path, monkeypatch, capsys):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pq, "write_table", full)
    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)   # pool-set tables are written a row group at a time
    out = tmp_path / "vg"
    rc = main(["build", "--task", "visual_grounding", "--out", str(out), "--param", "lengths=[256]",
               "--param", "backgrounds=[text]", "--param", "kinds=[text]", "--param", "needles_per_kind=2"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mmbench:")]
    assert rc == 1 and len(err) == 1 and str(out) in err[0] and "No space left" in err[0]
    assert list(tmp_path.iterdir()) == []


def test_a_full_board_disk_adds_nothing(vg_tiny, tmp_path, monkeypatch, capsys):
    from leaderboard_helpers import make_results, official_registry

    official_registry(vg_tiny, tmp_path / "official.json")
    results = make_results(vg_tiny, tmp_path / "good", name="model-f", dim=16)
    board = tmp_path / "board"
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
    rc = main(["leaderboard", "submit", str(results), "--board", str(board), "--official", str(tmp_path / "official.json")])
    monkeypatch.setattr(os, "fsync", real_fsync)
    err = capsys.readouterr().err.strip()
    assert rc == 1 and str(board) in err and len(err.splitlines()) == 1
    assert [p.name for p in board.iterdir() if p.name.startswith(".staging")] == []
    assert not [p for p in (board / "submissions").rglob("*") if p.is_file()]
    assert main(["leaderboard", "submit", str(results), "--board", str(board), "--official",
                 str(tmp_path / "official.json")]) == 0  # the next submit is not blocked by anything left
    shutil.rmtree(board)
