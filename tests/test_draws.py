"""Draws of a task: the between-draw spread statistic (by simulation) and `mmbench draws` on a reduced sample."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mmbench.evaluators.stats.draw_spread import draw_spread, group_means, sd_interval, spread_of, within_spread


def _draw(rng, n: int, p: float, groups: bool = False) -> pd.DataFrame:
    hits = pd.DataFrame({"precision_at_1": (rng.random(n) < p).astype(float)})
    if groups:
        hits = hits.assign(subset=rng.choice(["a", "b"], n), length_bin=rng.choice(["1k", "2k"], n),
                           depth=rng.choice([0.0, 1.0], n))
    return hits


def test_draws_that_only_resample_items_have_a_ratio_near_one():
    """Known answer: each draw is a fresh sample of 400 items from one population, so the between-draw sd
    estimates the within-draw standard error and the ratio averages 1."""
    rng = np.random.default_rng(0)
    ratios = [draw_spread([_draw(rng, 400, 0.6) for _ in range(5)], "precision_at_1")[0].ratio for _ in range(300)]
    assert np.mean(np.square(ratios)) == pytest.approx(1.0, abs=0.1)


def test_a_draw_effect_shows_as_between_sd_above_within():
    """Known answer: each draw shifts its items' hit rate by N(0, 0.05); between^2 = within^2 + 0.05^2."""
    rng = np.random.default_rng(1)
    between2, within2 = [], []
    for _ in range(200):
        rows = draw_spread([_draw(rng, 400, 0.6 + rng.normal(0, 0.05)) for _ in range(5)], "precision_at_1")
        between2.append(rows[0].between_sd ** 2)
        within2.append(rows[0].within_se ** 2)
    assert np.mean(between2) - np.mean(within2) == pytest.approx(0.05 ** 2, rel=0.2)


def test_the_chi_square_interval_of_the_between_sd_covers_at_its_level():
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(2000):
        x = rng.normal(0, 0.03, 5)
        lo, hi = sd_interval(float(np.std(x, ddof=1)), 5)
        hits += lo <= 0.03 <= hi
    assert hits / 2000 == pytest.approx(0.95, abs=0.015)


def test_groups_cells_and_the_spread_verdict():
    rng = np.random.default_rng(3)
    groups = group_means(_draw(rng, 200, 0.5, groups=True), "precision_at_1", axes=("subset", "length_bin", "depth"))
    assert {"all", "subset=a", "length_bin=2k", "depth=1.0", "length_bin=1k, depth=0.0"} <= set(groups)
    one = spread_of([0.5], [0.03], [100], "all")
    assert one.between_sd is None and one.draws == 1
    assert within_spread(0.01, 0.02) is True and within_spread(-0.05, 0.02) is False and within_spread(0.1, None) is None
    with pytest.raises(ValueError, match="missing"):
        group_means(pd.DataFrame({"x": [1.0]}), "precision_at_1")


def test_mmbench_draws_builds_runs_and_reports(tmp_path, monkeypatch, capsys):
    from mmbench.cli import main

    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    out = tmp_path / "draws"
    args = ["draws", "--task", "multi_source_reasoning", "--seeds", "0..2", "--param", "lengths=[8192]",
            "--model", "bm25", "--out", str(out)]
    assert main(args) == 0
    data = json.loads((out / "draws.json").read_text())
    assert data["seeds"] == [0, 1, 2] and len(set(data["content_hashes"]["bm25"])) == 3  # three different draws
    rows = {r["group"]: r for r in data["models"]["bm25"]}
    assert rows["all"]["draws"] == 3 and rows["all"]["between_sd"] is not None
    assert rows["all"]["between_sd"] == pytest.approx(np.std(data["scores"]["bm25"], ddof=1))
    assert any(g.startswith("length_bin=8k, difficulty=") for g in rows)
    capsys.readouterr()
    assert main(args) == 0  # a second time: the draws and the runs are reused
    assert capsys.readouterr().out.count("already there; reused") == 3
    run = out / "bm25" / data["content_hashes"]["bm25"][0][:16]
    assert main(["show", str(run), "--draws", str(out / "draws.json")]) == 0
    shown = capsys.readouterr().out
    assert f"between-draw sd {rows['all']['between_sd']:.4f}" in shown and "a new draw could reverse it" in shown
    (tmp_path / "bad.json").write_text("[]")
    assert main(["show", str(run), "--draws", str(tmp_path / "bad.json")]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["draws", "--task", "multi_source_reasoning", "--seeds", "3..1"])
    assert exc.value.code == 2


def test_compare_says_when_a_difference_is_within_the_between_draw_spread(tmp_path):
    from mmbench.reports.compare import compare_runs, comparison_markdown
    from mmbench.results.store import load_results
    from report_helpers import grounding_per_query, write_run

    runs = [load_results(write_run(tmp_path / name, grounding_per_query(seed=s, skill=skill), name))
            for name, s, skill in (("m1", 1, 0.5), ("m2", 2, 0.48))]
    draws = {"kind": "mmbench.draws", "task": "visual_grounding", "metric": "precision_at_1",
             "pairs": [{"a": "m1", "b": "m2", "mean_diff": 0.01, "between_sd_of_difference": 0.5}], "models": {}}
    data = compare_runs(runs, resamples=200, ci_resamples=100, draws=draws)
    assert data["pairs"][0]["draw_spread"] == {"between_draw_sd": 0.5, "within_spread": True, "metric": "precision_at_1"}
    assert "another draw could reverse it" in comparison_markdown(data)
    draws["pairs"][0]["between_sd_of_difference"] = 1e-6
    assert compare_runs(runs, resamples=200, ci_resamples=100, draws=draws)["pairs"][0]["draw_spread"]["within_spread"] is False
    with pytest.raises(ValueError, match="task"):
        compare_runs(runs, resamples=200, ci_resamples=100, draws={**draws, "task": "other"})


def test_the_spread_a_pair_is_read_against():
    from mmbench.results.draw_report import spread_for

    rows = lambda sd: [{"group": "all", "between_sd": sd}]  # noqa: E731
    data = {"pairs": [{"a": "x", "b": "y", "between_sd_of_difference": 0.03}],
            "models": {"x": rows(0.02), "y": rows(0.05), "z": rows(0.01)}}
    assert spread_for(data, "y", "x") == 0.03           # both models ran on the draws: the sd of their difference
    assert spread_for(data, "z", "w") == 0.01           # one of them: its own scores' sd
    assert spread_for(data, "v", "w") == 0.05           # neither: the largest in the report
    assert spread_for({"pairs": [], "models": {}}, "v", "w") is None


def test_the_board_flags_gaps_within_the_between_draw_spread(tmp_path):
    """A draws report filed on a board: neighbouring models whose gap is smaller than the between-draw sd of their
    difference are flagged; a wide gap is not; an unreadable report is named (issue 36: the board says so)."""
    from dataclasses import dataclass, field

    from mmbench.leaderboards.draw_spread import draws_section, file_draws, ordered_gaps
    from mmbench.results.report_checks import model_record

    def info(model):   # what draws_section reads of an entry's results.json (issue 45: the report is checked)
        return {"model": {"name": model, "family": "test"}, "protocol_id": "e.s", "task_version": "1",
                "protocol": {"evaluation": {"truncation_rule": "middle"}}}

    made_from = {"task_version": "1", "design": None, "models": {m: model_record(info(m)) for m in "abc"}}
    report = {"kind": "mmbench.draws", "task": "multi_source_reasoning", "metric": "precision_at_1",
              "seeds": [0, 1, 2], "models": {}, "scores": {}, "made_from": made_from,
              "pairs": [{"a": "a", "b": "b", "mean_diff": 0.01, "between_sd_of_difference": 0.03},
                        {"a": "b", "b": "c", "mean_diff": 0.2, "between_sd_of_difference": 0.03}]}
    rows = ordered_gaps({"a": 0.80, "b": 0.79, "c": 0.50}, report)
    assert [r["model"] for r in rows] == ["a", "b", "c"]
    assert [r["within"] for r in rows] == [True, False, None]      # 0.01 < 0.03; 0.29 > 0.03; last has no next
    assert rows[0]["gap"] == pytest.approx(0.01) and rows[1]["sd"] == 0.03

    @dataclass
    class FakeEntry:   # the fields draws_section reads of a board entry
        model_name: str
        score: float
        task: str = "multi_source_reasoning"
        kind: str = "retrieval"
        submitted_at: str = "2026-12-04"
        id: str = field(default="")

        @property
        def scores(self):
            return {"all": {"precision_at_1": self.score}}

    board = tmp_path / "board"
    file_draws(board, report)
    entries = [FakeEntry("a", 0.80, id="1"), FakeEntry("b", 0.79, id="2"), FakeEntry("c", 0.5, id="3")]
    page = draws_section(board, entries, lambda e: info(e.model_name))
    assert page.count("another draw could reverse this order") == 1 and "3 draws" in page
    assert draws_section(tmp_path / "nothing", [], info) == ""
    (board / "draws" / "broken.json").write_text("{")
    assert "Unreadable draws report broken.json" in draws_section(board, [], info)


def test_the_draw_ratio_comes_with_its_pure_noise_range_and_p():
    """Under pure item noise (K - 1) ratio^2 is chi-square with K - 1 df: the range at three draws is 0.16-1.92 and
    the p of 20,000 simulated pure-noise reports is uniform (5 % below 0.05)."""
    from mmbench.evaluators.stats.draw_spread import noise_range, ratio_p, spread_of

    lo, hi = noise_range(3)
    assert lo == pytest.approx(0.159, abs=0.001) and hi == pytest.approx(1.921, abs=0.001)
    rng = np.random.default_rng(4)
    se = 0.03
    means = rng.normal(0.5, se, size=(20_000, 3))
    ratios = means.std(axis=1, ddof=1) / se
    p = np.array([ratio_p(r, 3) for r in ratios[:4000]])
    assert np.mean(p < 0.05) == pytest.approx(0.05, abs=0.01)
    assert np.mean((ratios >= lo) & (ratios <= hi)) == pytest.approx(0.95, abs=0.01)
    row = spread_of([0.50, 0.53, 0.47], [se] * 3, [144] * 3, "all")
    assert (row.noise_low, row.noise_high) == (lo, hi) and row.p_value == pytest.approx(ratio_p(row.ratio, 3))


def test_effective_context_over_draws_is_a_range_with_the_share_that_agrees():
    from mmbench.results.draw_report import effective_over_draws, spread_lines

    readings = [{"tokens": 20_825, "censored": True, "status": "censored", "bin": "32k"},
                {"tokens": 21_312, "censored": True, "status": "censored", "bin": "32k"},
                {"tokens": 19_045, "censored": False, "status": "drop", "bin": "16k"}]
    text = effective_over_draws(readings)
    assert text == ("effective context over 3 draws: 19,045 to at least 21,312 tokens; 2 of 3 draws agree on no drop "
                    "up to the longest length seen (one draw's reading is not the task's)")
    data = {"task": "t", "metric": "m", "seeds": [0, 1, 2], "pairs": [], "effective": {"bm25": readings},
            "models": {"bm25": [{"group": "all", "mean": 0.5, "between_sd": 0.03, "within_se": 0.02, "ratio": 1.5,
                                 "noise_low": 0.16, "noise_high": 1.92, "p_value": 0.22}]}}
    lines = "\n".join(spread_lines(data, "t", "bm25"))
    assert "19,045 to at least 21,312 tokens" in lines and "item noise alone gives 0.16–1.92, p = 0.22" in lines
