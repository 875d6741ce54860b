"""Effective context within the design's strata (issue 34): a drop at a known consumed length is found there
whatever nominal bins the items were built in; synthetic oracles on the Visual Grounding and Multi-Source
Reasoning designs (a perfect reader, a reader with a window, a model at chance, a flat model tied at its window);
the floor of each point is checked by simulating the z-test it stands for."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from mmbench.evaluators.stats.effective_length import (AT_CHANCE, AT_LEAST, DROP, FIXED, FLOOR, UNFILLED,
                                                       effective_length, effective_statement, item_consumed_tokens,
                                                       run_effective_length, tolerance_statement)

DROP_AT = 9000
CHANCE = 1 / 25
VG = ([f"{a} / {b}" for a in ("text", "image") for b in ("text", "image", "mixed")],
      (256, 512, 1024, 2048, 4096, 8192, 16384, 32768), (0.0, 0.2, 0.4, 0.6, 0.8, 1.0))
MSR = ([f"{a} / {b}" for a in ("hotpotqa", "mmdocrag") for b in ("easy", "hard")], (8192, 16384, 32768), (0.5,))


def _synthetic(seed: int = 0, n: int = 600):
    """Items of consumed length log-uniform in [300, 120000]; P@1 is 1 below DROP_AT and 0 from it on."""
    rng = np.random.default_rng(seed)
    tokens = np.exp(rng.uniform(np.log(300), np.log(120_000), n)).round()
    return tokens, (tokens < DROP_AT).astype(float)


def _design(design, per_cell: int, rng):
    """Items of a task design: stratum, nominal length, depth, and a length a little under the nominal one."""
    strata, bins, depths = design
    rows = [(s, b, d) for s in strata for b in bins for d in depths for _ in range(per_cell)]
    key, nominal, depth = (np.array(v) for v in zip(*rows))
    length = (nominal * rng.uniform(0.9, 1.0, len(nominal))).round()
    return key, nominal.astype(float), depth.astype(float), length


def _window_reader(length, depth, window, rng):
    """A model with a window: consumes min(length, window), keeping half the window from each end; it finds the
    needle when it kept it, else scores at chance."""
    kept = (length <= window) | (depth * length < window / 2) | ((1 - depth) * length < window / 2)
    return np.minimum(length, window), np.where(kept, 1.0, (rng.random(len(length)) < CHANCE).astype(float))


@pytest.mark.parametrize("design", [VG, MSR], ids=["visual_grounding", "multi_source_reasoning"])
def test_oracles_on_the_task_designs(design):
    rng = np.random.default_rng(34)
    key, nominal, depth, length = _design(design, 5, rng)
    chance = np.full(len(key), CHANCE)
    perfect = effective_length(length, np.ones(len(key)), key, chance).to_dict()
    assert perfect["status"] == AT_LEAST and perfect["censored"]
    assert perfect["effective_tokens"] == length.max() >= 0.9 * design[1][-1]   # at least the longest bin
    assert effective_statement(perfect).startswith(f"at least {int(length.max()):,} tokens")
    at_chance = effective_length(length, (rng.random(len(key)) < CHANCE).astype(float), key, chance).to_dict()
    assert at_chance["status"] == AT_CHANCE and at_chance["effective_tokens"] is None
    assert effective_statement(at_chance) == "no effective context (at chance at the shortest lengths)"
    for window in [w for w in (300, 1000, 3000, 12000, 20000) if design[1][0] < w < design[1][-1]]:
        seen, scores = _window_reader(length, depth, window, rng)
        e = effective_length(seen, scores, key, chance)
        assert e.status == DROP, window
        assert abs(np.log2(e.effective_tokens / window)) <= 1, (window, e.effective_tokens)   # within one bin of W


@pytest.mark.parametrize("design,per_cell", [(VG, 2), (MSR, 12)], ids=["visual_grounding", "multi_source_reasoning"])
def test_a_flat_model_tied_at_its_window_rarely_shows_a_drop(design, per_cell):
    """Flat scores (a different rate per stratum), 60 % of the items consumed at exactly the model's window: a
    drop is reported in at most 10 % of 200 simulated runs (it was 200 of 200 when ties were ordered misses first)."""
    rng = np.random.default_rng(7)
    key, nominal, depth, _ = _design(design, per_cell, rng)
    rate = {k: 0.3 + 0.25 * (i % 3) for i, k in enumerate(design[0])}
    p = np.array([rate[k] for k in key])
    drops = 0
    for _ in range(200):
        length = (nominal * rng.uniform(0.9, 1.0, len(key))).round()
        window = np.quantile(length, 0.4)
        seen = np.where(length >= window, window, length).round()
        drops += effective_length(seen, (rng.random(len(key)) < p).astype(float), key,
                                  np.full(len(key), CHANCE)).status == DROP
    assert drops <= 20, drops


def test_the_subset_mix_is_not_read_as_length():
    """Issue 34's BM25 on Visual Grounding: text anchors in image backgrounds consume a few tokens (P@1 1), image
    anchors consume more (at chance), text anchors in text backgrounds score 1 at every length. Within strata
    the run reads 'at least' the longest length, the 32k bin."""
    rng = np.random.default_rng(1)
    key, nominal, depth, length = _design(VG, 3, rng)
    text_anchor = np.char.startswith(key.astype(str), "text")
    image_bg = np.char.endswith(key.astype(str), "image")
    seen = np.where(image_bg, rng.integers(14, 17, len(key)), length).astype(float)
    scores = np.where(text_anchor, 1.0, (rng.random(len(key)) < CHANCE).astype(float))
    pooled = effective_length(seen, scores, None, np.full(len(key), CHANCE))
    assert pooled.reference < 0.9         # pooled, the shortest items mix perfect strata with strata at chance
    e = effective_length(seen, scores, key, np.full(len(key), CHANCE), bins=[f"{int(n) // 1024}k" for n in nominal])
    assert e.status == AT_LEAST and e.effective_tokens == seen.max() and e.effective_bin == "32k"
    assert {p["key"] for p in e.strata if p["at_chance"]} == {k for k in VG[0] if k.startswith("image")}


def test_equal_lengths_form_one_point_whatever_the_input_order():
    rng = np.random.default_rng(3)
    tokens = np.r_[np.linspace(100, 250, 60).round(), np.full(140, 256.0)]
    scores = (rng.random(200) < 0.4).astype(float)
    results = set()
    for _ in range(5):
        order = rng.permutation(200)
        e = effective_length(tokens[order], scores[order])
        results.add((e.status, e.effective_tokens))
        assert sum(c["n"] for c in e.curve) == 200 and e.curve[-1]["low"] == e.curve[-1]["high"] == 256
    assert len(results) == 1


def test_a_window_the_run_cannot_fill_says_so():
    e = effective_length([100, 200, 300], [1, 0, 1], window=20).to_dict()
    assert e["status"] == UNFILLED and e["effective_tokens"] is None
    assert effective_statement(e) == ("no effective context: the run cannot fill a reference of 20 items in any "
                                      "stratum (largest: 3 items)")
    with pytest.raises(ValueError):
        effective_length([1], [1], tolerance=-1)


@pytest.mark.parametrize("how", [{}, {"tolerance": 0.05, "window": 20}], ids=["floor", "fixed"])
@pytest.mark.parametrize("nominal", [(1024, 4096, 16384, 65536, 131072), (2048, 8192, 32768),
                                     (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)])
def test_a_drop_at_a_known_consumed_length_is_found_whatever_the_nominal_bins(nominal, how):
    tokens, scores = _synthetic()
    # the nominal bin each item was built in: the smallest nominal length at or above what it consumed (a model
    # that truncates or resizes consumes less than its nominal length); the bins do not enter the computation
    nominal_bin = np.array([min([b for b in nominal if b >= t] or [nominal[-1]]) for t in tokens])
    per_query = pd.DataFrame({"item_id": [f"i{k}" for k in range(len(tokens))], "relevant_ids": [[f"d{k}"] for k in range(len(tokens))],
                              "precision_at_1": scores, "error": None, "length_bin": nominal_bin.astype(str)})
    seen = pd.DataFrame({"doc_id": [f"d{k}" for k in range(len(tokens))], "role": "document", "seen_tokens": tokens.astype(int)})
    res = run_effective_length(per_query, seen, "precision_at_1", **how)
    assert res.tolerance_basis == (FIXED if how else FLOOR) and res.window == how.get("window")
    assert res.status == DROP and not res.censored
    assert res.reference == 1.0
    below = np.sort(tokens[tokens < DROP_AT])
    assert res.effective_tokens == below[-1]            # the longest item before the drop
    assert res.first_drop_tokens >= DROP_AT


def test_the_floor_of_a_point_is_the_drop_its_z_test_detects_80_percent_of_the_time():
    """One stratum, 60 reference items and 90 at a longer point, per-item sd observed: simulate the z-test of the
    point's mean against the reference at a true drop of the floor; it rejects (one side) about 80 % of the time."""
    rng = np.random.default_rng(5)
    tokens = np.r_[np.full(60, 500.0), np.full(90, 5000.0)]
    scores = np.r_[np.ones(30), np.zeros(30), np.ones(45), np.zeros(45)]
    e = effective_length(tokens, scores, window=60)
    floor, sd = e.curve[-1]["floor"], e.strata[0]["sd"]
    assert e.status == AT_LEAST and floor == pytest.approx(2.8016 * sd * np.sqrt(1 / 60 + 1 / 90), rel=1e-3)
    se = sd * np.sqrt(1 / 60 + 1 / 90)
    diff = rng.normal(-floor, se, 20_000)
    assert np.mean(diff / se < -stats.norm.ppf(0.975)) == pytest.approx(0.8, abs=0.015)


def test_item_lengths_are_the_consumed_tokens_of_the_relevant_documents():
    pq = pd.DataFrame({"relevant_ids": [["a"], ["b", "c"], ["z"]]})
    seen = pd.DataFrame({"doc_id": ["a", "b", "c", "a"], "role": ["document", "document", "document", "query"],
                         "seen_tokens": [100, 10, 30, 5]})
    got = item_consumed_tokens(pq, seen)
    assert got[:2].tolist() == [100.0, 20.0] and np.isnan(got[2])


def _synthetic_run(name: str = "dropper", nominal=(1024, 4096, 16384, 65536, 131072)):
    """A results object whose P@1 is 1 below DROP_AT consumed tokens and 0 from it on, in the given bins."""
    from mmbench.data.tokens import length_label
    from mmbench.evaluators.metrics import first_relevant_rank, item_metrics
    from mmbench.results.mteb_layout import summary_json
    from mmbench.results.store import RunResults

    tokens, scores = _synthetic(n=300)
    rows, seen = [], []
    for k, (t, s) in enumerate(zip(tokens, scores)):
        ranked = [f"d{k}", f"x{k}"] if s else [f"x{k}", f"d{k}"]
        b = length_label(min([b for b in nominal if b >= t] or [nominal[-1]]))
        rows.append({"item_id": f"i{k}", "query_id": f"q{k}", "subset": "text", "relevant_ids": [f"d{k}"],
                     "ranked_ids": ranked, "scores": [1.0, 0.0], "first_relevant_rank": first_relevant_rank(ranked, [f"d{k}"]),
                     **item_metrics(ranked, [f"d{k}"]), "error": None, "length_bin": b})
        seen += [{"doc_id": f"d{k}", "role": "document", "seen_tokens": int(t), "truncated": bool(t > 32768)},
                 {"doc_id": f"x{k}", "role": "document", "seen_tokens": int(t), "truncated": bool(t > 32768)}]
    pq = pd.DataFrame(rows)
    summary = summary_json("synthetic", "1", "h" * 64, {"name": name}, pq, {}, 0.0)
    return RunResults(pq, pd.DataFrame(seen), summary)


def test_report_and_show_name_the_effective_context_and_the_truncated_share(tmp_path):
    from mmbench.reports.lengths import effective_length_entry
    from mmbench.reports.report import draw_figures, report_markdown, report_numbers
    from mmbench.results.summary import format_summary

    run = _synthetic_run()
    data = report_numbers([run], ci_resamples=100)
    task = data["tasks"][0]
    (eff,) = task["effective_length"]
    below = np.sort(_synthetic(n=300)[0])
    assert eff["effective_tokens"] == below[below < DROP_AT][-1]
    (trunc,) = task["truncated_share"]
    shares = dict(zip(trunc["bins"], trunc["truncated_share"]))
    assert shares["1k"] == 0 and shares["16k"] == 0 and shares["128k"] == 1   # 64k straddles the 32k window
    draw_figures(data, tmp_path)
    text = report_markdown(data)
    assert "### Effective context" in text and f"| {eff['effective_tokens']:,} tokens (read whole up to" in text
    assert (tmp_path / task["figures"]["effective_length"]["path"]).is_file()
    assert "### Truncated share per length bin" in text and "| 100 % |" in text
    assert eff["tolerance_basis"] == FLOOR and eff["window"] is None and eff["status"] == "drop"
    stated = tolerance_statement(eff)
    assert stated.startswith(f"{eff['tolerance']:.3f} (resolution floor at the first drop: the drop a z-test at "
                             "alpha 0.05 detects with power 0.8")
    assert f"| 1.000 | {stated} | {eff['effective_tokens']:,} tokens" in text
    shown = format_summary(run, ("length_bin",), "precision_at_1")
    assert f"effective context: {eff['effective_tokens']:,} tokens (read whole up to the 16k bin) (first drop at" in shown
    assert f"tolerance {stated}" in shown
    # show's length-bin table carries the truncated share per bin, the same numbers as the report's
    table = shown[shown.index("precision_at_1 by length_bin"):].splitlines()
    header, row = table[1].split(), next(r for r in table if r.startswith("truncated share")).split()[2:]
    assert dict(zip(header[1:], map(float, row))) == pytest.approx(shares, abs=5e-4)   # printed to 3 places
    assert "truncated share: the share of the bin's documents" in shown
    fixed = effective_length_entry(run.per_query, run.seen, "dropper", "precision_at_1", tolerance=0.05)
    assert tolerance_statement(fixed) == "0.05 (a fixed tolerance)" and fixed["effective_tokens"] == eff["effective_tokens"]


def test_the_leaderboard_page_states_the_window_and_how_the_tolerance_was_chosen():
    from mmbench.reports.lengths import effective_length_entry
    from html import escape

    from mmbench.leaderboards.site import effective_context_html

    run = _synthetic_run()
    eff = effective_length_entry(run.per_query, run.seen, "dropper", "precision_at_1")
    html = effective_context_html(eff, "precision_at_1", "../img/x.png")
    assert f'id="effective-context">{eff["effective_tokens"]:,} tokens (read whole up to the 16k bin)' in html
    assert "falls by more than its resolution floor below the reference" in html
    assert f"Tolerance: {escape(tolerance_statement(eff))}." in html and "resolution floor at the first drop" in html
    fixed = effective_length_entry(run.per_query, run.seen, "dropper", "precision_at_1", tolerance=0.05, window=20)
    assert "Tolerance: 0.05 (a fixed tolerance)." in effective_context_html(fixed, "precision_at_1", "x.png")


def test_compare_puts_the_effective_context_and_truncated_share_side_by_side():
    from mmbench.reports.compare import compare_runs, comparison_markdown
    from mmbench.reports.lengths import effective_length_entry

    a, b = _synthetic_run("dropper"), _synthetic_run("other")
    b.per_query["precision_at_1"] = 1.0   # never drops: censored at the longest consumed length
    data = compare_runs([a, b], resamples=200, ci_resamples=100)
    eff = {e["label"]: e for e in data["lengths"]["effective_length"]}
    assert len(eff) == 2
    expected = effective_length_entry(a.per_query, a.seen, "x", "precision_at_1")["effective_tokens"]
    (la, lb) = sorted(eff, key=lambda k: eff[k]["censored"])
    assert eff[la]["effective_tokens"] == expected and not eff[la]["censored"]
    assert eff[lb]["censored"] and eff[lb]["effective_tokens"] == int(max(a.seen["seen_tokens"]))
    text = comparison_markdown(data)
    assert "## Lengths" in text and "### Truncated share per length bin" in text
    assert f"| {la} | 300 |" in text and f"| at least {eff[lb]['effective_tokens']:,} tokens consumed" in text
    shares = [dict(zip(t["bins"], t["truncated_share"])) for t in data["lengths"]["truncated_share"]]
    assert [s["128k"] for s in shares] == [1.0, 1.0] and [s["1k"] for s in shares] == [0.0, 0.0]


def test_the_command_line_sets_a_fixed_tolerance_and_window_in_show_compare_and_report(tmp_path, capsys):
    from mmbench.cli import main
    from mmbench.results.store import write_results

    folders = []
    for name in ("dropper", "other"):
        run = _synthetic_run(name)
        folders.append(str(write_results(tmp_path / name, run.per_query, run.seen, run.summary)))
    fixed = ["--effective-tolerance", "0.05", "--effective-window", "20"]
    assert main(["show", folders[0], *fixed]) == 0
    shown = capsys.readouterr().out
    assert "tolerance 0.05 (a fixed tolerance)" in shown
    assert main(["show", folders[0]]) == 0
    assert "(resolution floor at the first drop" in capsys.readouterr().out
    assert main(["compare", *folders, "--resamples", "100", "--ci-resamples", "50", *fixed]) == 0
    compared = capsys.readouterr().out
    assert "## Lengths" in compared and compared.count("| 0.05 (a fixed tolerance) |") == 2
    assert main(["report", *folders, "--ci-resamples", "50", "--out", str(tmp_path / "rep"), *fixed]) == 0
    capsys.readouterr()
    report = (tmp_path / "rep" / "report.md").read_text()
    assert report.count("| 1.000 | 0.05 (a fixed tolerance) |") == 2
    for bad in ("0", "x", "1.5"):
        with pytest.raises(SystemExit) as exc:
            main(["show", folders[0], "--effective-tolerance", bad])
        assert exc.value.code == 2 and f"expected a drop in the metric in (0, 1], got '{bad}'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["show", folders[0], "--effective-window", "1"])
    assert "expected a number of items, at least 2, got '1'" in capsys.readouterr().err


def test_a_run_whose_items_all_failed_has_no_effective_context():
    pq = pd.DataFrame({"item_id": ["i0"], "relevant_ids": [["d0"]], "precision_at_1": [float("nan")],
                       "error": ["boom"], "anchor_kind": ["text"], "background_modality": ["text"]})
    seen = pd.DataFrame({"doc_id": ["d0"], "role": ["document"], "seen_tokens": [100]})
    e = run_effective_length(pq, seen, "precision_at_1", strata=("anchor_kind", "background_modality"))
    assert e.status == "no items" and e.effective_tokens is None
