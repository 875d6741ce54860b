"""The fresh-draw overfitting test: its error rate by simulation, a memorising model, and protocol ids."""
from __future__ import annotations

import json
from typing import Sequence

import numpy as np
import pytest

from mmbench.evaluators.stats.overfit_gap import overfit_gap
from mmbench.models.base import EmbeddingModel, ModelCard
from mmbench.running.overfit import fresh_seeds
from toy_models import HashingModel


def test_a_fair_model_is_flagged_in_at_most_5_percent_of_200_aa_trials():
    """A/A at the statistic level: the public score and 5 fresh scores are exchangeable draws of one
    distribution (a model that did not adapt to the public draw)."""
    rng = np.random.default_rng(11)
    flags = [overfit_gap(x[0], x[1:]).flagged for x in rng.normal(0.6, 0.03, size=(200, 6))]
    assert np.mean(flags) <= 0.05


def test_the_flag_rate_of_a_fair_model_is_alpha_over_two():
    rng = np.random.default_rng(12)
    for fresh in (2, 5, 10):
        flags = [overfit_gap(x[0], x[1:], alpha=0.1).flagged for x in rng.normal(0.4, 0.05, size=(2_000, fresh + 1))]
        assert np.mean(flags) == pytest.approx(0.05, abs=0.011)


def test_a_shifted_public_score_is_flagged_and_the_interval_is_the_t_prediction_interval():
    from scipy import stats

    fresh = [0.50, 0.52, 0.49, 0.51, 0.50]
    g = overfit_gap(0.60, fresh)
    half = stats.t.ppf(0.975, 4) * np.std(fresh, ddof=1) * np.sqrt(1 + 1 / 5)
    assert g.half_width == pytest.approx(half) and g.gap == pytest.approx(0.60 - np.mean(fresh))
    assert g.flagged and g.p_value < 0.01
    assert not overfit_gap(0.40, fresh).flagged  # lower on the public draw: not overfitting
    with pytest.raises(ValueError, match="at least 2 fresh draws"):
        overfit_gap(0.5, [0.5])


def test_fresh_seeds_are_private_distinct_and_repeatable():
    a = fresh_seeds("s3cret", 5, public=0)
    assert a == fresh_seeds("s3cret", 5, public=0) and len(set(a)) == 5 and 0 not in a
    assert fresh_seeds("other", 5, public=0) != a


class Memoriser(EmbeddingModel):
    """Memorised the public draw: gives each public query and its relevant candidates (by their ids in the public
    draw) a shared secret direction; everything else gets hashed bag-of-words vectors (a weak fair model)."""

    def __init__(self, public) -> None:
        self.key: dict[str, int] = {}
        for i, item in enumerate(public.pools):
            for doc_id in (item.query_id, *item.relevant_ids):
                self.key.setdefault(doc_id, i)
        self.words = HashingModel(dim=64, modalities=("text", "image"))
        self.card = ModelCard(name="memoriser", family="test", modalities=frozenset({"text", "image"}),
                              max_tokens=None, dim=64 + len(public.pools), settings={"public": public.content_hash})

    def encode(self, documents: Sequence, role, media) -> np.ndarray:
        bow = self.words.encode(documents, role, media)
        bow /= np.linalg.norm(bow, axis=1, keepdims=True)
        out = np.zeros((len(documents), self.card.dim), dtype=np.float32)
        out[:, :64] = bow
        for i, d in enumerate(documents):
            if d.id in self.key:
                out[i, 64 + self.key[d.id]] = 10.0
        return out


@pytest.fixture(scope="module")
def draws(tmp_path_factory):
    import os

    from mmbench.running.draws import build_draws
    from mmbench.tasks import get_task

    home = tmp_path_factory.mktemp("home")
    old = os.environ.get("MMBENCH_HOME")
    os.environ["MMBENCH_HOME"] = str(home)
    try:
        spec = get_task("multi_source_reasoning")
        yield spec, build_draws(spec, [0, *fresh_seeds("keeper", 3, 0)], params={"lengths": [8192]})
    finally:
        if old is None:
            os.environ.pop("MMBENCH_HOME")
        else:
            os.environ["MMBENCH_HOME"] = old


def _options():
    from mmbench.running.runner import RunOptions

    return RunOptions(use_cache=False, progress=False)


def test_a_model_that_memorised_the_public_draw_shows_a_significant_gap(draws, tmp_path):
    from mmbench.running.overfit import overfit_markdown, overfit_test

    spec, (public, *fresh) = draws
    data = overfit_test(Memoriser(public), "memoriser", spec, public, fresh, tmp_path / "mem", _options(), "precision_at_1")
    assert data["public"]["score"] == 1.0
    assert data["gap"]["flagged"] and data["gap"]["gap"] > 0.2
    assert "**flagged**" in overfit_markdown(data)


def test_fresh_draw_results_carry_their_own_protocol_id(draws, tmp_path):
    from mmbench.results.protocol import join_problems
    from mmbench.running.draws import run_over_draws

    spec, (public, *fresh) = draws
    model = HashingModel(dim=64)
    marked = run_over_draws(model, "hashing", spec, fresh[:1], tmp_path / "fresh", _options(), fresh=True)[0]
    plain = run_over_draws(model, "hashing", spec, fresh[:1], tmp_path / "plain", _options())[0]
    assert marked.info["protocol"]["evaluation"]["draw"] == "fresh (secret seed)"
    assert marked.info["protocol_id"].split(".")[0] != plain.info["protocol_id"].split(".")[0]
    rows = [(str(r.root), "hashing", r.content_hash, r.info["protocol"]) for r in (marked, plain)]
    assert any("evaluation protocol differs" in p and "draw" in p for p in join_problems(rows))
    on_disk = json.loads((marked.root / "results.json").read_text())
    assert on_disk["mmbench"]["protocol_id"] == marked.info["protocol_id"]


def test_the_board_shows_the_gap_and_flags_a_significant_one(tmp_path):
    from mmbench.leaderboards.overfit import file_report, overfit_section
    from mmbench.leaderboards.site import build_site
    from mmbench.leaderboards.store import Board

    from dataclasses import dataclass

    from mmbench.results.report_checks import model_record

    def info(model):   # what overfit_section reads of the board's run (issue 45: the report is checked against it)
        return {"model": {"name": model, "family": "test"}, "protocol_id": "a.b", "task_version": "1",
                "content_hash": "h0", "protocol": {"evaluation": {"truncation_rule": "middle"}}}

    @dataclass
    class FakeEntry:   # the fields overfit_section reads of a board entry
        model_name: str
        id: str
        task: str = "multi_source_reasoning"
        kind: str = "retrieval"
        submitted_at: str = "2026-12-04"

    def report(model, public):
        gap = overfit_gap(public, [0.50, 0.52, 0.49, 0.51, 0.50]).to_dict()
        return {"kind": "mmbench.overfit", "task": "multi_source_reasoning", "model": model, "metric": "precision_at_1",
                "public": {"content_hash": "h0", "protocol_id": "a.b", "score": public, "results": "/keeper/private"},
                "fresh": [{"content_hash": "h1", "protocol_id": "c.b", "score": 0.5, "results": "/keeper/private"}],
                "gap": gap, "made_from": {"task_version": "1", "design": None, "models": {model: model_record(info(model))}}}

    board = Board(tmp_path / "board")
    stored = file_report(board.root, report("memoriser", 0.9))
    file_report(board.root, report("fair", 0.51))
    assert "/keeper/private" not in stored.read_text()
    entries, info_of = [FakeEntry("memoriser", "1"), FakeEntry("fair", "2")], lambda e: info(e.model_name)
    html = overfit_section(board.root, entries, info_of)
    assert html.count("<tr>") == 3 and html.count("significant: fitted to the public draw?") == 1
    assert html.count("not flagged (detectable gap at 80% power: ") == 1
    assert overfit_section(tmp_path / "empty", entries, info_of) == ""
    (board.root / "overfit" / "broken.json").write_text("{")
    assert "Unreadable report broken.json" in overfit_section(board.root, entries, info_of)
    site = build_site(board, tmp_path / "site")
    assert "Fresh-draw overfitting tests" in (site / "index.html").read_text()


def test_mmbench_overfit_end_to_end(tmp_path, monkeypatch, capsys):
    from mmbench.cli import main

    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    out, board = tmp_path / "of", tmp_path / "board"
    args = ["overfit", "--task", "multi_source_reasoning", "--param", "lengths=[8192]", "--model", "bm25",
            "--secret-seed", "k", "--fresh", "2", "--out", str(out), "--board", str(board)]
    assert main([*args, "--commit"]) == 0            # before any fresh draw: the salted hash, on the board
    committed = json.loads((board / "overfit" / "commitments" / "multi_source_reasoning.json").read_text())
    assert committed["commitment"] and "k" not in (committed["salt"], committed["commitment"])
    assert not list((tmp_path / "home" / "draws").glob("*/seed[1-9]*"))   # no fresh draw built yet
    wrong = [a if a != "k" else "k2" for a in args]
    assert main(wrong) == 2 and "does not match the commitment" in capsys.readouterr().err
    assert main(args) == 0
    data = json.loads((out / "overfit.json").read_text())
    assert data["gap"]["n_fresh"] == 2 and len({f["content_hash"] for f in data["fresh"]}) == 2
    assert data["commitment"]["verified"] and data["gap"]["item_se"] > 0 and data["renews"]
    assert data["public"]["protocol_id"] not in {f["protocol_id"] for f in data["fresh"]}
    assert (out / "public").is_dir() and (out / "fresh").is_dir()
    assert "Gap public − fresh" in capsys.readouterr().out
    assert list((board / "overfit").glob("*.json"))
    assert main([*args[:-4], "--fresh", "1"]) == 2
