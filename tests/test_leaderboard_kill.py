"""A `leaderboard submit` killed (SIGKILL) between any two of its steps leaves nothing that breaks the
next submit: the board keeps exactly its committed submissions, and the leftovers are removed."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from leaderboard_helpers import make_results, official_registry
from mmbench.cli import main
from mmbench.leaderboards.store import Board
from mmbench.results.store import load_results

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

# Run the CLI's submit in a child that kills itself (SIGKILL: no cleanup of any kind runs) at one step.
CHILD = textwrap.dedent("""
    import os, shutil, signal, sys
    point = sys.argv[1]
    die = lambda: os.kill(os.getpid(), signal.SIGKILL)
    real_replace, real_rmtree = os.replace, shutil.rmtree
    if point == "after_rename":          # the folder is in place, the transaction is not committed
        def replace(src, dst):
            real_replace(src, dst)
            if ".staging-" in str(src):
                die()
        os.replace = replace
    elif point == "after_commit":        # a replacement committed, the old folder not yet removed
        import sqlite3
        def rmtree(path, *a, **k):
            if "submissions" in str(path):
                die()
            return real_rmtree(path, *a, **k)
        shutil.rmtree = rmtree
    elif point == "while_staging":       # files half written, nothing in the database
        real_open = open
        import builtins
        def opener(file, mode="r", *a, **k):
            if "wb" in mode and ".staging-" in str(file) and str(file).endswith(".parquet"):
                fh = real_open(file, mode, *a, **k)
                fh.write(b"PAR1 half")
                fh.flush()
                die()
            return real_open(file, mode, *a, **k)
        builtins.open = opener
    from mmbench.cli import main
    sys.exit(main(sys.argv[2:]))
""")


@pytest.fixture(scope="module")
def setup(vg_tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("lbkill")
    official_registry(vg_tiny, root / "official.json")
    return (make_results(vg_tiny, root / "a", name="model-a", dim=16),
            make_results(vg_tiny, root / "a2", name="model-a", dim=16), root / "official.json")


def _killed_submit(point: str, results: Path, board: Path, official: Path, *extra: str) -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD, point, "leaderboard", "submit", str(results), "--board",
                           str(board), "--official", str(official), *extra], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr)


def _age_staging(board: Path) -> None:
    """Staging folders this young are left alone (their writer may be about to lock them); age them."""
    for p in board.glob(".staging-*"):
        old = time.time() - 3600
        os.utime(p, (old, old))


def _leftovers(board: Path) -> list[str]:
    names = [p.name for p in board.iterdir() if p.name.startswith(".")]
    rows = {e.folder.resolve() for e in Board(board).entries()}
    names += [str(p) for p in (board / "submissions").glob("*/*") if p.resolve() not in rows]
    return names


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("point", ["after_rename", "while_staging"])
def test_a_submit_killed_before_its_commit_is_as_if_never_run(setup, tmp_path, capsys, point, replace):
    good, _, official = setup
    board = tmp_path / "board"
    _killed_submit(point, good, board, official, *(["--replace"] if replace else []))
    assert Board(board).entries() == []
    _age_staging(board)
    args = ["leaderboard", "submit", str(good), "--board", str(board), "--official", str(official)]
    assert main(args + (["--replace"] if replace else [])) == 0, capsys.readouterr().err
    assert "cleaned 1 leftover(s) of interrupted submits" in capsys.readouterr().out
    (entry,) = Board(board).entries()
    assert load_results(entry.folder).per_query.equals(load_results(good).per_query)
    assert _leftovers(board) == []
    assert main(args) == 2 and "already on the board" in capsys.readouterr().err   # and the board works on


def test_a_replacement_killed_before_its_commit_keeps_the_old_submission(setup, tmp_path, capsys):
    good, again, official = setup
    board = tmp_path / "board"
    args = ["leaderboard", "submit", str(good), "--board", str(board), "--official", str(official)]
    assert main(args) == 0
    (before,) = Board(board).entries()
    stored = {p.name: p.read_bytes() for p in before.folder.iterdir()}
    _killed_submit("after_rename", again, board, official, "--replace")
    (still,) = Board(board).entries()
    assert still.folder == before.folder and {p.name: p.read_bytes() for p in still.folder.iterdir()} == stored
    assert main(["leaderboard", "submit", str(again), "--board", str(board), "--official", str(official),
                 "--replace"]) == 0
    assert _leftovers(board) == [] and len(Board(board).entries()) == 1


def test_a_replacement_killed_after_its_commit_is_complete(setup, tmp_path, capsys):
    good, again, official = setup
    board = tmp_path / "board"
    assert main(["leaderboard", "submit", str(good), "--board", str(board), "--official", str(official)]) == 0
    (before,) = Board(board).entries()
    _killed_submit("after_commit", again, board, official, "--replace")
    (after,) = Board(board).entries()
    assert after.folder != before.folder and before.folder.exists()        # the old folder is an orphan now
    assert load_results(after.folder).per_query.equals(load_results(again).per_query)
    assert main(["leaderboard", "submit", str(good), "--board", str(board), "--official", str(official),
                 "--replace"]) == 0
    assert not before.folder.exists() and _leftovers(board) == [] and len(Board(board).entries()) == 1


def test_an_orphan_left_by_the_old_store_is_cleaned(setup, tmp_path, capsys):
    """The store before this fix renamed into <slug>-<id> before committing; such an orphan wedged every later
    submit of the model with 'Directory not empty', even with --replace."""
    good, _, official = setup
    board = tmp_path / "board"
    assert main(["leaderboard", "submit", str(good), "--board", str(board), "--official", str(official)]) == 0
    (entry,) = Board(board).entries()
    orphan = entry.folder.parent / entry.slug
    orphan.mkdir()
    (orphan / "results.json").write_text("{}")
    import sqlite3
    with sqlite3.connect(board / "board.sqlite") as con:    # as if the first submit never committed
        con.execute("DELETE FROM scores")
        con.execute("DELETE FROM submissions")
    assert main(["leaderboard", "submit", str(good), "--board", str(board), "--official", str(official)]) == 0
    assert not orphan.exists() and _leftovers(board) == []


def test_folders_the_board_did_not_create_are_never_removed(setup, tmp_path):
    good, _, official = setup
    board = tmp_path / "board"
    mine = board / "submissions" / "visual_grounding" / "my notes"
    mine.mkdir(parents=True)
    (board / "submissions" / "README.txt").write_text("kept")
    assert main(["leaderboard", "submit", str(good), "--board", str(board), "--official", str(official)]) == 0
    assert mine.is_dir() and (board / "submissions" / "README.txt").read_text() == "kept"


def test_a_live_staging_folder_is_left_alone(tmp_path):
    from mmbench.leaderboards.store import _Staging

    Board(tmp_path)
    with _Staging(tmp_path) as live:
        old = time.time() - 3600
        os.utime(live.path, (old, old))
        assert not _Staging.is_dead(live.path)        # locked by its (this) writer
    dead = tmp_path / ".staging-dead"
    dead.mkdir()
    os.utime(dead, (old, old))
    assert _Staging.is_dead(dead)


def test_a_folder_the_old_store_left_in_its_trash_is_put_back(setup, tmp_path, capsys):
    """The old store moved a replaced folder to .trash-*/old before committing; killed there, the row
    still named the folder, which was gone. The next submit puts it back when its files match the row."""
    good, again, official = setup
    board = tmp_path / "board"
    assert main(["leaderboard", "submit", str(good), "--board", str(board), "--official", str(official)]) == 0
    (entry,) = Board(board).entries()
    stored = {p.name: p.read_bytes() for p in entry.folder.iterdir()}
    trash = board / ".trash-legacy1"
    trash.mkdir()
    os.replace(entry.folder, trash / "old")
    old = time.time() - 3600
    os.utime(trash, (old, old))
    assert main(["leaderboard", "submit", str(good), "--board", str(board), "--official", str(official)]) == 2
    assert "cleaned 1 leftover(s)" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in entry.folder.iterdir()} == stored and not trash.exists()
