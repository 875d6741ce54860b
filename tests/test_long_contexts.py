"""64K and 128K contexts: opt-in bins, a reduced 128K build checked for counts and depths and validated,
reports over ten bins, and the default sample left at its eight bins."""
import numpy as np
import pandas as pd
import pytest

from mmbench.data.tokens import length_label
from mmbench.tasks import get_task

LONG = 131072


@pytest.fixture(scope="module")
def vg_128k(tmp_path_factory):
    out = tmp_path_factory.mktemp("vg") / "vg_128k"
    get_task("visual_grounding").build("sample", out, seed=0, lengths=(LONG,), depths=(0.5,), needles_per_kind=2,
                                       progress=False)
    return out


def test_the_long_bins_are_listed_but_not_built_by_default(capsys):
    from mmbench.cli import main

    task = get_task("visual_grounding")
    assert task.long_bins == ("64k", "128k") and task.long_lengths == (65536, 131072)
    assert len(task.length_bins) == 8 and "128k" not in task.length_bins
    assert max(task.default_params["lengths"]) == 32768   # the default sample stays at its eight bins
    assert main(["list", "tasks"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("visual_grounding"))
    assert "optional long bins: 64k,128k (--param lengths=[65536,131072])" in line


def test_a_reduced_128k_build_has_its_counts_and_depths_and_is_valid(vg_128k):
    from mmbench.data.poolset import load_poolset
    from mmbench.tasks.validation import validate

    ps = load_poolset(vg_128k, verify=True)
    tokens = np.array([d.tokens for d in ps.candidates])
    assert len(ps.candidates) == 12 and len(ps.pools) == 12
    assert np.all(np.abs(tokens - LONG) <= 0.01 * LONG)           # within 1 % of 128K unified tokens
    assert {p.meta["length_bin"] for p in ps.pools} == {"128k"}
    assert {p.meta["depth"] for p in ps.pools} == {0.5}
    assert {p.meta["length_tokens"] for p in ps.pools} == {LONG}
    for p in ps.pools:
        assert len(p.relevant_ids) == 1 and p.relevant_ids[0] in p.candidate_ids
    report = validate(ps)
    assert report.ok, report.summary_line()


def test_reports_order_ten_bins_and_draw_them(tmp_path):
    from mmbench.reports import figures
    from mmbench.reports.report import heatmap_numbers

    lengths = [256 * 2 ** k for k in range(10)]                    # 256 .. 128k
    rng = np.random.default_rng(0)
    rows = [{"length_bin": length_label(n), "depth": d, "anchor_kind": "text", "precision_at_5": float(rng.random() < 0.2)}
            for n in lengths for d in (0.0, 0.5, 1.0) for _ in range(3)]
    pq = pd.DataFrame(rows).sample(frac=1, random_state=0)          # bins in no particular order
    (heat,) = heatmap_numbers(pq, "m", "precision_at_5")
    assert heat["lengths"] == [length_label(n) for n in lengths]
    assert heat["lengths"][-2:] == ["64k", "128k"] and all(n == 3 for row in heat["n"] for n in row)
    info = figures.heatmap_figure([heat], tmp_path / "h.png", "precision_at_5")
    assert (tmp_path / "h.png").stat().st_size > 0 and info.kind


def test_multi_source_reasoning_lists_and_builds_a_64k_bin(tmp_path):
    from mmbench.data.poolset import load_poolset
    from mmbench.tasks.validation import validate

    for name in ("multi_source_reasoning", "temporal_summarization"):
        t = get_task(name)
        assert t.long_bins == ("64k", "128k") and max(t.default_params["lengths"]) == 32768
    assert get_task("logical_summarization").long_bins == ()   # its sample corpus runs out of text past 32K
    task = get_task("multi_source_reasoning")
    task.build("sample", tmp_path / "msr", seed=0, lengths=(65536,), progress=False)
    ps = load_poolset(tmp_path / "msr")
    assert {p.meta["length_bin"] for p in ps.pools} == {"64k"}
    assert validate(ps).ok
