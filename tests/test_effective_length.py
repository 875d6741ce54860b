"""Effective context from consumed lengths: a score that drops at a known consumed length is found there,
whatever nominal bins the items were built in; by default the tolerance is the resolution floor of a window
against the reference, checked against statsmodels and a scipy simulation."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.power import TTestIndPower

from mmbench.evaluators.stats.effective_length import (FIXED, FLOOR, effective_length, item_consumed_tokens,
                                                       length_curve, run_effective_length, tolerance_statement)

DROP_AT = 9000


def _synthetic(seed: int = 0, n: int = 600):
    """Items of consumed length log-uniform in [300, 120000]; P@1 is 1 below DROP_AT and 0 from it on."""
    rng = np.random.default_rng(seed)
    tokens = np.exp(rng.uniform(np.log(300), np.log(120_000), n)).round()
    return tokens, (tokens < DROP_AT).astype(float)


def _floor(window: int, scores) -> float:
    """The resolution floor of a `window`-item mean against another, from statsmodels' two-sample t-test power
    (effect size in sd units times the scores' sd)."""
    d = TTestIndPower().solve_power(nobs1=window, ratio=1.0, alpha=0.05, power=0.8, alternative="two-sided")
    return d * np.std(scores, ddof=1)


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
    if how:
        assert (res.tolerance_basis, res.tolerance, res.window) == (FIXED, 0.05, 20)
    else:   # the default: a tenth of the 600 items, and the floor of 60 items against 60 at the scores' sd
        assert (res.tolerance_basis, res.window, res.sd_basis) == (FLOOR, 60, "observed")
        assert res.tolerance == pytest.approx(_floor(60, scores), rel=1e-5)
    assert not res.censored
    assert res.reference == 1.0
    below = np.sort(tokens[tokens < DROP_AT])
    assert res.effective_tokens == below[-1]            # the longest item before the drop
    assert res.first_drop_tokens >= DROP_AT
    assert abs(res.effective_tokens - DROP_AT) / DROP_AT < 0.05


def test_a_model_that_never_drops_is_censored_at_its_longest_item():
    tokens, _ = _synthetic()
    res = effective_length(tokens, np.ones_like(tokens))
    assert res.censored and res.effective_tokens == tokens.max() and res.first_drop_tokens is None


def test_a_gradual_decline_is_placed_inside_the_first_window_that_leaves_the_tolerance():
    """Score falls linearly in log length from 1 at 1k to 0 at 64k. Recomputed by plain loops: the first window
    of 50 items whose mean is below reference - 0.1, then the split of that window with the largest
    (mean left - mean right) * sqrt(nl * nr / n)."""
    tokens = np.geomspace(1024, 65536, 2000).round()
    scores = np.clip(1 - (np.log2(tokens) - 10) / 6, 0, 1)
    res = effective_length(tokens, scores, tolerance=0.1, window=50)
    assert res.tolerance_basis == FIXED and res.sd is None
    ref = scores[:50].mean()
    j = next(j for j in range(len(tokens) - 49) if scores[j:j + 50].mean() < ref - 0.1)
    w = scores[j:j + 50]
    best = max(range(1, 50), key=lambda m: (w[:m].mean() - w[m:].mean()) * np.sqrt(m * (50 - m) / 50))
    assert res.reference == pytest.approx(ref)
    assert res.effective_tokens == tokens[j + best - 1]
    assert tokens[j] <= res.effective_tokens <= tokens[j + 49]


def test_item_lengths_are_the_consumed_tokens_of_the_relevant_documents():
    pq = pd.DataFrame({"relevant_ids": [["a"], ["b", "c"], ["z"]]})
    seen = pd.DataFrame({"doc_id": ["a", "b", "c", "a"], "role": ["document", "document", "document", "query"],
                         "seen_tokens": [100, 10, 30, 5]})
    got = item_consumed_tokens(pq, seen)
    assert got[:2].tolist() == [100.0, 20.0] and np.isnan(got[2])


def test_the_curve_merges_thin_steps_and_keeps_every_item():
    tokens = np.array([300, 310, 320, 900, 5000, 5100, 5200, 5300, 5400, 5500])
    curve = length_curve(tokens, np.arange(10) % 2, min_items=3)
    assert sum(c["n"] for c in curve) == 10
    assert all(c["n"] >= 3 for c in curve)
    assert [c["low"] for c in curve] == sorted(c["low"] for c in curve)


def test_too_few_items_for_a_window_state_no_effective_context():
    res = effective_length([100, 200], [1, 0], window=20)
    assert res.effective_tokens is None and res.n_items == 2
    with pytest.raises(ValueError):
        effective_length([1], [1], tolerance=-1)
    with pytest.raises(ValueError, match="no resolution floor"):   # one item against one: no t-test
        effective_length([100, 200, 300], [1, 0, 1], window=1)
    assert effective_length([100, 200, 300], [1, 0, 1], window=1, tolerance=0.5).effective_tokens == 100


def _dip_then_drop():
    """400 items, consumed lengths 1k..128k. P@1 0.8 (one miss in five), a dip to 0.6 over items 160-199 (a
    window's worth), 0.8 again, then a real drop to 0.2 from item 280 on."""
    tokens = np.geomspace(1000, 128_000, 400).round()
    rate = np.full(400, 0.8)
    rate[160:200], rate[280:] = 0.6, 0.2
    scores = (np.arange(400) % 5 < rate * 5).astype(float)   # exact rates in every run of five items
    return tokens, scores


def test_the_resolution_floor_decides_what_counts_as_a_drop():
    """A 0.2 dip over 40 items is below the floor of 40 items against 40 (about 0.31 at sd 0.49): the default
    reads past it to the real drop, where a fixed 0.05 stops at the dip. Recomputed by plain loops with the
    floor from statsmodels; the floor is checked by simulating scipy's two-sample t-test at it."""
    tokens, scores = _dip_then_drop()
    res = effective_length(tokens, scores)
    k = 40
    floor = _floor(k, scores)
    assert (res.window, res.tolerance_basis) == (k, FLOOR)
    assert res.tolerance == pytest.approx(floor, rel=1e-5) and res.sd == pytest.approx(np.std(scores, ddof=1))
    assert 0.2 < floor < 0.6   # between the dip and the drop: the floor, not 0.05, decides
    ref = scores[:k].mean()
    j = next(j for j in range(len(scores) - k + 1) if scores[j:j + k].mean() < ref - floor)
    w = scores[j:j + k]
    best = max(range(1, k), key=lambda m: (w[:m].mean() - w[m:].mean()) * np.sqrt(m * (k - m) / k))
    assert res.effective_tokens == tokens[j + best - 1]
    assert tokens[275] <= res.effective_tokens <= tokens[285]   # at the real drop (item 280), past the dip
    fixed = effective_length(tokens, scores, tolerance=0.05)
    assert fixed.tolerance_basis == FIXED and fixed.effective_tokens < tokens[200]   # stopped by the dip
    # at the floor, scipy's two-sample t-test on two windows of normal scores with that sd rejects 80 % of the time
    rng = np.random.default_rng(0)
    a = rng.normal(0.0, res.sd, (20_000, k))
    b = rng.normal(floor, res.sd, (20_000, k))
    assert np.mean(stats.ttest_ind(a, b, axis=1).pvalue < 0.05) == pytest.approx(0.8, abs=0.015)


def test_the_window_grows_with_the_run_and_constant_scores_use_the_design_sd():
    tokens = np.arange(1, 1001) * 100.0
    res = effective_length(tokens, np.ones(1000))
    assert res.window == 100 and res.sd_basis == "design" and res.sd == 0.5 and res.censored
    assert res.tolerance == pytest.approx(TTestIndPower().solve_power(nobs1=100, alpha=0.05, power=0.8) * 0.5, rel=1e-5)
    assert effective_length(tokens[:150], np.ones(150)).window == 20   # at least 20 items
    assert "assumed: the scores do not vary" in tolerance_statement(res.to_dict())


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
    assert "### Effective context" in text and f"| {eff['effective_tokens']} |" in text
    assert (tmp_path / task["figures"]["effective_length"]["path"]).is_file()
    assert "### Truncated share per length bin" in text and "| 100 % |" in text
    assert eff["tolerance_basis"] == FLOOR and eff["window"] == 30   # a tenth of 300 items
    stated = tolerance_statement(eff)
    assert stated.startswith(f"{eff['tolerance']:.3f} (resolution floor of 30 items against 30: two-sample t-test, "
                             "alpha 0.05, power 0.8, sd ")
    assert f"| 30 | 1.000 | {stated} | {eff['effective_tokens']} |" in text
    shown = format_summary(run, ("length_bin",), "precision_at_1")
    assert f"effective context (precision_at_1 within {stated} of its score over the shortest 30 items" in shown
    assert f": {eff['effective_tokens']} tokens" in shown
    # show's length-bin table carries the truncated share per bin, the same numbers as the report's
    table = shown[shown.index("precision_at_1 by length_bin"):].splitlines()
    header, row = table[1].split(), next(r for r in table if r.startswith("truncated share")).split()[2:]
    assert dict(zip(header[1:], map(float, row))) == pytest.approx(shares, abs=5e-4)   # printed to 3 places
    assert "truncated share: the share of the bin's documents" in shown
    fixed = effective_length_entry(run.per_query, run.seen, "dropper", "precision_at_1", tolerance=0.05)
    assert tolerance_statement(fixed) == "0.05 (a fixed tolerance)" and fixed["effective_tokens"] == eff["effective_tokens"]


def test_the_leaderboard_page_states_the_window_and_how_the_tolerance_was_chosen():
    from mmbench.reports.lengths import effective_length_entry
    from mmbench.leaderboards.site import effective_context_html

    run = _synthetic_run()
    eff = effective_length_entry(run.per_query, run.seen, "dropper", "precision_at_1")
    html = effective_context_html(eff, "precision_at_1", "../img/x.png")
    assert f'id="effective-context">{eff["effective_tokens"]} tokens:' in html
    assert "mean precision_at_1 of 30 consecutive items" in html
    assert f"Tolerance: {tolerance_statement(eff)}." in html and "resolution floor of 30 items against 30" in html
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
    assert f"| {la} | 300 | 30 |" in text and f"| ≥ {eff[lb]['effective_tokens']} |" in text
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
    assert "within 0.05 (a fixed tolerance) of its score over the shortest 20 items" in shown
    assert main(["show", folders[0]]) == 0
    assert "(resolution floor of 30 items against 30" in capsys.readouterr().out
    assert main(["compare", *folders, "--resamples", "100", "--ci-resamples", "50", *fixed]) == 0
    compared = capsys.readouterr().out
    assert "## Lengths" in compared and compared.count("| 0.05 (a fixed tolerance) |") == 2
    assert main(["report", *folders, "--ci-resamples", "50", "--out", str(tmp_path / "rep"), *fixed]) == 0
    capsys.readouterr()
    report = (tmp_path / "rep" / "report.md").read_text()
    assert report.count("| 20 | 1.000 | 0.05 (a fixed tolerance) |") == 2
    for bad in ("0", "x", "1.5"):
        with pytest.raises(SystemExit) as exc:
            main(["show", folders[0], "--effective-tolerance", bad])
        assert exc.value.code == 2 and f"expected a drop in the metric in (0, 1], got '{bad}'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["show", folders[0], "--effective-window", "1"])
    assert "expected a number of items, at least 2, got '1'" in capsys.readouterr().err
