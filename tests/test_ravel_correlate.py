"""`mmbench ravel correlate` against the shipped Table 7 and the authors' alignment-probing scores."""
from pathlib import Path

import pandas as pd
import pytest

from mmbench.cli import main as mmbench_main
from mmbench.evaluators.ravel import correlate, selection
from mmbench.running.ravel_inputs import correlate_files, load_ground_truth

DATA = Path(__file__).parent / "data" / "ravel_alignment_probing_210.csv"

# Paper Table 1, alignment-probing row (the paper prints 0.634 for Qwen2.5 ρ; the data give 0.635)
EXPECTED = {"Qwen3-1.7B": (0.569, 0.618), "Qwen2.5-1.5B": (0.635, 0.640), "SmolLM2-1.7B": (0.670, 0.711)}


def test_reference_table_shipped():
    gt = load_ground_truth()
    assert len(gt) == 210 and gt["encoder"].nunique() == 70
    assert set(gt["llm"]) == {"Qwen3-1.7B", "Qwen2.5-1.5B-Instruct", "SmolLM2-1.7B-Instruct"}
    bench = gt[list(correlate.BENCHMARKS)].mean(axis=1)
    assert (bench - gt["Avg"]).abs().max() < 0.006  # every row's Avg is the mean of its 11 scores


def test_alias_table():
    assert correlate.ENCODER_ALIASES["RAEv2 DINOv3-L (k=7)"] == "RAEv2 DINOv3-L"
    assert correlate.ENCODER_ALIASES["UniTok-Attn (256)"] == "UniTok (256)"
    assert correlate.canonical_llm("Qwen/Qwen2.5-1.5B-Instruct") == "Qwen2.5-1.5B-Instruct"
    assert correlate.canonical_llm("SmolLM2-1.7B") == "SmolLM2-1.7B-Instruct"


def test_alignment_probing_correlations_pinned():
    res = correlate_files(DATA, score_column="mean_recall_5cap").set_index("llm")
    for llm, (rho, r) in EXPECTED.items():
        assert res.loc[llm, "n"] == 70
        assert round(res.loc[llm, "spearman"], 3) == rho
        assert round(res.loc[llm, "pearson"], 3) == r
        assert -1 <= res.loc[llm, "mean_bench_spearman"] <= 1


def test_cli_prints_pinned_values(capsys):
    assert mmbench_main(["ravel", "correlate", "--scores", str(DATA), "--score-column", "mean_recall_5cap"]) == 0
    out = capsys.readouterr().out
    for llm, (rho, r) in EXPECTED.items():
        line = next(line for line in out.splitlines() if line.startswith(llm))
        assert f"{rho:.3f}" in line and f"{r:.3f}" in line


def test_unmatched_names_fail_loudly(tmp_path):
    df = pd.read_csv(DATA)
    df.loc[0, "display_name"] = "No Such Encoder"
    df.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(ValueError, match="no ground truth"):
        correlate_files(tmp_path / "s.csv", score_column="mean_recall_5cap")
    res = correlate_files(tmp_path / "s.csv", score_column="mean_recall_5cap", allow_missing=True)
    assert res["n"].sum() == 209


def test_selection_curve_oracle_scores_zero_regret():
    gt = load_ground_truth()
    merged = gt.assign(score=gt["Avg"])
    curve = selection.selection_curve(merged)
    assert len(curve) == 210 and curve["regret"].abs().max() == 0
    inv = selection.selection_curve(gt.assign(score=-gt["Avg"]))
    assert (inv.groupby("llm")["picked_gt"].max() == gt.groupby("llm")["Avg"].min()).all()


def test_allow_missing_reports_every_dropped_pair(tmp_path, capsys):
    df = pd.read_csv(DATA)
    df.loc[0, "display_name"] = "No Such Encoder"
    df.to_csv(tmp_path / "s.csv", index=False)
    assert mmbench_main(["ravel", "correlate", "--scores", str(tmp_path / "s.csv"), "--score-column",
                         "mean_recall_5cap", "--allow-missing"]) == 0
    err = capsys.readouterr().err
    assert "dropped 1 scored" in err and f"No Such Encoder / {df.loc[0, 'llm']}" in err


def test_missing_scores_are_named_not_turned_into_nan_correlations(tmp_path):
    df = pd.read_csv(DATA)
    df.loc[3, "mean_recall_5cap"] = None
    df.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(ValueError, match="1 missing or non-finite scores") as info:
        correlate_files(tmp_path / "s.csv", score_column="mean_recall_5cap")
    assert df.loc[3, "display_name"] in str(info.value)


def test_a_missing_scores_file_is_one_line_and_exit_2(tmp_path, capsys):
    """Issue 26 #8: exit 1 with a raw `[Errno 2]` before."""
    from mmbench.cli import main

    missing = tmp_path / "nope.csv"
    assert main(["ravel", "correlate", "--scores", str(missing)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"mmbench: error: --scores {missing}: no such file"]
    assert main(["ravel", "selection", "--scores", str(missing)]) == 2
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    assert main(["ravel", "correlate", "--scores", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err
