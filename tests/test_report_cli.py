"""`mmbench compare` and `mmbench report` on synthetic results folders written to disk."""
import json

import numpy as np
import pytest
from PIL import Image
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from mmbench.cli import analysis
from mmbench.results.store import load_results

from report_helpers import DEPTHS, LENGTHS, grounding_per_query, real_per_query, write_run


def run_cli(argv):
    """The real `mmbench` entry point when the core CLI is importable, else the same commands stand-alone."""
    try:
        from mmbench.cli import main
    except ImportError:
        main = analysis.main
    return main(argv)


@pytest.fixture(scope="module")
def grounding_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("vg")
    a = write_run(root / "a", grounding_per_query(0, skill=0.75), "model-a")
    b = write_run(root / "b", grounding_per_query(1, skill=0.55, mixed_loss=0.25), "model-b")
    c = write_run(root / "c", grounding_per_query(2, skill=0.5, mid_loss=0.0), "model-c")
    return root, [a, b, c]


def test_compare_numbers_match_scipy(grounding_runs, capsys):
    root, paths = grounding_runs
    out = root / "cmp"
    assert run_cli(["compare", *map(str, paths), "--resamples", "2000", "--out", str(out)]) == 0
    md = (out / "compare.md").read_text()
    data = json.loads((out / "compare.json").read_text())
    assert "Paired t-test" in md and "McNemar" in md and "Wilcoxon" in md and "contingency" in md
    assert "micro" in md and "macro" in md
    assert len(data["pairs"]) == 3 and data["n_items"] == 432
    runs = [load_results(p).per_query.set_index("item_id").sort_index() for p in paths]
    pair = data["pairs"][0]
    assert (pair["a"], pair["b"]) == ("model-a", "model-b")
    a, b = runs[0], runs[1]
    t = stats.ttest_rel(a["precision_at_1"], b["precision_at_1"])
    assert pair["ttest"]["t"] == pytest.approx(t.statistic) and pair["ttest"]["p_value"] == pytest.approx(t.pvalue)
    table = [[int(((a.recall_at_1 == 1) & (b.recall_at_1 == 1)).sum()), int(((a.recall_at_1 == 1) & (b.recall_at_1 == 0)).sum())],
             [int(((a.recall_at_1 == 0) & (b.recall_at_1 == 1)).sum()), int(((a.recall_at_1 == 0) & (b.recall_at_1 == 0)).sum())]]
    assert pair["mcnemar"]["table"] == table
    ref = sm_mcnemar(np.array(table), exact=(table[0][1] + table[1][0]) < 25, correction=True)
    assert pair["mcnemar"]["p_value"] == pytest.approx(ref.pvalue)
    w = stats.wilcoxon(a["mrr"], b["mrr"])
    assert pair["wilcoxon"]["p_value"] == pytest.approx(w.pvalue)
    # Bonferroni over the three pairs
    for fam in ("ttest", "mcnemar", "wilcoxon"):
        for p in data["pairs"]:
            assert p[fam]["p_bonferroni"] == pytest.approx(min(1.0, 3 * p[fam]["p_value"]))
    ci = data["runs"][0]["bootstrap_ci"]
    assert set(ci) >= {"recall_at_1", "recall_at_3", "mrr"} and ci["recall_at_1"]["resamples"] == 1000
    ref_ci = stats.bootstrap((a["recall_at_3"].to_numpy(),), np.mean, n_resamples=1000, method="percentile",
                             rng=np.random.default_rng(0)).confidence_interval
    assert (ci["recall_at_3"]["low"], ci["recall_at_3"]["high"]) == pytest.approx((ref_ci.low, ref_ci.high))
    assert data["runs"][0]["micro"]["precision_at_1"] == pytest.approx(a["precision_at_1"].mean())
    assert "macro average over 6 subsets" == data["runs"][0]["macro"]["label"]


def test_compare_refuses_different_pool_sets(grounding_runs, tmp_path, capsys):
    _, paths = grounding_runs
    other = write_run(tmp_path / "other", grounding_per_query(3), "model-d", content_hash="hash-bbbb")
    assert run_cli(["compare", str(paths[0]), str(other)]) == 2
    err = capsys.readouterr().err
    assert "content hash" in err and "hash-bbbb" in err
    assert run_cli(["compare", str(paths[0])]) == 2
    assert run_cli(["compare", str(paths[0]), str(paths[1]), "--metric", "no_such_metric"]) == 2
    assert run_cli(["report", str(paths[0]), "--metric", "no_such_metric", "--out", str(tmp_path / "r")]) == 2
    assert run_cli(["compare", str(paths[0]), str(tmp_path / "missing")]) == 2


def test_report_figures_and_json(grounding_runs, tmp_path):
    root, paths = grounding_runs
    real_a = write_run(tmp_path / "ra", real_per_query(0), "model-a", task="multi_source_reasoning", content_hash="hash-r")
    real_b = write_run(tmp_path / "rb", real_per_query(1, easy=0.6, hard=0.1), "model-b", task="multi_source_reasoning",
                       content_hash="hash-r")
    out = tmp_path / "report"
    assert run_cli(["report", str(paths[0]), str(paths[1]), str(real_a), str(real_b), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    data = json.loads((out / "report.json").read_text())
    tasks = {t["task"]: t for t in data["tasks"]}
    assert set(tasks) == {"visual_grounding", "multi_source_reasoning"}
    vg, real = tasks["visual_grounding"], tasks["multi_source_reasoning"]

    # heatmap: rows = models, columns = anchor kinds
    fig = vg["figures"]["heatmap"]
    assert (fig["rows"], fig["cols"]) == (2, 2)
    assert fig["panels"] == ["model-a | image anchor", "model-a | text anchor", "model-b | image anchor", "model-b | text anchor"]
    hm = [h for h in vg["heatmaps"] if h["label"] == "model-a" and h["anchor_kind"] == "text"][0]
    assert hm["lengths"] == LENGTHS and hm["depths"] == DEPTHS and hm["metric"] == "precision_at_5"
    pq = load_results(paths[0]).per_query
    cell = pq[(pq.anchor_kind == "text") & (pq.depth == 0.4) & (pq.length_bin == "4k")]["precision_at_5"].mean()
    assert hm["values"][2][2] == pytest.approx(cell)

    # positional bias: planted mid-sequence loss for both models
    pb = {(e["label"], e["rows"]): e["result"] for e in vg["positional_bias"]}
    assert pb[("model-a", "all")]["depth_wald"]["df"] == 5
    assert pb[("model-a", "all")]["quadratic_coef"] > 0

    # modality robustness: model-b has a planted mixed-background loss
    rob = {r["label"]: r for r in vg["modality_robustness"]}
    assert rob["model-b (text anchor)"]["kind"] == "disrupted by mixed noise"
    assert rob["model-b (image anchor)"]["kind"] == "disrupted by mixed noise"
    s = rob["model-a (text anchor)"]["scores"]
    assert rob["model-a (text anchor)"]["sd"] == pytest.approx(np.std([s["text"], s["mixed"], s["image"]], ddof=1))

    # real task: per-length curves per dataset, Easy vs Hard
    curves = real["figures"]["length_curves"]
    assert curves["panels"] == ["multi_source_reasoning / hotpotqa", "multi_source_reasoning / mmdocrag"]
    eh = real["figures"]["easy_vs_hard"]
    assert eh["panels"] == curves["panels"]
    drops = {(r["label"], r["group"]): r for r in real["easy_hard"]}
    r = drops[("model-b", "multi_source_reasoning / hotpotqa")]
    assert r["drop"] == pytest.approx(r["easy"] - r["hard"]) and r["drop"] > 0.2
    assert "heatmap" not in real["figures"] and not real["positional_bias"]

    for t in (vg, real):
        for info in t["figures"].values():
            png = out / info["path"]
            assert png.is_file() and png.stat().st_size > 1000
            with Image.open(png) as im:
                assert im.format == "PNG" and im.size[0] > 200
            assert info["path"] in md
    for heading in ("Positional bias", "Length × depth heatmaps", "Easy vs Hard", "Modality robustness", "micro", "macro"):
        assert heading in md


def test_report_without_optional_columns(tmp_path):
    """Runs with only the fixed columns still give averages and no empty figures."""
    pq = real_per_query(0).drop(columns=["length_bin", "difficulty", "dataset"])
    path = write_run(tmp_path / "plain", pq, "plain-model", task="plain")
    out = tmp_path / "rep"
    assert run_cli(["report", str(path), "--out", str(out)]) == 0
    data = json.loads((out / "report.json").read_text())
    assert data["tasks"][0]["figures"] == {} and data["tasks"][0]["runs"][0]["micro"]["n"] == len(pq)


def test_failed_items_are_left_out(tmp_path):
    """Items the runner could not score (error message, NaN metrics) are excluded and counted."""
    a = grounding_per_query(0)
    b = grounding_per_query(1)
    a["error"], b["error"] = None, None
    metrics = ["precision_at_1", "precision_at_3", "precision_at_5", "recall_at_1", "recall_at_3", "recall_at_5",
               "recall_at_10", "mrr_at_10", "mrr", "ndcg_at_10"]
    a.loc[:4, metrics] = np.nan
    a.loc[:4, "error"] = "q: encoding failed"
    pa_, pb_ = write_run(tmp_path / "a", a, "model-a"), write_run(tmp_path / "b", b, "model-b")
    out = tmp_path / "cmp"
    assert run_cli(["compare", str(pa_), str(pb_), "--resamples", "200", "--out", str(out)]) == 0
    data = json.loads((out / "compare.json").read_text())
    assert data["n_items"] == len(a) - 5 and data["n_failed_excluded"] == 5
    assert "left out" in (out / "compare.md").read_text()
    assert run_cli(["report", str(pa_), "--out", str(tmp_path / "rep")]) == 0
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    run = rep["tasks"][0]["runs"][0]
    assert run["n_failed_excluded"] == 5 and run["micro"]["n"] == len(a) - 5


def test_constant_scores_do_not_break_the_report(tmp_path):
    pq = grounding_per_query(0)
    text = pq["anchor_kind"] == "text"
    pq.loc[text, "precision_at_1"] = 1.0
    path = write_run(tmp_path / "a", pq, "model-a")
    assert run_cli(["report", str(path), "--out", str(tmp_path / "rep")]) == 0
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    entries = {e["rows"]: e for e in rep["tasks"][0]["positional_bias"]}
    assert "constant" in entries["text anchor"]["error"] and "result" in entries["all"]


def test_one_shared_item_reports_ttest_and_cis_as_na(tmp_path):
    """With one paired item McNemar and Wilcoxon are still reported; t-test, d_z and CIs are n/a with a note."""
    a = write_run(tmp_path / "a", grounding_per_query(0).head(1), "model-a")
    b = write_run(tmp_path / "b", grounding_per_query(1).head(1), "model-b")
    out = tmp_path / "cmp"
    assert run_cli(["compare", str(a), str(b), "--resamples", "50", "--ci-resamples", "50", "--out", str(out)]) == 0
    data = json.loads((out / "compare.json").read_text())
    t = data["pairs"][0]["ttest"]
    assert t["p_value"] is None and t["cohens_dz"] is None and t["ci_low"] is None and "n/a" in t["note"]
    assert t["p_bonferroni"] is None and t["reject_bonferroni"] is None
    assert data["pairs"][0]["mcnemar"]["p_value"] == 1.0 and data["pairs"][0]["wilcoxon"]["p_value"] is not None
    ci = data["runs"][0]["bootstrap_ci"]["recall_at_1"]
    assert ci["low"] is None and ci["high"] is None and "at least 2" in ci["note"]
    md = (out / "compare.md").read_text()
    assert "[–]" in md and "n/a" in md

    rep = tmp_path / "rep"
    assert run_cli(["report", str(a), "--out", str(rep)]) == 0
    run = json.loads((rep / "report.json").read_text())["tasks"][0]["runs"][0]
    assert run["bootstrap_ci"]["recall_at_1"]["low"] is None and run["bootstrap_ci"]["recall_at_1"]["note"]
    text = (rep / "report.md").read_text()
    est = run["bootstrap_ci"]["precision_at_1"]["estimate"]
    assert f"{est:.3f} [–]" in text and f"[{est:.3f}, {est:.3f}]" not in text


def test_constant_difference_note_is_in_the_markdown(tmp_path):
    """A constant non-zero difference has no t statistic; the table says why instead of a bare `–`."""
    pq_a = grounding_per_query(0).head(6)
    pq_b = pq_a.copy()
    pq_a["precision_at_1"], pq_b["precision_at_1"] = 1.0, 0.0
    a, b = write_run(tmp_path / "a", pq_a, "model-a"), write_run(tmp_path / "b", pq_b, "model-b")
    out = tmp_path / "cmp"
    assert run_cli(["compare", str(a), str(b), "--resamples", "50", "--ci-resamples", "50", "--out", str(out)]) == 0
    note = json.loads((out / "compare.json").read_text())["pairs"][0]["ttest"]["note"]
    assert note == "constant non-zero difference"
    row = [line for line in (out / "compare.md").read_text().splitlines() if line.startswith("| model-a | model-b | 1.000")][0]
    assert note in row


@pytest.mark.parametrize("argv, flag", [(["--alpha", "2"], "--alpha"), (["--alpha", "-1"], "--alpha"), (["--alpha", "0"], "--alpha"),
                                        (["--alpha", "1"], "--alpha"), (["--seed", "-1"], "--seed")])
def test_compare_range_checks_alpha_and_seed(grounding_runs, capsys, argv, flag):
    _, paths = grounding_runs
    with pytest.raises(SystemExit) as exc:
        run_cli(["compare", str(paths[0]), str(paths[1]), *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and ("between 0 and 1" in err or "non-negative" in err)


def test_report_range_checks_seed(grounding_runs, capsys, tmp_path):
    _, paths = grounding_runs
    with pytest.raises(SystemExit) as exc:
        run_cli(["report", str(paths[0]), "--seed", "-1", "--out", str(tmp_path / "r")])
    assert exc.value.code == 2 and "--seed" in capsys.readouterr().err


def test_non_metric_column_is_named_as_such(grounding_runs, capsys, tmp_path):
    _, paths = grounding_runs
    assert run_cli(["compare", str(paths[0]), str(paths[1]), "--metric", "item_id"]) == 2
    err = capsys.readouterr().err
    assert "'item_id' is not a per-query metric" in err and "precision_at_1" in err and "mrr" in err and "missing" not in err
    assert run_cli(["report", str(paths[0]), "--heatmap-metric", "depth", "--out", str(tmp_path / "r")]) == 2
    assert "'depth' is not a per-query metric" in capsys.readouterr().err


def test_same_folder_twice_is_refused(grounding_runs, capsys, tmp_path):
    _, paths = grounding_runs
    assert run_cli(["compare", str(paths[0]), str(paths[1]), str(paths[0])]) == 2
    err = capsys.readouterr().err
    assert "given twice" in err and str(paths[0]) in err
    alias = tmp_path / "alias"
    alias.symlink_to(paths[0], target_is_directory=True)
    assert run_cli(["compare", str(paths[0]), str(alias)]) == 2
    assert f"{alias} is given twice (also given as {paths[0]})" in capsys.readouterr().err
    assert run_cli(["report", str(paths[0]), str(paths[0]), "--out", str(tmp_path / "r")]) == 2


def test_byte_identical_copies_are_compared_with_a_note(grounding_runs, tmp_path):
    """Two folders holding the same run are distinct runs: compared, and the output says they are identical."""
    import shutil

    _, paths = grounding_runs
    copy = tmp_path / "copy"
    shutil.copytree(paths[0], copy)
    out = tmp_path / "cmp"
    assert run_cli(["compare", str(paths[0]), str(copy), "--resamples", "50", "--ci-resamples", "50", "--out", str(out)]) == 0
    data = json.loads((out / "compare.json").read_text())
    assert data["identical_runs"] == [["model-a", "model-a#2"]]
    assert "byte-identical" in (out / "compare.md").read_text()
    assert run_cli(["compare", str(paths[0]), str(paths[1]), "--resamples", "50", "--ci-resamples", "50", "--out", str(out)]) == 0
    assert json.loads((out / "compare.json").read_text())["identical_runs"] == []


def _subset_rows(markdown: str, heading: str) -> list[str]:
    """First cells of the table under `heading` (a per-subset table)."""
    rows = []
    for line in markdown.split(heading, 1)[1].strip().splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1].strip())
    return rows


def test_subset_tables_use_natural_length_order(tmp_path):
    a = write_run(tmp_path / "a", real_per_query(0), "model-a", task="multi_source_reasoning", content_hash="hash-r")
    b = write_run(tmp_path / "b", real_per_query(1), "model-b", task="multi_source_reasoning", content_hash="hash-r")
    expected = [f"{ds}/{d}/{length}" for ds in ("hotpotqa", "mmdocrag") for d in ("easy", "hard") for length in ("8k", "16k", "32k")]
    cmp_out, rep_out = tmp_path / "cmp", tmp_path / "rep"
    assert run_cli(["compare", str(a), str(b), "--resamples", "50", "--ci-resamples", "50", "--out", str(cmp_out)]) == 0
    md = (cmp_out / "compare.md").read_text()
    assert _subset_rows(md, "per subset (micro within each subset)") == expected
    assert run_cli(["report", str(a), str(b), "--ci-resamples", "50", "--out", str(rep_out)]) == 0
    md = (rep_out / "report.md").read_text()
    assert _subset_rows(md, "#### precision_at_1 per subset") == expected


def _summary_run(tmp_path, task, run_info):
    from mmbench.results.mteb_layout import summary_json
    from mmbench.results.store import write_results
    import pandas as pd

    pq = grounding_per_query(0).head(12)
    summary = summary_json(task, "1", "hash-s", {"name": "m", "revision": "t"}, pq, run_info, evaluation_time=0.0)
    write_results(tmp_path / task, pq, pd.DataFrame({"doc_id": ["x"], "tokens_seen": [1]}), summary)
    return load_results(tmp_path / task)


def test_rank_summary_words_failures_and_shows_the_tasks_metrics(tmp_path):
    """`mmbench rank` output: failed ranking items, not documents; the micro line shows R@1, R@3, MRR for Flickr."""
    from mmbench.results.summary import format_summary

    res = _summary_run(tmp_path, "flickr_hard_negatives",
                       {"kind": "llm_ranker", "n_items": 12, "failures": {"q0@0.0@256@text": "no parsable ranking"}})
    text = format_summary(res, (), "recall_at_1")
    assert "1 ranking items failed" in text and "documents failed to encode" not in text
    micro = [line for line in text.splitlines() if line.startswith("micro")][0]
    r1 = res.per_query["recall_at_1"].mean()
    assert f"R@1 {r1:.3f}" in micro and "R@3 " in micro and "MRR " in micro and "P@1" not in micro and "nDCG" not in micro


def test_embedding_summary_keeps_document_wording(tmp_path):
    from mmbench.results.summary import format_summary

    res = _summary_run(tmp_path, "visual_grounding", {"n_items": 12, "failures": {"doc1": "OOM"}})
    text = format_summary(res, ())
    assert "1 documents failed to encode" in text
    micro = [line for line in text.splitlines() if line.startswith("micro")][0]
    assert all(f"{m} " in micro for m in ("P@1", "P@5", "R@5", "MRR@10", "nDCG@10"))
    other = format_summary(_summary_run(tmp_path, "not_a_task", {"n_items": 12}), ())
    assert "P@1" in [line for line in other.splitlines() if line.startswith("micro")][0]


def test_report_says_when_a_positional_fit_is_unreliable_or_at_the_boundary(tmp_path, monkeypatch):
    """A chance-level subset: statsmodels' default fit degenerates; the report names the refit and its status."""
    import mmbench.evaluators.stats.positional as positional

    pq = grounding_per_query(0, needles=25)
    rng = np.random.default_rng(2)
    pq["precision_at_1"] = (rng.random(len(pq)) < 0.04).astype(float)
    path = write_run(tmp_path / "a", pq, "blind-model")
    assert run_cli(["report", str(path), "--out", str(tmp_path / "rep")]) == 0
    entries = json.loads((tmp_path / "rep" / "report.json").read_text())["tasks"][0]["positional_bias"]
    fits = {e["rows"]: e["result"] for e in entries}
    assert fits["image anchor"]["fit_status"] == "boundary" and fits["all"]["optimizer"] == "powell"
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| boundary (powell) |" in md and "UNRELIABLE" not in md.split("Fit: `ok`")[0]
    monkeypatch.setattr(positional, "FIT_METHODS", ("default",))  # only statsmodels' default: nothing usable
    assert run_cli(["report", str(path), "--out", str(tmp_path / "rep2")]) == 0
    entries2 = json.loads((tmp_path / "rep2" / "report.json").read_text())["tasks"][0]["positional_bias"]
    assert {e["result"]["fit_status"] for e in entries2} == {"unreliable"}
    assert "| **UNRELIABLE** (none usable) |" in (tmp_path / "rep2" / "report.md").read_text()


def test_report_prints_chance_two_sidedness_and_the_heatmap_ceiling(grounding_runs, tmp_path):
    from mmbench.evaluators.metrics import chance_metrics

    path = grounding_runs[1][0]
    out = tmp_path / "rep"
    assert run_cli(["report", str(path), "--out", str(out)]) == 0
    data = json.loads((out / "report.json").read_text())
    vg = data["tasks"][0]
    pq = load_results(path).per_query
    expected = np.mean([chance_metrics(len(r), len(rel))["precision_at_1"]
                        for r, rel in zip(pq["ranked_ids"], pq["relevant_ids"])])
    assert vg["runs"][0]["chance"]["precision_at_1"] == pytest.approx(expected) == pytest.approx(1 / 25)
    md = (out / "report.md").read_text()
    assert "random ranking (expected)" in md and "two-sided" in md
    assert all(h["ceiling"] == pytest.approx(0.2) for h in vg["heatmaps"])  # P@5 with one relevant item
    assert "ceiling" in md


def test_underflowed_p_values_print_a_bound():
    from mmbench.reports.common import fmt_p

    assert fmt_p(0.0) == "< 1e-300" and fmt_p(1e-320) == "< 1e-300"
    assert fmt_p(3e-9) == "3.0e-09" and fmt_p(0.25) == "0.2500"


def test_compare_says_when_differences_are_zero_by_construction(tmp_path):
    """Two models that gave every candidate one score on some items share the seeded tie-break there."""
    a, b = grounding_per_query(0), grounding_per_query(1)
    flat = a.index[:7]
    for frame in (a, b):
        frame["scores"] = [[0.5] * 25 if i in set(flat) else list(v) for i, v in zip(frame.index, frame["scores"])]
    b.loc[flat, "ranked_ids"] = a.loc[flat, "ranked_ids"]
    for col in [c for c in a.columns if c.startswith(("precision_at", "recall_at", "mrr", "ndcg"))] + ["first_relevant_rank"]:
        b.loc[flat, col] = a.loc[flat, col]
    pa_, pb_ = write_run(tmp_path / "a", a, "model-a"), write_run(tmp_path / "b", b, "model-b")
    out = tmp_path / "cmp"
    assert run_cli(["compare", str(pa_), str(pb_), "--resamples", "100", "--ci-resamples", "100", "--out", str(out)]) == 0
    data = json.loads((out / "compare.json").read_text())
    assert data["pairs"][0]["tied_by_construction"] == 7 and data["settings"]["sidedness"] == "two-sided"
    assert "zero by construction" in (out / "compare.md").read_text()


def test_local_model_paths_are_labelled_as_on_the_board(tmp_path):
    """A run of `--model /some/folder` is labelled by the folder's name in compare and report, as the
    leaderboard shows it (one helper: mmbench.common.names.display_name); the path never appears."""
    from mmbench.reports import run_labels
    from mmbench.leaderboards.modelmeta import display_name as board_name

    secret = "/home/someone/private/ckpts"
    a = write_run(tmp_path / "a", grounding_per_query(0, skill=0.7), f"{secret}/gme-ft")
    b = write_run(tmp_path / "b", grounding_per_query(1, skill=0.5), "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct")
    c = write_run(tmp_path / "c", grounding_per_query(2, skill=0.6), f"{secret}/other/gme-ft/")
    runs = [load_results(p) for p in (a, b, c)]
    assert run_labels(runs) == ["gme-ft (local)", "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct", "gme-ft (local)#2"]
    assert [board_name(r.model_name) for r in runs[:2]] == run_labels(runs)[:2]
    assert run_cli(["compare", str(a), str(b), str(c), "--resamples", "200", "--out", str(tmp_path / "cmp")]) == 0
    assert run_cli(["report", str(a), str(b), "--out", str(tmp_path / "rep")]) == 0
    for folder, name in ((tmp_path / "cmp", "compare"), (tmp_path / "rep", "report")):
        md = (folder / f"{name}.md").read_text()
        assert secret not in md and "gme-ft (local)" in md, folder
        data = json.loads((folder / f"{name}.json").read_text())
        runs_json = data["runs"] if "runs" in data else [r for t in data["tasks"] for r in t["runs"]]
        # labels are the short names; the run's model identity (provenance) is kept as recorded
        assert [r["label"] for r in runs_json][:2] == ["gme-ft (local)", "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct"]
        assert runs_json[0]["model"]["name"] == f"{secret}/gme-ft"


def test_the_timing_table_does_not_call_text_candidates_images():
    """Issue 26 #8: the column said "image emb. s" for every task, text ones included."""
    from mmbench.reports.timing import timing_markdown

    row = {"label": "minilm", "kind": "embedding", "n_items": 3, "query_seconds": 0.1, "document_seconds": 0.2,
           "precompute_seconds": 0.3, "ranking_seconds": 0.01, "end_to_end_seconds": 0.31, "wall_seconds": 1.0,
           "ms_per_query": 3.3, "cache_hits": 0}
    text = timing_markdown([row])
    assert "image emb" not in text and "| candidate emb. s |" in text
