import numpy as np
import pytest
import pytrec_eval

from mmbench.evaluators.metrics import item_metrics

TREC = {"P_1": "precision_at_1", "P_5": "precision_at_5", "recall_1": "recall_at_1", "recall_5": "recall_at_5",
        "recall_10": "recall_at_10", "ndcg_cut_10": "ndcg_at_10", "recip_rank": "mrr"}


def test_metrics_agree_with_pytrec_eval():
    rng = np.random.default_rng(0)
    qrels, run, ours = {}, {}, {}
    for q in range(60):
        n = int(rng.integers(5, 30))
        cands = [f"d{q}_{i}" for i in range(n)]
        rel = set(rng.choice(cands, size=int(rng.integers(1, 4)), replace=False))
        ranked = list(rng.permutation(cands))
        qrels[f"q{q}"] = {c: int(c in rel) for c in cands}
        # strictly decreasing scores so pytrec_eval's tie handling plays no part
        run[f"q{q}"] = {c: float(n - i) for i, c in enumerate(ranked)}
        ours[f"q{q}"] = item_metrics(ranked, rel)
    measures = {"P_1", "P_5", "recall_1", "recall_5", "recall_10", "ndcg_cut_10", "recip_rank"}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    for q, m in theirs.items():
        for trec_name, name in TREC.items():
            assert ours[q][name] == pytest.approx(m[trec_name], abs=1e-9), (q, name)


def test_mrr_at_10_cuts_off():
    ranked = [f"c{i}" for i in range(20)]
    assert item_metrics(ranked, ["c10"])["mrr_at_10"] == 0.0
    assert item_metrics(ranked, ["c10"])["mrr"] == pytest.approx(1 / 11)
    assert item_metrics(ranked, ["c9"])["mrr_at_10"] == pytest.approx(0.1)


def test_empty_relevance_is_rejected():
    with pytest.raises(ValueError):
        item_metrics(["a"], [])


def test_group_labels_sort_by_size():
    from mmbench.evaluators.ordering import label_key

    labels = ["16k", "easy", "1k", "256", "32k", "512", "2k", "0.2", "1.0", "hard"]
    assert sorted(labels, key=label_key) == ["0.2", "1.0", "256", "512", "1k", "2k", "16k", "32k", "easy", "hard"]


def test_aggregate_rows_follow_natural_subset_order():
    """results.json lists subsets as every report does: 8k before 16k before 32k, dataset by dataset."""
    import pandas as pd

    from mmbench.results.aggregate import aggregate

    subsets = ["hotpotqa/hard/32k", "hotpotqa/easy/8k", "mmdocrag/easy/16k", "hotpotqa/easy/16k", "hotpotqa/hard/8k"]
    frame = pd.DataFrame({"subset": subsets, "precision_at_1": [1.0, 0.0, 1.0, 0.0, 1.0]})
    got = [r.group.removeprefix("subset=") for r in aggregate(frame) if r.group.startswith("subset=")]
    assert got == ["hotpotqa/easy/8k", "hotpotqa/easy/16k", "hotpotqa/hard/8k", "hotpotqa/hard/32k",
                   "mmdocrag/easy/16k"]


@pytest.mark.parametrize("n,r", [(5, 1), (5, 2), (6, 3), (4, 4)])
def test_chance_metrics_equal_the_mean_over_every_ranking(n, r):
    """The expected value of each metric under a random ranking, checked by enumerating all n! rankings."""
    from itertools import permutations

    from mmbench.evaluators.metrics import chance_metrics

    cands = [f"c{i}" for i in range(n)]
    relevant = cands[:r]
    rows = [item_metrics(list(p), relevant) for p in permutations(cands)]
    expected = {m: float(np.mean([row[m] for row in rows])) for m in rows[0]}
    got = chance_metrics(n, r)
    assert got.keys() == expected.keys()
    for m in expected:
        assert got[m] == pytest.approx(expected[m], abs=1e-12), m
    assert chance_metrics(25, 1)["mrr"] == pytest.approx(sum(1 / i for i in range(1, 26)) / 25)
