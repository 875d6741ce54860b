"""`--limit N` chooses items whose documents grow with N (whole cells first), deterministically,
still spanning the subsets."""
from collections import Counter

from mmbench.data.poolset import PoolItem, load_poolset
from mmbench.running.runner import RunOptions, run_poolset
from mmbench.data.selection import select_by_cost
from toy_models import HashingModel


def _candidates(items):
    return len({c for p in items for c in p.candidate_ids})


def test_limit_encodes_documents_in_proportion(vg_small):
    ps = load_poolset(vg_small)
    n_items, n_cands = len(ps.pools), len(ps.candidates)
    per_pool = max(len(p.candidate_ids) for p in ps.pools)
    for share in (0.05, 0.1, 0.25):
        limit = int(n_items * share)
        chosen = select_by_cost(ps.pools, limit)
        assert len(chosen) == limit and chosen == select_by_cost(list(reversed(ps.pools)), limit)
        # documents in proportion to the items: at most one partly used pool beyond the share
        assert _candidates(chosen) <= share * n_cands + per_pool, (share, _candidates(chosen), n_cands)
    small = select_by_cost(ps.pools, n_items // 10)
    assert set(p.subset for p in small) == set(p.subset for p in ps.pools)  # a small limit still spans subsets
    # the runner encodes what the chosen items need, and nothing else
    _, _, info = run_poolset(ps, HashingModel(), RunOptions(limit=n_items // 10, use_cache=False, progress=False))
    assert info["n_items"] == n_items // 10
    assert info["encode"]["documents"] == _candidates(small) + len({p.query_id for p in small})


def test_greedy_prefers_items_that_reuse_chosen_candidates():
    # two cells of three items sharing their candidates, plus one loner with its own candidates
    pools = [PoolItem(f"a{i}", f"qa{i}", "s1", ["a1", "a2", "a3"], ["a1"]) for i in range(3)]
    pools += [PoolItem(f"b{i}", f"qb{i}", "s2", ["b1", "b2", "b3"], ["b1"]) for i in range(3)]
    pools += [PoolItem("c0", "qc0", "s3", ["c1", "c2", "c3"], ["c1"])]
    chosen = select_by_cost(pools, 3)
    assert len({p.id[0] for p in chosen}) == 1 and _candidates(chosen) == 3  # one whole cell
    four = select_by_cost(pools, 4)
    assert Counter(p.id[0] for p in four).most_common(1)[0][1] == 3 and _candidates(four) == 6
    assert select_by_cost(pools, None) == sorted(pools, key=lambda p: p.id)
