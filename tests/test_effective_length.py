"""Effective context from consumed lengths: a score that drops at a known consumed length is found there,
whatever nominal bins the items were built in."""
import numpy as np
import pandas as pd
import pytest

from mmbench.evaluators.stats.effective_length import (effective_length, item_consumed_tokens, length_curve,
                                                       run_effective_length)

DROP_AT = 9000


def _synthetic(seed: int = 0, n: int = 600):
    """Items of consumed length log-uniform in [300, 120000]; P@1 is 1 below DROP_AT and 0 from it on."""
    rng = np.random.default_rng(seed)
    tokens = np.exp(rng.uniform(np.log(300), np.log(120_000), n)).round()
    return tokens, (tokens < DROP_AT).astype(float)


@pytest.mark.parametrize("nominal", [(1024, 4096, 16384, 65536, 131072), (2048, 8192, 32768),
                                     (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)])
def test_a_drop_at_a_known_consumed_length_is_found_whatever_the_nominal_bins(nominal):
    tokens, scores = _synthetic()
    # the nominal bin each item was built in: the smallest nominal length at or above what it consumed (a model
    # that truncates or resizes consumes less than its nominal length); the bins do not enter the computation
    nominal_bin = np.array([min([b for b in nominal if b >= t] or [nominal[-1]]) for t in tokens])
    per_query = pd.DataFrame({"item_id": [f"i{k}" for k in range(len(tokens))], "relevant_ids": [[f"d{k}"] for k in range(len(tokens))],
                              "precision_at_1": scores, "error": None, "length_bin": nominal_bin.astype(str)})
    seen = pd.DataFrame({"doc_id": [f"d{k}" for k in range(len(tokens))], "role": "document", "seen_tokens": tokens.astype(int)})
    res = run_effective_length(per_query, seen, "precision_at_1", tolerance=0.05, window=20)
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
    from mmbench.evaluators.reports.report import draw_figures, report_markdown, report_numbers
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
    shown = format_summary(run, ("length_bin",), "precision_at_1")
    assert "effective context (precision_at_1 within 0.05" in shown and f": {eff['effective_tokens']} tokens" in shown
