"""Board tables: the numbers they show, checked against independent computations."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from mmbench.leaderboards.boards import flickr_table, mmlongembed_table, ravel_table, visual_grounding_table
from mmbench.leaderboards.store import Entry
from mmbench.results import RunResults


def entry(name: str, task: str, scores: dict, kind: str = "retrieval") -> Entry:
    return Entry(id=name[:8].ljust(8, "0"), kind=kind, task=task, task_version="1", content_hash="h" * 64,
                 model={"name": name, "settings": {}}, folder=Path(f"/nonexistent/{name}"), submitted_at="t", scores=scores)


def test_flickr_table_cis_match_scipy_bootstrap():
    rng = np.random.default_rng(3)
    n = 200
    per_query = pd.DataFrame({"recall_at_1": rng.integers(0, 2, n).astype(float),
                              "recall_at_3": rng.integers(0, 2, n).astype(float),
                              "mrr": rng.choice([1, 0.5, 1 / 3, 0.25], n)})
    e = entry("clip", "flickr_hard_negatives", {})
    table = flickr_table([e], loader=lambda _: RunResults(per_query, pd.DataFrame(), {}), resamples=2000, seed=7)
    row = table.rows[0]
    for key in ("recall_at_1", "recall_at_3", "mrr"):
        ref = stats.bootstrap((per_query[key].to_numpy(),), np.mean, n_resamples=2000, method="percentile",
                              confidence_level=0.95, vectorized=True, rng=np.random.default_rng(7))
        assert row[key]["estimate"] == pytest.approx(per_query[key].mean())
        assert row[key]["low"] == pytest.approx(ref.confidence_interval.low, abs=1e-12)
        assert row[key]["high"] == pytest.approx(ref.confidence_interval.high, abs=1e-12)
    flat = table.records()[0]
    assert flat["recall_at_1_ci_low"] == row["recall_at_1"]["low"]


def test_mmlongembed_table_macro_easy_hard_and_lengths():
    a = entry("a", "visual_grounding", {"all": {"precision_at_1": 0.5}, "macro_over_subsets": {"precision_at_1": 0.4},
                                        "difficulty=easy": {"precision_at_1": 0.7}, "difficulty=hard": {"precision_at_1": 0.3},
                                        "length_bin=1k": {"precision_at_1": 0.6}, "length_bin=256": {"precision_at_1": 0.8},
                                        "subset=x/easy": {"precision_at_1": 0.7}})
    b = entry("b", "visual_grounding", {"all": {"precision_at_1": 0.9}, "length_bin=256": {"precision_at_1": 0.95}})
    t = mmlongembed_table([a, b, entry("f", "flickr_hard_negatives", {"all": {"precision_at_1": 1.0}})])
    assert [r["model"] for r in t.rows] == ["b", "a"]  # flickr is not an MMLongEmbed task; best macro first
    assert [c.key for c in t.columns][4:] == ["difficulty=easy", "difficulty=hard", "length_bin=256", "length_bin=1k",
                                               "subset=x/easy"]  # lengths in nominal order, not text order
    assert t.rows[0]["macro"] == 0.9  # one subset: macro falls back to the micro average
    assert t.rows[1]["macro"] == 0.4 and t.rows[1]["difficulty=hard"] == 0.3
    assert t.rows[0]["difficulty=easy"] is None
    vg = visual_grounding_table([a, b])
    assert vg.rows[0]["length_bin=256"] == 0.95


def test_ravel_table_means_and_downloads_neutralise_formulas():
    e = entry("=HYPERLINK(\"x\")", "ravel", {"llm=Qwen3-1.7B": {"spearman": 0.5, "pearson": 0.4, "n": 10},
                                             "llm=SmolLM2-1.7B": {"spearman": 0.7, "pearson": 0.6, "n": 10}}, kind="ravel")
    t = ravel_table([e])
    assert t.rows[0]["mean_spearman"] == pytest.approx(0.6)
    rows = list(csv.DictReader(io.StringIO(t.to_csv())))
    assert rows[0]["model"].startswith("'=")  # a spreadsheet shows it as text instead of running it
    assert float(rows[0]["llm=Qwen3-1.7B:spearman"]) == 0.5
    assert t.to_json()["rows"][0]["model"] == e.model_name  # JSON keeps the exact name


def test_ravel_submission_reaches_the_site(tmp_path):
    import json

    from mmbench.evaluators.ravel.correlate import load_ground_truth
    from mmbench.leaderboards.schema import validate_submission
    from mmbench.leaderboards.site import build_site
    from mmbench.leaderboards.store import Board

    gt = load_ground_truth()
    part = gt[gt["llm"].isin(["Qwen3-1.7B", "SmolLM2-1.7B-Instruct"])].groupby("llm").head(8)
    folder = tmp_path / "ravel"
    folder.mkdir()
    scores = [{"encoder": r.encoder, "llm": r.llm, "score": float(-r.Avg)} for r in part.itertuples()]
    (folder / "ravel_scores.json").write_text(json.dumps({"model": {"name": "loss-like", "settings": {}},
                                                          "lower_is_better": True, "scores": scores}))
    board = Board(tmp_path / "board")
    entry = board.submit(validate_submission(folder))
    assert entry.scores["llm=Qwen3-1.7B"]["spearman"] == pytest.approx(1.0)  # negated loss ranks perfectly
    site = build_site(board, tmp_path / "site")
    board_rows = json.loads((site / "data" / "ravel.json").read_text())["rows"]
    assert board_rows[0]["model"] == "loss-like" and board_rows[0]["mean_spearman"] == pytest.approx(1.0)
    predictions = list(csv.DictReader(io.StringIO((site / "data" / "models" / f"{entry.slug}-predictions.csv").read_text())))
    assert len(predictions) == len(scores)
    assert "Predicted scores" in (site / "models" / f"{entry.slug}.html").read_text()


@pytest.mark.parametrize("task", ["visual_grounding", "multi_source_reasoning", "logical_summarization",
                                  "temporal_summarization", "flickr_hard_negatives"])
def test_shipped_official_hash_matches_a_fresh_sample_build(task, tmp_path):
    """Every default sample builds to its shipped official hash on this machine (CI runs it on a fresh one):
    a builder change that alters a sample must come with a new task version and regenerated hashes, and a
    hash that depends on the machine (floats, codecs, threads) shows up here."""
    from mmbench.leaderboards.official import OfficialRegistry, shipped_path
    from mmbench.tasks import get_task

    spec = get_task(task)
    ps = spec.build("sample", tmp_path / task, seed=0, progress=False)
    entry = OfficialRegistry.load(shipped_path()).get(task, spec.version)
    assert ps.manifest["content_hash"] == entry.content_hash, (
        f"{task}: the default sample build no longer matches leaderboards/data/official_hashes.json; "
        "regenerate it (README, 'Official pool sets')")

