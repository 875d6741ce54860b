"""Simultaneous rank sets and the new-task rank prediction interval, checked by simulation with known ranks."""
from __future__ import annotations

import numpy as np
import pytest

from mmbench.evaluators.stats.rank_sets import new_task_rank_interval, rank_sets
from mmbench.evaluators.stats.ranking import competition_ranks

MODELS = ["a", "b", "c", "d"]


def _task(rng, means, n=120):
    """Per-item scores of len(means) models: a shared item difficulty plus model noise (paired, correlated)."""
    difficulty = rng.normal(0, 1, n)
    return np.array([mu + difficulty + rng.normal(0, 1, n) for mu in means])


def _covered(res, true_ranks, joint: bool) -> bool:
    low, high = (res.low, res.high) if joint else (res.per_task_low, res.per_task_high)
    return all(lo <= r <= hi for t, ranks in enumerate(true_ranks) for lo, r, hi in zip(low[t], ranks, high[t]))


@pytest.mark.parametrize("n_tasks", [1, 3])
def test_rank_sets_cover_the_true_ranks_at_the_nominal_level_when_all_tie(n_tasks):
    """The least favourable case (every model equal, true rank 1 for all): coverage within 2 points of 95 %."""
    rng = np.random.default_rng(n_tasks)
    hits = []
    for sim in range(600 if n_tasks == 1 else 400):
        res = rank_sets(MODELS, [_task(rng, [0, 0, 0, 0], n=100) for _ in range(n_tasks)], alpha=0.05, resamples=300,
                        seed=sim)
        hits.append(_covered(res, [[1, 1, 1, 1]] * n_tasks, joint=True))
    assert np.mean(hits) == pytest.approx(0.95, abs=0.02)


def test_rank_sets_are_conservative_when_models_differ_and_narrow_with_strong_signal():
    rng = np.random.default_rng(7)
    means = [0.0, 0.15, 0.3, 0.45]
    true = competition_ranks(np.array(means)).tolist()
    hits = [_covered(rank_sets(MODELS, [_task(rng, means), _task(rng, means)], resamples=300, seed=s),
                     [true, true], joint=True) for s in range(200)]
    assert np.mean(hits) >= 0.93
    strong = rank_sets(MODELS, [_task(rng, [0, 2, 4, 6], n=300)], resamples=300)
    assert strong.low == strong.high == [[4, 3, 2, 1]]


def test_per_task_sets_are_no_wider_than_the_benchmark_wide_ones():
    rng = np.random.default_rng(8)
    res = rank_sets(MODELS, [_task(rng, [0, 0.2, 0.4, 0.6]) for _ in range(3)], resamples=300)
    assert res.critical >= max(res.per_task_critical)
    for t in range(3):
        assert all(pl >= lo and ph <= hi for pl, lo, ph, hi in
                   zip(res.per_task_low[t], res.low[t], res.per_task_high[t], res.high[t]))


def test_the_new_task_prediction_interval_covers_at_its_guaranteed_level():
    """Tasks are exchangeable draws: each gives every model its base skill plus a task-specific shift. The
    interval from 19 tasks at alpha 0.1 guarantees 90 %; the new task's rank falls in it at least that often."""
    rng = np.random.default_rng(9)
    base = np.array([0.0, 0.3, 0.6, 0.9])
    hits, cov = [], None
    for _ in range(1000):
        ranks = competition_ranks(base + rng.normal(0, 0.5, (20, 4)))
        pred = new_task_rank_interval(ranks[:19], MODELS, alpha=0.1)
        cov = pred.coverage
        hits.append([lo <= r <= hi for lo, r, hi in zip(pred.low, ranks[19], pred.high)])
    assert cov == pytest.approx(0.9)
    rates = np.mean(hits, axis=0)
    assert np.all(rates >= 0.88)  # discrete ranks tie at the ends, so coverage can exceed the guarantee


def test_too_few_tasks_give_every_rank_and_say_so():
    pred = new_task_rank_interval([[1, 2, 3], [2, 1, 3]], ["x", "y", "z"], alpha=0.05)
    assert pred.low == [1, 1, 1] and pred.high == [3, 3, 3] and pred.coverage == 1.0
    assert pred.best_possible == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="matrix"):
        rank_sets(MODELS, [np.zeros((3, 10))])


def test_mmbench_ranks_over_results_of_several_tasks(tmp_path, capsys):
    import json

    from mmbench.cli import main
    from report_helpers import grounding_per_query, write_run

    folders = []
    for t, task in enumerate(("task_a", "task_b", "task_c")):
        for m, skill in (("strong", 0.95), ("mid", 0.55), ("weak", 0.1)):
            folders.append(write_run(tmp_path / task / m, grounding_per_query(seed=10 * t + len(m), skill=skill), m,
                                     task=task, content_hash=f"hash-{task}"))
    assert main(["ranks", *map(str, folders), "--resamples", "300", "--out", str(tmp_path / "out")]) == 0
    data = json.loads((tmp_path / "out" / "ranks.json").read_text())
    sets = data["rank_sets"]
    assert sets["tasks"] == ["task_a", "task_b", "task_c"] and sets["models"] == ["mid", "strong", "weak"]
    assert all(r == [2, 1, 3] for r in sets["ranks"])
    assert sets["low"][0] == sets["high"][0] == [2, 1, 3]  # far apart: every set is one rank
    assert data["new_task"]["coverage"] == 1.0  # 3 tasks cannot guarantee 95 %: every rank
    assert "rank on a new task" in capsys.readouterr().out
    assert main(["ranks", *map(str, folders[:-1])]) == 2  # weak has no run on task_c
    capsys.readouterr()
    # compare over runs of several tasks (a benchmark) gives the same rank sets
    assert main(["compare", *map(str, folders), "--ci-resamples", "300", "--out", str(tmp_path / "cmp")]) == 0
    assert json.loads((tmp_path / "cmp" / "ranks.json").read_text())["rank_sets"] == sets
    assert "rank on a new task" in capsys.readouterr().out
    assert main(["compare", *map(str, folders[:-1])]) == 2


def test_the_board_overview_has_rank_sets_across_tasks(tmp_path):
    from mmbench.leaderboards.rank_sets import rank_sets_section
    from mmbench.leaderboards.store import Entry
    from mmbench.results.store import load_results
    from report_helpers import grounding_per_query, write_run

    entries, runs = [], {}
    for t, task in enumerate(("task_a", "task_b")):
        for m, skill in (("strong", 0.95), ("weak", 0.1), ("only_a", 0.5)):
            if m == "only_a" and task == "task_b":
                continue
            folder = write_run(tmp_path / task / m, grounding_per_query(seed=t, skill=skill), m, task=task)
            e = Entry(f"{task}-{m}", "retrieval", task, "1", "h", {"name": m}, folder, "2026", {})
            entries.append(e)
            runs[e.id] = load_results(folder)
    html = rank_sets_section(entries, lambda e: runs[e.id], lambda task: "precision_at_1")
    assert "Rank sets across tasks" in html and "only_a" not in html  # a model without every task is left out
    assert "<td class=\"text\">strong</td><td>1 [1–1] [1–1]</td><td>1 [1–1] [1–1]</td>" in html
    assert rank_sets_section(entries[:3], lambda e: runs[e.id], lambda task: "precision_at_1") == ""  # one task
