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
from mmbench.leaderboards.modelmeta import MetadataError, check_fields, display_name, redact_paths, resolve
from mmbench.leaderboards.store import Entry
from mmbench.results.store import RunResults


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
    assert [c.key for c in t.columns][4:] == ["difficulty=easy", "difficulty=hard", "length_bin=256", "length_bin=1k"]
    # lengths in nominal order, not text order; per-subset scores stay on the model pages
    assert t.rows[0]["macro"] == 0.9  # one subset: macro falls back to the micro average
    assert t.rows[1]["macro"] == 0.4 and t.rows[1]["difficulty=hard"] == 0.3
    assert t.rows[0]["difficulty=easy"] is None
    vg = visual_grounding_table([a, b])
    assert vg.rows[0]["length_bin=256"] == 0.95


def test_a_plugin_task_named_like_a_benchmark_task_is_not_on_its_board(monkeypatch):
    """Board membership is the registry's benchmark declaration, not the task's name or reference text."""
    import dataclasses

    import mmbench.tasks as task_registry
    from mmbench.tasks import get_task, register_task

    monkeypatch.setattr(task_registry, "_TASKS", dict(task_registry._TASKS))
    register_task(dataclasses.replace(get_task("visual_grounding"), name="my_niah"))   # reference "MMLongEmbed ..."
    register_task(dataclasses.replace(get_task("flickr_hard_negatives"), name="flickr_custom"))  # "(seed 003)"
    scores = {"all": {"precision_at_1": 0.5}}
    entries = [entry("a", "visual_grounding", scores), entry("b", "my_niah", scores), entry("c", "flickr_custom", {}),
               entry("d", "flickr_hard_negatives", {})]
    assert [r["task"] for r in mmlongembed_table(entries).rows] == ["visual_grounding"]
    per_query = pd.DataFrame({"recall_at_1": [1.0, 0.0], "recall_at_3": [1.0, 1.0], "mrr": [1.0, 0.5]})
    fl = flickr_table(entries, loader=lambda _: RunResults(per_query, pd.DataFrame(), {}), resamples=50)
    assert [r["task"] for r in fl.rows] == ["flickr_hard_negatives"]


def test_ravel_table_means_and_downloads_neutralise_formulas():
    e = entry("=HYPERLINK(\"x\")", "ravel", {"llm=Qwen3-1.7B": {"spearman": 0.5, "pearson": 0.4, "n": 10},
                                             "llm=SmolLM2-1.7B": {"spearman": 0.7, "pearson": 0.6, "n": 10}}, kind="ravel")
    t = ravel_table([e])
    assert t.rows[0]["mean_spearman"] == pytest.approx(0.6)
    assert t.rows[0]["llm=Qwen3-1.7B:n"] == 10 and t.rows[0]["llm=Qwen3-1.7B:spearman"]["estimate"] == 0.5
    rows = list(csv.DictReader(io.StringIO(t.to_csv())))
    assert rows[0]["model"].startswith("'=")  # a spreadsheet shows it as text instead of running it
    assert float(rows[0]["llm=Qwen3-1.7B:spearman"]) == 0.5
    assert float(rows[0]["llm=Qwen3-1.7B:spearman_ci_low"]) < 0.5 < float(rows[0]["llm=Qwen3-1.7B:spearman_ci_high"])
    assert rows[-1]["baseline"] == "True" and rows[-1]["model"].startswith("random predictor")
    assert t.to_json()["rows"][0]["model"] == e.model_name  # JSON keeps the exact name


def test_ravel_submission_reaches_the_site(tmp_path):
    import json

    from mmbench.running.ravel_inputs import load_ground_truth
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


def test_ravel_rho_interval_and_the_random_predictor_range():
    """Six encoders: ρ = 0.71 has a Fisher-z CI reaching below 0, and lies inside a random predictor's 95 % range."""
    from mmbench.evaluators.stats.correlation import spearman_null_interval

    e = entry("random-ish", "ravel", {"llm=Qwen3-1.7B": {"spearman": 0.71, "pearson": 0.5, "n": 6}}, kind="ravel")
    t = ravel_table([e])
    rho = t.rows[0]["llm=Qwen3-1.7B:spearman"]
    z, se = np.arctanh(0.71), np.sqrt((1 + 0.71 ** 2 / 2) / 3)
    assert (rho["low"], rho["high"]) == pytest.approx((np.tanh(z - 1.959964 * se), np.tanh(z + 1.959964 * se)), abs=1e-6)
    assert rho["low"] < 0
    chance = t.baselines[0]
    assert chance["llm=Qwen3-1.7B:n"] == 6
    low, high = chance["llm=Qwen3-1.7B:spearman"]["low"], chance["llm=Qwen3-1.7B:spearman"]["high"]
    assert (low, high) == spearman_null_interval(6) and low < 0.71 < high


def test_flickr_and_grounding_boards_have_a_random_ranking_row():
    from mmbench.evaluators.metrics import chance_metrics

    rng = np.random.default_rng(0)
    pool = 8
    per_query = pd.DataFrame({"recall_at_1": rng.integers(0, 2, 50).astype(float),
                              "recall_at_3": rng.integers(0, 2, 50).astype(float), "mrr": rng.random(50),
                              "precision_at_1": rng.integers(0, 2, 50).astype(float),
                              "ranked_ids": [[f"c{i}" for i in range(pool)]] * 50, "relevant_ids": [["c0"]] * 50,
                              "depth": [0.0, 0.5] * 25})
    load = lambda _: RunResults(per_query, pd.DataFrame(), {})
    fl = flickr_table([entry("clip", "flickr_hard_negatives", {})], loader=load, resamples=100)
    (chance,) = fl.baselines
    expected = chance_metrics(pool, 1)
    for key in ("recall_at_1", "recall_at_3", "mrr"):
        assert chance[key]["estimate"] == pytest.approx(expected[key])
    assert chance["recall_at_3"]["estimate"] == pytest.approx(3 / pool)
    vg = visual_grounding_table([entry("m", "visual_grounding", {"all": {"precision_at_1": 0.5},
                                                                 "depth=0.5": {"precision_at_1": 0.4}})], loader=load)
    assert vg.baselines[0]["all"] == pytest.approx(1 / pool) and vg.baselines[0]["depth=0.5"] == pytest.approx(1 / pool)
    assert [r.get("baseline") for r in vg.records()] == [None, True, True]   # the chance row, the floor row


def test_local_paths_never_show_as_model_names():
    assert display_name("/home/alice/ckpt/gme-2b/") == "gme-2b (local)"
    assert display_name("C:\\models\\clip") == "clip (local)"
    assert display_name("./runs/x") == "x (local)"
    assert display_name("~/m") == "m (local)"
    assert display_name("org/model") == "org/model"  # a hub id stays
    assert display_name("minilm") == "minilm"
    shown = redact_paths({"name": "/srv/w/e5-v", "settings": {"model_path": "/srv/w/e5-v", "pooling": "last"}})
    assert shown == {"name": "e5-v (local)", "settings": {"model_path": "e5-v (local)", "pooling": "last"}}


def test_metadata_comes_from_board_then_registry_then_card():
    card = {"name": "/data/all-MiniLM-L6-v2", "dim": 999, "max_tokens": 128, "modalities": ["text"], "settings": {}}
    m = resolve(card)
    # the context window is the run's own (its protocol line's); the registry's (254, the same for a default run) fills in
    assert (m.parameters, m.dim, m.context, m.license) == (22_713_216, 384, 128, "apache-2.0")
    assert m.weights == "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2" and m.source == "card, registry:minilm"
    assert resolve({**card, "max_tokens": None}).context == 254
    own = resolve(card, {"/data/all-MiniLM-L6-v2": {"license": "custom", "dim": 128}})
    assert own.license == "custom" and own.dim == 128 and own.parameters == 22_713_216
    unknown = resolve({"name": "my-model", "dim": 64, "max_tokens": 512, "modalities": ["image", "text"]})
    assert (unknown.parameters, unknown.dim, unknown.context, unknown.modalities) == (None, 64, 512, ("text", "image"))
    assert unknown.source == "card"
    for bad, field in (({"parameters": -3}, "parameters"), ({"weights": "javascript:alert(1)"}, "weights"),
                       ({"modalities": "text,smell"}, "modalities"), ({"license": "<b>"}, "license"), ({"size": 1}, "size")):
        with pytest.raises(MetadataError, match=field):
            check_fields(bad, "test")


def test_describe_cli_writes_board_metadata_and_rejects_bad_values(tmp_path, capsys):
    import json

    from mmbench.cli import main
    from mmbench.leaderboards.store import Board

    Board(tmp_path / "b")
    assert main(["leaderboard", "describe", "x", "--board", str(tmp_path / "b"), "--parameters", "5", "--license", "mit"]) == 0
    assert main(["leaderboard", "describe", "x", "--board", str(tmp_path / "b"), "--weights", "javascript:x"]) == 2
    assert "weights" in capsys.readouterr().err
    data = json.loads((tmp_path / "b" / "model_metadata.json").read_text())
    assert data == {"x": {"parameters": 5, "license": "mit"}}


@pytest.mark.parametrize("task", ["visual_grounding", "multi_source_reasoning", "logical_summarization",
                                  "temporal_summarization", "flickr_hard_negatives"])
def test_shipped_official_hash_matches_a_fresh_sample_build(task, official_home):
    """Every default sample builds to its shipped official hash on this machine (CI runs it on a fresh one):
    a builder change that alters a sample must come with a new task version and regenerated hashes, and a
    hash that depends on the machine (floats, codecs, threads) shows up here."""
    from mmbench.leaderboards.official import OfficialRegistry, shipped_path
    from mmbench.tasks import get_task

    from official_samples import official_sample

    spec = get_task(task)
    ps = official_sample(official_home, task)   # built fresh in this session, kept for tests/test_reproduce.py
    entry = OfficialRegistry.load(shipped_path()).get(task, spec.version)
    assert ps.manifest["content_hash"] == entry.content_hash, (
        f"{task}: the default sample build no longer matches leaderboards/data/official_hashes.json; "
        "regenerate it (README, 'Official pool sets')")
    # the counts `mmbench list tasks` prints without building are this build's
    from mmbench.cli.commands_core import sample_runtimes

    figures = sample_runtimes()["tasks"][task]
    if figures["version"] == spec.version:
        assert (figures["items"], figures["candidates"]) == (len(ps.pools), len(ps.candidates)), (
            f"{task}: leaderboards/data/sample_runtimes.json is stale; run perf/sample_runtimes.py --write it")



def _run(rng, pool: int, n: int, p_hit: float, difficulty: bool, truncated: int, unseen: int) -> RunResults:
    hits = (rng.random(n) < p_hit).astype(float)
    pq = pd.DataFrame({"precision_at_1": hits, "recall_at_1": hits, "ranked_ids": [[f"c{i}" for i in range(pool)]] * n,
                       "relevant_ids": [["c0"]] * n})
    if difficulty:
        pq["difficulty"] = ["easy", "hard"] * (n // 2)
    seen = pd.DataFrame({"doc_id": [f"d{i}" for i in range(40)]})
    return RunResults(pq, seen, {"mmbench": {"documents_truncated": truncated, "documents_with_unseen_modalities": unseen}})


def test_main_board_one_row_per_model_mean_rank_easy_hard_and_seen_shares():
    from mmbench.leaderboards.matrix import overview_table, size_class
    from mmbench.leaderboards.modelmeta import ModelMeta

    rng = np.random.default_rng(5)
    runs = {("/ckpt/a", "visual_grounding"): _run(rng, 10, 40, 0.8, False, 4, 0),
            ("/ckpt/a", "multi_source_reasoning"): _run(rng, 20, 40, 0.6, True, 10, 20),
            ("b", "visual_grounding"): _run(rng, 10, 40, 0.3, False, 0, 0),
            ("b", "multi_source_reasoning"): _run(rng, 20, 40, 0.9, True, 0, 0),
            ("c", "visual_grounding"): _run(rng, 10, 40, 0.5, False, 0, 0)}
    entries = [entry(m, t, {}) for m, t in runs]
    entries = [Entry(**{**e.__dict__, "id": f"{i:08d}", "submitted_at": f"t{i}"}) for i, e in enumerate(entries)]
    by_id = {e.id: runs[(e.model_name, e.task)] for e in entries}
    t = overview_table(entries, lambda e: by_id[e.id], lambda e: ModelMeta(parameters=2_000_000_000), resamples=200)
    keys = [c.key for c in t.columns]
    assert keys[:12] == ["rank", "model", "multi_source_reasoning", "multi_source_reasoning:easy",
                         "multi_source_reasoning:hard", "multi_source_reasoning:seen", "multi_source_reasoning:place",
                         "visual_grounding", "visual_grounding:seen", "visual_grounding:place", "mean",
                         "place"]  # Easy/Hard only where the task has them
    # a and b ran both tasks: ranked on the mean with intervals and tiers; c only on its task
    assert {r["model"] for r in t.rows if r.get("place")} == {"a (local)", "b"}
    assert all(r.get("visual_grounding:place") for r in t.rows)
    floor = next(b for b in t.baselines if b["model"].startswith("resolution floor"))
    from mmbench.evaluators.stats.floors import design_floor
    assert floor["visual_grounding"]["estimate"] == pytest.approx(design_floor(40).mde)
    rows = {r["model"]: r for r in t.rows}
    assert set(rows) == {"a (local)", "b", "c"}  # one row per model; the path is not shown
    a = rows["a (local)"]
    vg, msr = runs[("/ckpt/a", "visual_grounding")].per_query, runs[("/ckpt/a", "multi_source_reasoning")].per_query
    assert a["visual_grounding"]["estimate"] == pytest.approx(vg["precision_at_1"].mean())
    assert a["visual_grounding"]["low"] <= a["visual_grounding"]["estimate"] <= a["visual_grounding"]["high"]
    assert a["multi_source_reasoning:hard"] == pytest.approx(msr[msr.difficulty == "hard"]["precision_at_1"].mean())
    assert a["mean"] == pytest.approx((vg["precision_at_1"].mean() + msr["precision_at_1"].mean()) / 2)
    assert a["multi_source_reasoning:seen"]["truncated_share"] == pytest.approx(10 / 40)
    assert a["multi_source_reasoning:seen"]["unseen_share"] == pytest.approx(20 / 40)
    assert rows["c"]["mean"] is None and "rank" not in rows["c"]  # c did not run every task: no mean, no rank
    ranked = sorted((rows["a (local)"], rows["b"]), key=lambda r: -r["mean"])
    assert [r["rank"] for r in ranked] == [1, 2] and t.rows[-1]["model"] == "c"
    # Easy and Hard each get the floor of their own items (20 of the 40 each), larger than the task's
    assert floor["multi_source_reasoning:easy"] == pytest.approx(design_floor(20).mde)
    assert floor["multi_source_reasoning:hard"] == pytest.approx(design_floor(20).mde)
    assert floor["multi_source_reasoning:easy"] > floor["multi_source_reasoning"]["estimate"]
    assert "visual_grounding:easy" not in floor
    chance, _floor = t.baselines
    assert chance["visual_grounding"]["estimate"] == pytest.approx(1 / 10)
    assert chance["multi_source_reasoning:easy"] == pytest.approx(1 / 20)
    assert chance["mean"] == pytest.approx((1 / 10 + 1 / 20) / 2)
    assert [size_class(p) for p in (None, 5e8, 2e9, 7e9, 7e10)] == ["unknown", "<1B", "1-3B", "3-10B", ">10B"]
    again = entries + [Entry(**{**entries[2].__dict__, "id": "zz000000", "submitted_at": "t9"})]
    by_id["zz000000"] = by_id[entries[2].id]
    t2 = overview_table(again, lambda e: by_id[e.id], lambda e: ModelMeta(), resamples=50)
    assert {r["model"] for r in t2.rows} == {"a (local)", "b", "b #2", "c"}  # a second submission of b to one task


def _binned_run(bins: dict[str, int], subsets: dict[str, int], errors: int = 0) -> RunResults:
    """Per-query rows: `bins` gives each length bin's item count, `subsets` each subset's (in row order),
    alternating Easy/Hard; the first `errors` items failed."""
    n = sum(bins.values())
    assert sum(subsets.values()) == n
    pq = pd.DataFrame({"item_id": [f"i{k:03d}" for k in range(n)], "precision_at_1": [float(k % 3 == 0) for k in range(n)],
                       "length_bin": [b for b, c in bins.items() for _ in range(c)],
                       "subset": [s for s, c in subsets.items() for _ in range(c)],
                       "difficulty": ["easy", "hard"] * (n // 2) + ["easy"] * (n % 2),
                       "ranked_ids": [["c0", "c1", "c2", "c3"]] * n, "relevant_ids": [["c0"]] * n})
    pq["error"] = [("failed" if k < errors else None) for k in range(n)]
    return RunResults(pq, pd.DataFrame(), {})


def _floor_of_a_mean(n: int) -> float:
    """The design-time floor recomputed here: the difference d at which a two-sided paired t-test on n items with
    per-item differences of variance 0.5 - d² reaches 80 % power (scipy's noncentral t, brentq), searched around
    the normal approximation 2.8 · sqrt(0.5 / n)."""
    from scipy import optimize

    def power(d):
        crit = stats.t.ppf(0.975, n - 1)
        nc = d * np.sqrt(n) / np.sqrt(0.5 - d * d)
        lower = stats.nct.cdf(-crit, n - 1, nc)   # the wrong-sign tail: about 0, NaN in scipy far out
        return stats.nct.sf(crit, n - 1, nc) + (0.0 if np.isnan(lower) else lower)

    guess = 2.8 * np.sqrt(0.5 / n)
    return optimize.brentq(lambda d: power(d) - 0.8, guess / 2, min(2 * guess, 0.7), xtol=1e-10)


def test_subset_boards_show_a_resolution_floor_per_length_bin_and_difficulty():
    """The MMLongEmbed and Visual Grounding boards: the floor row holds each column's floor from the items that
    column averages, so a small length bin shows a larger floor than a large one (issue 25)."""
    run = _binned_run({"256": 60, "1k": 20}, {"a/easy": 60, "b/hard": 20}, errors=4)
    entries = [entry("a", "visual_grounding", {"all": {"precision_at_1": 0.4}, "length_bin=256": {"precision_at_1": 0.5},
                                               "length_bin=1k": {"precision_at_1": 0.3},
                                               "difficulty=easy": {"precision_at_1": 0.5},
                                               "difficulty=hard": {"precision_at_1": 0.3}})]
    loader = lambda e: run  # noqa: E731
    t = mmlongembed_table(entries, loader)
    chance, floor = t.baselines
    assert chance["model"].startswith("random ranking") and chance["micro"] == pytest.approx(0.25)
    assert floor["model"].startswith("resolution floor") and floor["task"] == "visual_grounding"
    # failed items are not averaged: 56 scored in 256, 20 in 1k, 76 in all; Easy 38, Hard 38
    assert floor["length_bin=256"] == pytest.approx(_floor_of_a_mean(56), abs=1e-6)
    assert floor["length_bin=1k"] == pytest.approx(_floor_of_a_mean(20), abs=1e-6)
    assert floor["micro"] == pytest.approx(_floor_of_a_mean(76), abs=1e-6)
    assert floor["difficulty=easy"] == pytest.approx(_floor_of_a_mean(38), abs=1e-6)
    assert floor["length_bin=1k"] > floor["length_bin=256"] > floor["micro"]
    # the macro over subsets of 56 and 20 scored items: as precise as a mean over 4 / (1/56 + 1/20) = 58.9 -> 58
    assert floor["macro"] == pytest.approx(_floor_of_a_mean(58), abs=1e-6)
    assert "resolution floor" in t.description.lower()
    flat = [r for r in t.records() if r.get("baseline") and str(r["model"]).startswith("resolution floor")]
    assert flat and flat[0]["length_bin=1k"] == floor["length_bin=1k"]
    vg = visual_grounding_table(entries, loader)
    vg_floor = next(b for b in vg.baselines if b["model"].startswith("resolution floor"))
    assert vg_floor["all"] == pytest.approx(_floor_of_a_mean(76), abs=1e-6)
    assert vg_floor["length_bin=256"] == floor["length_bin=256"] and "depth=0.5" not in vg_floor
    assert visual_grounding_table(entries).baselines == []   # no per-query tables: no baseline rows at all


def test_a_model_page_shows_each_groups_floor():
    from mmbench.leaderboards.boards import aggregates_table

    e = entry("a", "multi_source_reasoning", {
        "all": {"n": 80, "precision_at_1": 0.5}, "macro_over_subsets": {"n": 80, "precision_at_1": 0.45},
        "subset=x": {"n": 60, "precision_at_1": 0.6}, "subset=y": {"n": 20, "precision_at_1": 0.3},
        "length_bin=8k": {"n": 1, "precision_at_1": 1.0}})
    rows = {r["group"]: r for r in aggregates_table(e).rows}
    assert rows["all"]["floor"] == pytest.approx(_floor_of_a_mean(80), abs=1e-6)
    assert rows["subset=y"]["floor"] == pytest.approx(_floor_of_a_mean(20), abs=1e-6)
    assert rows["macro_over_subsets"]["floor"] == pytest.approx(_floor_of_a_mean(60), abs=1e-6)  # 4/(1/60+1/20) = 60
    assert rows["length_bin=8k"]["floor"] is None   # one item detects nothing


def test_the_efficiency_board_shows_figures_in_the_terminal_s_units():
    """Issue 47 #3: the board printed `Tokens/s 4276254.559` and `Peak RSS MB 434.400` where `mmbench run` prints
    `4,276,255 tokens/s` and `434 MB`; the cell shows the terminal's text, the sort value stays the raw number."""
    from mmbench.leaderboards.efficiency import COLUMNS
    from mmbench.leaderboards.site import _cell
    from mmbench.results.summary import efficiency_lines

    eff = {"device": "cpu", "backend": "local", "documents_per_second": 12.345, "tokens_per_second": 4276254.559,
           "documents": 10, "time_to_first_vector_seconds": 0.5, "load_seconds": 1.25, "peak_rss_mb": 434.4}
    terminal = efficiency_lines(eff)[0]
    cols = {c.key: c for c in COLUMNS}
    tokens = _cell(cols["tokens_per_second"], eff, "")
    memory = _cell(cols["peak_rss_mb"], eff, "")
    assert "4,276,255\u00a0tokens/s" in tokens and "4,276,255 tokens/s" in terminal
    assert 'data-value="4276254.559"' in tokens
    assert "434\u00a0MB" in memory and "peak RSS 434 MB" in terminal
    assert "12.35\u00a0docs/s" in _cell(cols["documents_per_second"], eff, "") and "12.35 docs/s" in terminal
