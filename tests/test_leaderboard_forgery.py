"""Forged numbers and switched-off tamper detection: every number a submitted results.json states is
recomputed from its tables or refused, and a results folder without table digests is refused everywhere."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fake_llm_server import FakeLLMServer, openai_envelope
from leaderboard_helpers import edit_summary, make_results, official_registry
from mmbench.cli import main
from mmbench.leaderboards.problems import SubmissionRejected
from mmbench.leaderboards.schema import validate_submission
from mmbench.results.store import ResultsError, load_results
from mmbench.tasks import get_task


@pytest.fixture(scope="module")
def setup(vg_tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("forgery")
    registry = official_registry(vg_tiny, root / "official.json")
    return registry, make_results(vg_tiny, root / "good", name="model-f", dim=16)


@pytest.fixture
def registry(setup):
    return setup[0]


@pytest.fixture
def results(setup, tmp_path) -> Path:
    return Path(shutil.copytree(setup[1], tmp_path / "results"))


def reasons(folder, registry) -> dict[str, str]:
    with pytest.raises(SubmissionRejected) as info:
        validate_submission(folder, registry)
    return {p.field: p.reason for p in info.value.problems}


def _entry(summary, group="default"):
    return next(e for e in summary["scores"]["test"] if e["hf_subset"] == group)


def test_a_forged_main_score_is_refused(results, registry):
    honest = _entry(json.loads((results / "results.json").read_text()))["main_score"]
    edit_summary(results, lambda s: _entry(s).update(main_score=0.99))
    got = reasons(results, registry)
    assert f"differs from precision_at_1 {honest!r} recomputed" in got["results.json: scores.test[default].main_score"]


@pytest.mark.parametrize("edit, field, says", [
    (lambda s: _entry(s).update(accuracy=0.99), "results.json: scores.test[default].accuracy", "not a metric recomputed"),
    (lambda s: s["mmbench"].update(n_items=1000), "results.json: mmbench.n_items", "differs from 60"),
    (lambda s: s["mmbench"].update(n_items_total=7), "results.json: mmbench.n_items_total", "differs from 60"),
    (lambda s: s["mmbench"].update(documents_truncated=3), "results.json: mmbench.documents_truncated", "differs from 0"),
    (lambda s: s["mmbench"].update(headline={"p_at_1": 0.99}), "results.json: mmbench.headline.p_at_1",
     "cannot recompute"),
    (lambda s: s.update(evaluation_time=-5), "results.json: evaluation_time", "not a finite non-negative"),
    (lambda s: s["mmbench"].update(main_metric="ndcg_at_10"), "results.json: mmbench.main_metric", "precision_at_1"),
    (lambda s: s.update(dataset_revision="0" * 64), "results.json: dataset_revision", "content hash"),
])
def test_every_stated_number_is_recomputed_or_refused(results, registry, edit, field, says):
    edit_summary(results, edit)
    got = reasons(results, registry)
    assert field in got and says in got[field], got


def test_the_honest_folder_passes_every_check(results, registry):
    assert validate_submission(results, registry).scores["all"]["n"] == 60


def test_removing_the_digests_does_not_switch_tamper_detection_off(results, registry, capsys):
    edit_summary(results, lambda s: s["mmbench"].pop("files"))
    assert "records no table digests" in reasons(results, registry)["results.json: mmbench.files"]
    with pytest.raises(ResultsError, match="records no table digests"):
        load_results(results)
    other = Path(shutil.copytree(results, results.parent / "other"))
    for argv in (["show", str(results)], ["compare", str(results), str(other)],
                 ["report", str(results), "--out", str(results.parent / "rep")]):
        assert main(argv) == 2, argv
        assert "records no table digests" in capsys.readouterr().err


def test_a_listed_seen_table_that_is_missing_is_an_error(results, registry):
    (results / "seen.parquet").unlink()
    assert "listed in mmbench.files but missing" in reasons(results, registry)["results.json: mmbench.files"]
    with pytest.raises(ResultsError, match="seen.parquet is listed in mmbench.files but missing"):
        load_results(results)


def test_an_unlisted_table_and_a_partial_digest_block_are_errors(results, registry):
    edit_summary(results, lambda s: s["mmbench"]["files"].pop("seen.parquet"))
    with pytest.raises(ResultsError, match="seen.parquet has no digest"):
        load_results(results)
    edit_summary(results, lambda s: s["mmbench"]["files"].update({"../x": "0" * 64}))
    with pytest.raises(ResultsError, match="not a results table"):
        load_results(results)


def test_ranker_tokens_cost_and_repairs_are_recomputed(tmp_path, monkeypatch):
    ps_dir = tmp_path / "fhn"
    get_task("flickr_hard_negatives").build("sample", ps_dir, seed=2, sample_images=30, pool_size=30, n_queries=4,
                                            n_negatives=3, progress=False)
    registry = official_registry(ps_dir, tmp_path / "official.json")
    out = tmp_path / "run"
    reply = lambda req: (200, openai_envelope("Ranking: " + json.dumps(list(range(len(req.images), 0, -1)))))  # noqa: E731
    with FakeLLMServer(reply) as server:
        assert main(["rank", "--task", "flickr_hard_negatives", "--ranker", "openai-chat", "--model", "m", "--base-url",
                     server.url, "--data", str(ps_dir), "--output", str(out), "--no-cache", "--price-input", "1",
                     "--price-output", "2", "--quiet"]) == 0
    assert validate_submission(out, registry).kind == "retrieval"       # the honest ranker run is accepted
    for edit, field in [(lambda s: s["mmbench"]["tokens"].update(input=1), "results.json: mmbench.tokens.input"),
                        (lambda s: s["mmbench"].update(cost_usd=0.0), "results.json: mmbench.cost_usd"),
                        (lambda s: s["mmbench"]["repairs"].update(extracted=0), "results.json: mmbench.repairs.extracted"),
                        (lambda s: s["mmbench"]["cache"].update(hits=4), "results.json: mmbench.cache.hits")]:
        forged = Path(shutil.copytree(out, tmp_path / f"forged-{field.rsplit('.', 1)[1]}"))
        edit_summary(forged, edit)
        assert "recomputed from the tables" in reasons(forged, registry)[field]


def test_ravel_numbers_no_check_covers_are_refused(tmp_path):
    from mmbench.running.ravel_inputs import load_ground_truth

    gt = load_ground_truth()
    llm = gt["llm"].iloc[0]
    rows = gt[gt["llm"] == llm].head(4)
    scores = [{"encoder": e, "llm": llm, "score": float(i)} for i, e in enumerate(rows["encoder"])]
    folder = tmp_path / "ravel"
    folder.mkdir()

    def refused(doc) -> dict[str, str]:
        (folder / "ravel_scores.json").write_text(json.dumps({"task": "ravel", "model": {"name": "p", "settings": {}},
                                                              "scores": scores, **doc}))
        return reasons(folder, None)

    assert "not a field of a RAVEL submission" in refused({"headline_spearman": 0.99})["ravel_scores.json: headline_spearman"]
    scores[0]["rank"] = 1
    assert "unknown field(s) 'rank'" in refused({})["ravel_scores.json: scores[0]"]
    del scores[0]["rank"]
    (folder / "ravel_scores.json").write_text(json.dumps({"task": "ravel", "model": {"name": "p", "settings": {}},
                                                          "scores": scores}))
    assert validate_submission(folder).kind == "ravel"
