"""Issue 26 #2 and the RAVEL part of #7: what a submission may hold is bounded at submit time (depth, values,
string length, score magnitude); a build never dies on stored content (it leaves the entry out and names it);
`leaderboard remove` takes a submission off a board."""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from leaderboard_helpers import edit_summary, make_results, official_registry
from mmbench.cli import main
from mmbench.leaderboards.problems import SubmissionRejected
from mmbench.leaderboards.schema import validate_submission


@pytest.fixture(scope="module")
def setup(vg_tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("lbbounds")
    official_registry(vg_tiny, root / "official.json")
    return make_results(vg_tiny, root / "good", name="model-b", dim=16), root / "official.json"


def _nested(depth: int):
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_deeply_nested_settings_are_refused_at_submit(setup, tmp_path, capsys):
    good, official = setup
    folder = Path(shutil.copytree(good, tmp_path / "deep"))
    edit_summary(folder, lambda s: s["mmbench"]["model"]["settings"].update({"x": _nested(900)}))
    rc = main(["leaderboard", "submit", str(folder), "--board", str(tmp_path / "b"), "--official", str(official)])
    err = capsys.readouterr().err
    assert rc == 2 and "results.json: is nested deeper than the limit of 32 levels" in err


@pytest.mark.parametrize("edit, says", [
    (lambda s: s["mmbench"]["model"]["settings"].update({"x": "y" * 200_000}), "has a string of 200000 characters"),
    (lambda s: s["mmbench"]["model"]["settings"].update({"x": list(range(250_000))}), "holds more than 200000 values"),
])
def test_huge_strings_and_counts_are_refused(setup, tmp_path, edit, says):
    good, official = setup
    folder = Path(shutil.copytree(good, tmp_path / "big"))
    edit_summary(folder, edit)
    with pytest.raises(SubmissionRejected, match=says):
        validate_submission(folder, None)


def test_a_build_leaves_out_a_stored_entry_it_cannot_render_and_remove_takes_it_off(setup, tmp_path, capsys):
    good, official = setup
    board = tmp_path / "board"
    assert main(["leaderboard", "submit", str(good), "--board", str(board), "--official", str(official)]) == 0
    other = Path(shutil.copytree(good, tmp_path / "other"))
    edit_summary(other, lambda s: s["mmbench"]["model"].update({"name": "model-c"}))
    assert main(["leaderboard", "submit", str(other), "--board", str(board), "--official", str(official)]) == 0
    # stored before the limits existed: an identity nested past what json (and the page's redaction) can walk
    deep = '{"name": "model-c", "settings": ' + '{"a": ' * 5000 + "{}" + "}" * 5000 + "}"
    with sqlite3.connect(board / "board.sqlite") as con:
        con.execute("UPDATE submissions SET model_json = ? WHERE model_name = 'model-c'", (deep,))
        bad_id = con.execute("SELECT id FROM submissions WHERE model_name = 'model-c'").fetchone()[0]
    capsys.readouterr()
    assert main(["leaderboard", "build", "--board", str(board), "--out", str(tmp_path / "site")]) == 0
    out, err = capsys.readouterr()
    assert f"left out submission {bad_id} ('model-c' on visual_grounding)" in err and "1 submissions" in out
    index = (tmp_path / "site" / "index.html").read_text()
    assert "model-b" in index and "model-c" not in index

    assert main(["leaderboard", "remove", bad_id, "--board", str(board)]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "list", "--board", str(board)]) == 0
    listed = capsys.readouterr().out
    assert bad_id not in listed and "model-b" in listed
    assert len([p for p in (board / "submissions").rglob("results.json")]) == 1  # its files went too
    assert main(["leaderboard", "remove", bad_id, "--board", str(board)]) == 2


def test_a_results_folder_gone_from_the_board_is_left_out_of_the_build(setup, tmp_path, capsys):
    good, official = setup
    board = tmp_path / "board"
    assert main(["leaderboard", "submit", str(good), "--board", str(board), "--official", str(official)]) == 0
    for p in (board / "submissions").rglob("per_query.parquet"):
        p.write_bytes(b"damaged")
    capsys.readouterr()
    assert main(["leaderboard", "build", "--board", str(board), "--out", str(tmp_path / "site")]) == 0
    assert "left out submission" in capsys.readouterr().err


@pytest.mark.parametrize("score", [1e308, -1e308])
def test_ravel_scores_near_the_float_limit_are_refused(tmp_path, score):
    from mmbench.running.ravel_inputs import load_ground_truth

    gt = load_ground_truth()
    llm = gt["llm"].iloc[0]
    scores = [{"encoder": e, "llm": llm, "score": float(i)} for i, e in enumerate(gt[gt["llm"] == llm].head(4)["encoder"])]
    scores[1]["score"] = score
    folder = tmp_path / "ravel"
    folder.mkdir()
    (folder / "ravel_scores.json").write_text(json.dumps({"task": "ravel", "model": {"name": "p", "settings": {}},
                                                          "scores": scores}))
    with pytest.raises(SubmissionRejected) as exc:
        validate_submission(folder)
    assert any(p.field == "ravel_scores.json: scores[1].score" and "limit" in p.reason for p in exc.value.problems)
