"""`--limit N` is a seeded stratified random sample whose score is weighted back to the design cells' sizes
(issue 34): unbiased over seeds on the Multi-Source Reasoning sample, with CIs that cover the full score; a
limit at or above the task's size is the full protocol."""
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from mmbench.cli import main
from mmbench.data.poolset import PoolItem, load_poolset
from mmbench.data.selection import (FULL_ESTIMATOR, SAMPLE_ESTIMATOR, cell_of, select_sample, selection_record,
                                    strata_axes)
from mmbench.evaluators.stats.stratified import limit_estimates, stratified_mean
from mmbench.results.store import load_results
from mmbench.running.runner import RunOptions, run_poolset
from mmbench.tasks import get_task
from toy_models import HashingModel


def _design(sizes=(3, 5, 8, 13)):
    """Items in cells of unequal sizes (subset x length bin), each item with its own candidates."""
    return [PoolItem(f"{s}-{n}-{i}", f"q{s}{n}{i}", s, [f"{s}{n}{i}-{c}" for c in range(3)], [f"{s}{n}{i}-0"],
                     {"length_bin": n}) for s in ("x", "y") for n, size in zip(("1k", "2k", "4k", "8k"), sizes)
            for i in range(size)]


def test_the_sample_is_seeded_proportional_and_gives_every_item_the_same_chance():
    pools = _design()
    n, limit = len(pools), 17
    axes = strata_axes(pools)
    sizes = Counter(cell_of(p, axes) for p in pools)
    first = select_sample(pools, limit, seed=3)
    assert first == select_sample(list(reversed(pools)), limit, seed=3)        # the input order does not matter
    assert first != select_sample(pools, limit, seed=4)
    hits = Counter()
    for seed in range(3000):
        chosen = select_sample(pools, limit, seed)
        assert len(chosen) == limit
        got = Counter(cell_of(p, axes) for p in chosen)
        for cell, size in sizes.items():   # each cell: floor or ceil of its proportional share
            assert np.floor(limit * size / n) <= got[cell] <= np.ceil(limit * size / n)
        hits.update(p.id for p in chosen)
    rate = np.array([hits[p.id] for p in pools]) / 3000
    # every item's inclusion rate is limit / n (binomial sd at 3000 draws: about 0.009)
    assert np.abs(rate - limit / n).max() < 0.04, rate


def test_a_limit_at_or_above_the_size_is_all_items_and_the_record_says_which_estimator():
    pools = _design()
    for limit in (None, len(pools), 10 ** 5):
        assert select_sample(pools, limit) == sorted(pools, key=lambda p: p.id)
        record = selection_record(select_sample(pools, limit), pools, limit)
        assert record["limit"] is None and record["estimator"] == FULL_ESTIMATOR and "cell_sizes" not in record
    record = selection_record(select_sample(pools, 9, 2), pools, 9, 2)
    assert record["limit"] == 9 and record["seed"] == 2 and record["estimator"] == SAMPLE_ESTIMATOR
    assert sum(record["cell_sizes"].values()) == len(pools)


def test_the_stratified_mean_matches_the_textbook_formula():
    """Two cells, a proportional sample: the estimate is the cells' means weighted by their sizes, the variance
    Cochran's with the finite-population correction (computed here by hand)."""
    values = [1, 0, 1, 1, 0.5, 0, 0]
    cells = ["a", "a", "a", "b", "b", "b", "b"]
    e = stratified_mean(values, cells, {"a": 30, "b": 70}, ["cell"])
    w = np.array([0.3, 0.7])
    means = np.array([np.mean(values[:3]), np.mean(values[3:])])
    var = (w ** 2 * (1 - np.array([3 / 30, 4 / 70])) * np.array([np.var(values[:3], ddof=1) / 3,
                                                                  np.var(values[3:], ddof=1) / 4])).sum()
    assert e.value == pytest.approx(w @ means) and e.se_cochran == pytest.approx(np.sqrt(var)) and e.se >= e.se_cochran
    assert e.strata == 2 and e.axes_used == ["cell"] and e.ci_low < e.value < e.ci_high
    # a cell with one chosen item is collapsed into its coarser stratum
    one = stratified_mean([1, 0, 1], ["x|1k", "x|2k", "x|2k"], {"x|1k": 10, "x|2k": 10}, ["subset", "length_bin"])
    assert one.strata == 1 and one.axes_used == ["subset"] and one.value == pytest.approx(2 / 3)


@pytest.fixture(scope="module")
def msr_bm25(tmp_path_factory):
    """The Multi-Source Reasoning sample and BM25's full per-item results on it."""
    root = tmp_path_factory.mktemp("msr")
    get_task("multi_source_reasoning").build("sample", root / "ps", seed=0, progress=False)
    assert main(["run", "--task", "multi_source_reasoning", "--model", "bm25", "--data", str(root / "ps"),
                 "--output", str(root / "full"), "--quiet"]) == 0
    return root, load_poolset(root / "ps"), load_results(root / "full").per_query.set_index("item_id", drop=False)


@pytest.mark.parametrize("limit", [20, 50, 72])
def test_limit_scores_are_unbiased_and_their_cis_cover_the_full_score(msr_bm25, limit):
    """200 seeds at each limit on the MSR sample with BM25: the mean of the limit-run estimates is within one
    standard error of the full score (and within 3 Monte Carlo se of it), the 95 % CIs cover it in at least 90 %
    of seeds, and they are not wider than the estimates' own spread calls for: the mean width is within 25 % of
    the oracle width 2 x 1.96 x (the estimates' standard deviation over the seeds).

    Coverage is not bounded above at one fixed truth: at --limit 20 the estimate takes 9 distinct values (P@1 0.84),
    so any interval's coverage jumps with the truth (0.986 over 2,000 seeds here, at an oracle-width ratio of 1.07;
    the exact hypergeometric coverage of this interval for one stratum of 144 items at n = 20 ranges 0.948-0.989
    over the truths). Width, not coverage, is what says an interval is too wide. (The old cost-first selection gave
    one answer, above the median of random choices in 14 of 14 cases: MSR BM25 at --limit 72 read 0.819 against
    0.784.)"""
    _, ps, full = msr_bm25
    truth = float(full["precision_at_1"].mean())
    values, ses, widths, covered = [], [], [], 0
    for seed in range(200):
        items = select_sample(ps.pools, limit, seed)
        record = selection_record(items, ps.pools, limit, seed)
        rows = full.loc[[p.id for p in items]].reset_index(drop=True)
        e = limit_estimates(rows, items, record, ["precision_at_1"])["precision_at_1"]
        values.append(e["value"])
        ses.append(e["se"])
        widths.append(e["ci_high"] - e["ci_low"])
        covered += e["ci_low"] <= truth <= e["ci_high"]
    values = np.array(values)
    assert abs(values.mean() - truth) <= np.mean(ses)
    assert abs(values.mean() - truth) <= 3 * values.std(ddof=1) / np.sqrt(200)
    assert covered / 200 >= 0.90, covered
    oracle = 2 * 1.96 * values.std(ddof=1)
    assert 0.75 <= np.mean(widths) / oracle <= 1.25, (np.mean(widths), oracle)


def test_the_runner_records_the_estimate_and_a_full_size_limit_joins_a_full_run(msr_bm25, capsys):
    root, ps, full = msr_bm25
    n = len(ps.pools)
    for name, extra in (("at-size", ["--limit", str(n)]), ("above", ["--limit", "100000"]), ("l50", ["--limit", "50"])):
        assert main(["run", "--task", "multi_source_reasoning", "--model", "bm25", "--data", str(root / "ps"),
                     "--output", str(root / name), "--quiet", *extra]) == 0
    capsys.readouterr()
    runs = [str(root / k) for k in ("full", "at-size", "above")]
    assert main(["compare", *runs, "--resamples", "100", "--ci-resamples", "50"]) == 0   # one protocol
    assert {load_results(r).info["protocol_id"] for r in runs} == {load_results(runs[0]).info["protocol_id"]}
    limited = load_results(root / "l50")
    sel = limited.info["selection"]
    assert sel["estimator"] == SAMPLE_ESTIMATOR and sel["estimate"]["precision_at_1"]["n_total"] == n
    assert main(["show", str(root / "l50")]) == 0
    shown = capsys.readouterr().out
    assert f"estimate of the whole task's precision_at_1: {sel['estimate']['precision_at_1']['value']:.3f}" in shown
    assert main(["compare", runs[0], str(root / "l50"), "--resamples", "100"]) == 2   # a sample is another protocol
    assert "different protocols" in capsys.readouterr().err


def test_the_runner_encodes_only_what_the_sample_needs(vg_small):
    ps = load_poolset(vg_small)
    limit = len(ps.pools) // 10
    small = select_sample(ps.pools, limit)
    _, _, info = run_poolset(ps, HashingModel(), RunOptions(limit=limit, use_cache=False, progress=False))
    assert info["n_items"] == limit and info["selection"]["estimate"]["precision_at_1"]["n"] == limit
    assert info["encode"]["documents"] == (len({c for p in small for c in p.candidate_ids})
                                           + len({p.query_id for p in small}))
    assert set(pd.Series([p.meta["anchor_kind"] for p in small])) == {"image", "text"}
