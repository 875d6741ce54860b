"""Draws and overfit reports are checked against the runs they are read beside (issue 45 #4). Before: a draws report
made on reduced builds of another model was filed on a board and used by `show --draws`, `compare --draws` and the
board's "within the spread" without a check of design or model, and forged spreads (1e308, NaN, -5) were rendered."""
from __future__ import annotations

import json
import math

import pytest

from mmbench.cli import main
from mmbench.results.report_checks import draws_problem, overfit_problem

SPREADS = [1e308, float("nan"), -5.0]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """Draws of Multi-Source Reasoning at 8k (report R, runs X) and at 4k (report R4, runs Y), both by BM25; a
    toy model's run on an 8k draw under BM25's name (Z) and under its own (H)."""
    root = tmp_path_factory.mktemp("reports")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MMBENCH_HOME", str(root / "home"))
        for length in (8192, 4096):
            assert main(["draws", "--task", "multi_source_reasoning", "--seeds", "0..1", "--param",
                         f"lengths=[{length}]", "--model", "bm25", "--out", str(root / f"d{length}")]) == 0
    report = {n: json.loads((root / f"d{n}" / "draws.json").read_text()) for n in (8192, 4096)}
    run = {n: root / f"d{n}" / "bm25" / report[n]["content_hashes"]["bm25"][0][:16] for n in (8192, 4096)}
    draw = next(p for p in (root / "home" / "draws").glob("*/seed0")
                if json.loads((p / "manifest.json").read_text())["builder"]["params"]["lengths"] == [8192])
    for name, extra in (("Z", ["--model-name", "bm25"]), ("H", [])):
        assert main(["run", "--task", "multi_source_reasoning", "--data", str(draw), "--model", "toy_models:HashingModel",
                     "--no-cache", "--quiet", "--output", str(root / name), *extra]) == 0
    return {"root": root, "report": report, "run": run, "draw": draw, "Z": root / "Z", "H": root / "H"}


def _write(tmp_path, data, name="draws.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _refused(capsys, code, *needles):
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "refused" in err, err
    for n in needles:
        assert n in err, err


def test_a_report_is_used_beside_the_runs_it_was_made_from(drawn, capsys):
    path = drawn["root"] / "d8192" / "draws.json"
    assert main(["show", str(drawn["run"][8192]), "--draws", str(path)]) == 0
    assert "between-draw sd" in capsys.readouterr().out


def test_a_report_of_another_design_is_refused(drawn, capsys):
    code = main(["show", str(drawn["run"][8192]), "--draws", str(drawn["root"] / "d4096" / "draws.json")])
    _refused(capsys, code, "made_from.design", "4096", "8192")
    code = main(["show", str(drawn["run"][4096]), "--draws", str(drawn["root"] / "d8192" / "draws.json")])
    _refused(capsys, code, "made_from.design")


def test_a_report_of_another_model_is_refused(drawn, tmp_path, capsys):
    path = drawn["root"] / "d8192" / "draws.json"
    _refused(capsys, main(["show", str(drawn["Z"]), "--draws", str(path)]), "made_from.models.bm25.identity")
    _refused(capsys, main(["show", str(drawn["H"]), "--draws", str(path)]), "the report holds bm25, none of hashing")
    code = main(["compare", str(drawn["Z"]), str(drawn["H"]), "--draws", str(path), "--resamples", "50",
                 "--ci-resamples", "50", "--out", str(tmp_path / "cmp")])
    _refused(capsys, code, "identity")


@pytest.mark.parametrize("spread", SPREADS, ids=["1e308", "nan", "minus-5"])
def test_out_of_range_spreads_are_refused(drawn, tmp_path, capsys, spread):
    data = json.loads(json.dumps(drawn["report"][8192]))
    for row in data["models"]["bm25"]:
        if row["group"] == "all":
            row["between_sd"] = spread
    code = main(["show", str(drawn["run"][8192]), "--draws", str(_write(tmp_path, data))])
    _refused(capsys, code, "models.bm25[all].between_sd")


def test_the_board_uses_only_reports_made_for_its_runs(drawn, tmp_path):
    from leaderboard_helpers import official_registry
    from mmbench.leaderboards.draw_spread import file_draws

    official_registry(drawn["draw"], tmp_path / "official.json")
    board = tmp_path / "board"
    assert main(["leaderboard", "submit", str(drawn["run"][8192]), "--board", str(board),
                 "--official", str(tmp_path / "official.json")]) == 0

    def section(report):
        file_draws(board, report)
        assert main(["leaderboard", "build", "--board", str(board), "--out", str(tmp_path / "site")]) == 0
        return (tmp_path / "site" / "index.html").read_text().split('id="between-draws"')[1]

    good = section(drawn["report"][8192])
    assert "<h3>multi_source_reasoning" in good and "refused" not in good
    other = section(drawn["report"][4096])        # same task, so it replaces the report on the board
    assert "<h3>" not in other and "refused: made_from.design" in other
    for spread in SPREADS:
        data = json.loads(json.dumps(drawn["report"][8192]))
        data["models"]["bm25"][0]["between_sd"] = spread
        page = section(data)
        assert "<h3>" not in page and "refused: models.bm25[" in page


def test_overfit_reports_are_checked_too():
    info = {"model": {"name": "m", "family": "test"}, "protocol_id": "e.s", "task_version": "1", "content_hash": "h0",
            "protocol": {"evaluation": {"truncation_rule": "middle"}}}
    from mmbench.results.report_checks import model_record

    gap = {"public": 0.6, "fresh_mean": 0.5, "gap": 0.1, "ci_low": 0.05, "ci_high": 0.15, "half_width": 0.04,
           "n_fresh": 3}
    good = {"kind": "mmbench.overfit", "task": "t", "model": "m", "public": {"content_hash": "h0"}, "gap": gap,
            "made_from": {"task_version": "1", "design": None, "models": {"m": model_record(info)}}}
    assert overfit_problem(good, [("run", info)]) is None
    assert "has no run" in overfit_problem(good, [])
    assert "public.content_hash" in overfit_problem({**good, "public": {"content_hash": "h9"}}, [("run", info)])
    other = {**info, "model": {"name": "m", "family": "test", "revision": "other"}}
    assert "identity" in overfit_problem(good, [("run", other)])
    for field_name in ("gap", "half_width", "public"):
        for bad in (1e308, math.nan, -5.0):
            assert field_name in overfit_problem({**good, "gap": {**gap, field_name: bad}}, [("run", info)])
    assert "made_from: missing" in overfit_problem({k: v for k, v in good.items() if k != "made_from"}, [("run", info)])
    assert "kind" in draws_problem({"kind": "other"}, "t", [])


def test_a_reference_draws_report_is_checked_before_it_lends_its_variance(tmp_path):
    """`overfit --reference` (or the board's draws report) feeds the test's noise: a report of another design or
    task version, or with a forged spread, is refused in one line instead of loosening or tightening the test."""
    import argparse

    from mmbench.cli.overfit import _references
    from mmbench.common.errors import CLIError

    design = {"builder": "multi_source_reasoning", "source": "sample", "params": {"lengths": [8192]}}
    good = {"kind": "mmbench.draws", "task": "multi_source_reasoning",
            "made_from": {"task_version": "2.0", "design": design, "models": {}},
            "models": {"minilm": [{"group": "all", "between_sd": 0.04, "within_se": 0.03, "draws": 5}]}}

    def refs(data):
        path = tmp_path / "draws.json"
        path.write_text(json.dumps(data))
        args = argparse.Namespace(reference=[path], board=None)
        return _references(args, "multi_source_reasoning", "bm25", "2.0", design)

    assert len(refs(good)) == 1
    forged = json.loads(json.dumps(good))
    forged["models"]["minilm"][0]["between_sd"] = 1e308
    other = {**good, "made_from": {**good["made_from"], "design": {**design, "params": {"lengths": [2048]}}}}
    old = {**good, "made_from": {**good["made_from"], "task_version": "1.0"}}
    for bad, words in ((forged, "between_sd"), (other, "made_from.design"), (old, "task_version")):
        with pytest.raises(CLIError, match=words) as info:
            refs(bad)
        assert "\n" not in str(info.value)
