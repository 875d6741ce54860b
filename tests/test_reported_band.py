"""The board's band of the papers' reported numbers (issue 37, item 1), without a browser: which rows a board's
tasks bring, the band's data files, and that the measured tables are the same with or without the band (its
rows are never ranked, tiered or averaged with the runs). The browser test is in test_leaderboard_site.py."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mmbench.cli import main
from mmbench.leaderboards.reported import CAVEAT, load_reported
from mmbench.leaderboards.reported_band import band_rows, band_section

ROWS = load_reported()


def test_a_boards_tasks_bring_their_own_and_their_benchmarks_rows_once_each():
    vg = band_rows(["visual_grounding"])
    assert vg and {r.task for r in vg} == {"mmlongembed"}  # the benchmark's numbers, not another task's
    both = band_rows(["visual_grounding", "multi_source_reasoning", "visual_grounding"])
    assert {r.task for r in both} == {"mmlongembed", "multi_source_reasoning"}
    assert len(both) == len(set(map(id, both))) == len([r for r in ROWS if r.task in {"mmlongembed", "multi_source_reasoning"}])
    assert [r for r in ROWS if r in both] == both  # file order
    assert band_rows(["flickr_hard_negatives"]) == [r for r in ROWS if r.task == "flickr_hard_negatives"]
    assert band_rows(["a_plugin_task"]) == [] and band_section([]) == ""


def test_band_html_has_one_caveated_table_per_paper_and_no_rank_or_tier():
    rows = band_rows(["visual_grounding", "flickr_hard_negatives"])
    html = band_section(rows)
    papers = list(dict.fromkeys(r.paper for r in rows))
    assert len(papers) == 2
    for paper in papers:
        assert f'<h3 class="caveat">{CAVEAT.format(paper=paper)}</h3>' in html
    assert html.count("<tbody>") == 2 and html.count("<tr>") == len(rows) + 2  # a head row per table
    assert not re.search(r"tier|rank interval|class=\"(place|range|ci)\"|data-key=\"rank\"", html.replace(
        "no rank, tier or interval, and no rank interval, tier or mean above counts them", ""))


@pytest.fixture(scope="module")
def ravel_board(tmp_path_factory) -> Path:
    """A board holding one RAVEL submission (cheap: no pool set, no model)."""
    from mmbench.leaderboards.schema import validate_submission
    from mmbench.leaderboards.store import Board
    from mmbench.running.ravel_inputs import load_ground_truth

    root = tmp_path_factory.mktemp("band")
    gt = load_ground_truth()
    part = gt[gt["llm"].isin(["Qwen3-1.7B", "SmolLM2-1.7B-Instruct"])].groupby("llm").head(8)
    scores = [{"encoder": r.encoder, "llm": r.llm, "score": float(-r.Avg)} for r in part.itertuples()]
    (root / "ravel").mkdir()
    (root / "ravel" / "ravel_scores.json").write_text(json.dumps(
        {"model": {"name": "loss-like", "settings": {}}, "lower_is_better": True, "scores": scores}))
    Board(root / "board").submit(validate_submission(root / "ravel"))
    return root / "board"


def test_built_board_writes_the_band_apart_and_leaves_measured_tables_unchanged(ravel_board, tmp_path, capsys):
    assert main(["leaderboard", "build", "--board", str(ravel_board), "--out", str(tmp_path / "with")]) == 0
    assert main(["leaderboard", "build", "--board", str(ravel_board), "--out", str(tmp_path / "without"),
                 "--no-reported"]) == 0
    with_, without = tmp_path / "with", tmp_path / "without"
    data = json.loads((with_ / "data" / "reported.json").read_text())
    expected = [r for r in ROWS if r.task == "ravel"]
    assert data["ranked"] is False and len(data["rows"]) == len(expected) > 0
    for rec, r in zip(data["rows"], expected):
        assert (rec["model"], rec["subset"], rec["metric"], rec["value"]) == (r.model, r.subset, r.metric, r.value)
        assert rec["caveat"] == "reported in RAVEL, not reproduced here; protocol may differ"
        assert not {"rank", "tier", "place", "low", "high", "submission_id"} & set(rec)
    assert (with_ / "data" / "reported.csv").read_text().count("\n") == len(expected) + 1
    # the measured tables are byte-identical: the band's rows enter no rank, tier, interval or mean
    measured = sorted(p.name for p in (without / "data").glob("*.*"))
    assert measured and "reported.json" not in measured
    for name in measured:
        assert (with_ / "data" / name).read_bytes() == (without / "data" / name).read_bytes(), name
    index = (with_ / "index.html").read_text()
    assert index.index('id="ravel"') < index.index('<section id="reported" class="reported-band"')
    assert 'href="#reported"' in index
    assert 'id="reported"' not in (without / "index.html").read_text()
