"""`--limit N` samples the task's design cells (every axis's values), then chooses items whose documents
grow with N within them, deterministically."""

import numpy as np

from mmbench.data.poolset import PoolItem, load_poolset
from mmbench.running.runner import RunOptions, run_poolset
from mmbench.data.selection import balanced_order, select_by_cost, strata_axes
from toy_models import HashingModel


def _candidates(items):
    return len({c for p in items for c in p.candidate_ids})


def test_limit_encodes_documents_in_proportion(vg_small):
    ps = load_poolset(vg_small)
    n_items, n_cands = len(ps.pools), len(ps.candidates)
    per_pool = max(len(p.candidate_ids) for p in ps.pools)
    # coverage first: as many cells as the axis with the most values has; beyond that, whole cells
    widest = max(len({str(p.subset) if a == "subset" else str(p.meta.get(a)) for p in ps.pools})
                 for a in strata_axes(ps.pools))
    for share in (0.05, 0.1, 0.25):
        limit = int(n_items * share)
        chosen = select_by_cost(ps.pools, limit)
        assert len(chosen) == limit and chosen == select_by_cost(list(reversed(ps.pools)), limit)
        # documents in proportion to the items, plus at most the coverage floor's partly used pools
        assert _candidates(chosen) <= share * n_cands + widest * per_pool, (share, _candidates(chosen), n_cands)
    small = select_by_cost(ps.pools, n_items // 10)
    assert set(p.subset for p in small) == set(p.subset for p in ps.pools)  # a small limit still spans subsets
    # the runner encodes what the chosen items need, and nothing else
    _, _, info = run_poolset(ps, HashingModel(), RunOptions(limit=n_items // 10, use_cache=False, progress=False))
    assert info["n_items"] == n_items // 10
    assert info["encode"]["documents"] == _candidates(small) + len({p.query_id for p in small})


def test_within_a_cell_items_that_reuse_chosen_candidates_go_first():
    # one cell: three items sharing their candidates, one loner with its own
    pools = [PoolItem(f"a{i}", f"qa{i}", "s1", ["a1", "a2", "a3"], ["a1"]) for i in range(3)]
    pools += [PoolItem("c0", "qc0", "s1", ["c1", "c2", "c3"], ["c1"])]
    chosen = select_by_cost(pools, 3)
    assert {p.id[0] for p in chosen} == {"a"} and _candidates(chosen) == 3
    assert select_by_cost(pools, None) == sorted(pools, key=lambda p: p.id)


def test_every_axis_value_is_covered_before_any_repeats():
    # subset x length x depth, 2 x 4 x 3 cells of 5 items each, items of a cell share candidates
    pools = [PoolItem(f"{s}-{n}-{d}-{i}", f"q{s}{n}{d}{i}", s, [f"{s}{n}{d}-{c}" for c in range(4)], [f"{s}{n}{d}-0"],
                      {"length_bin": n, "depth": d})
             for s in ("x", "y") for n in ("1k", "2k", "4k", "8k") for d in (0.0, 0.5, 1.0) for i in range(5)]
    cells = sorted({(p.subset, p.meta["length_bin"], str(p.meta["depth"])) for p in pools})
    order = balanced_order(cells)
    assert sorted(order) == cells and len({c[1] for c in order[:4]}) == 4 and len({c[0] for c in order[:2]}) == 2
    for limit in (4, 8, 10):
        chosen = select_by_cost(pools, limit)
        assert {p.meta["length_bin"] for p in chosen} == {"1k", "2k", "4k", "8k"}, limit
        assert {p.subset for p in chosen} == {"x", "y"} and {p.meta["depth"] for p in chosen} == {0.0, 0.5, 1.0}
    # a limit of whole cells takes whole cells: 20 items = 4 cells of 5, 16 candidates
    twenty = select_by_cost(pools, 20)
    assert len(twenty) == 20 and _candidates(twenty) == 16


def test_limit_samples_visual_grounding_and_msr_default_samples(tmp_path):
    """The issue's cases on the default sample builds: VG --limit 20 spans both anchor kinds, all three
    backgrounds and several length bins; MSR --limit 40 both datasets and all three lengths (before, VG took one
    image-anchor cell and MSR only MMDocRAG at 8k/16k)."""
    from mmbench.tasks import get_task

    vg, msr = tmp_path / "vg", tmp_path / "msr"
    get_task("visual_grounding").build("sample", vg, seed=0, progress=False)
    get_task("multi_source_reasoning").build("sample", msr, seed=0, progress=False)
    chosen = select_by_cost(load_poolset(vg).pools, 20)
    assert {p.meta["anchor_kind"] for p in chosen} == {"image", "text"}
    assert {p.meta["background_modality"] for p in chosen} == {"image", "mixed", "text"}
    assert len({p.meta["length_bin"] for p in chosen}) >= 4
    chosen = select_by_cost(load_poolset(msr).pools, 40)
    assert {p.meta["dataset"] for p in chosen} == {"hotpotqa", "mmdocrag"}
    assert {p.meta["length_bin"] for p in chosen} == {"8k", "16k", "32k"}
    assert {p.meta["difficulty"] for p in chosen} == {"easy", "hard"}
    # the README's API example (a letter-count text model, limit=20) prints a score that means something:
    # it printed P@1 0.0 when the 20 items were one image-anchor cell
    import mmbench

    class Letters(mmbench.EmbeddingModel):
        card = mmbench.ModelCard(name="letters", family="toy", modalities=frozenset({"text"}), max_tokens=None)

        def encode(self, documents, role, media):
            return np.array([[d.text.lower().count(c) + 1e-3 for c in "abcdefghijklmnopqrstuvwxyz"]
                             for d in documents], dtype=np.float32)

    ev = mmbench.evaluate(Letters(), "visual_grounding", data=vg, limit=20)
    assert ev["visual_grounding"].main_score > 0
    groups = ev.aggregates.loc["visual_grounding"]
    assert groups.loc["anchor_kind=text", "n_items"] == groups.loc["anchor_kind=image", "n_items"] == 10
