"""End to end: two models (BM25, MiniLM) on a small Visual Grounding sample, then compare and report."""
import json

import pytest

from mmbench.cli import main


@pytest.fixture(scope="module")
def two_runs(vg_small, tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    for model in ("bm25", "minilm"):
        assert main(["run", "--task", "visual_grounding", "--model", model, "--data", str(vg_small), "--limit", "72",
                     "--output", str(root / model), "--quiet"]) == 0
    return root


def test_compare_and_report_on_real_runs(two_runs, capsys):
    root = two_runs
    cmp_out, rep_out = root / "cmp", root / "rep"
    assert main(["compare", str(root / "bm25"), str(root / "minilm"), "--resamples", "2000", "--out", str(cmp_out)]) == 0
    data = json.loads((cmp_out / "compare.json").read_text())
    assert data["task"] == "visual_grounding" and data["n_items"] == 72
    pair = data["pairs"][0]
    assert {pair["a"], pair["b"]} == {"bm25", "minilm"}
    t = pair["mcnemar"]["table"]
    assert sum(map(sum, t)) == 72
    md = (cmp_out / "compare.md").read_text()
    assert "McNemar" in md and "bm25 right" in md

    assert main(["report", str(root / "bm25"), str(root / "minilm"), "--out", str(rep_out)]) == 0
    rep = json.loads((rep_out / "report.json").read_text())
    task = rep["tasks"][0]
    heat = task["figures"]["heatmap"]
    assert (heat["rows"], heat["cols"]) == (2, 2)
    assert heat["panels"] == ["bm25 | image anchor", "bm25 | text anchor", "minilm | image anchor", "minilm | text anchor"]
    assert all(h["lengths"] == ["256", "2k"] for h in task["heatmaps"])
    for info in task["figures"].values():
        assert (rep_out / info["path"]).read_bytes().startswith(b"\x89PNG")  # written whole, as PNG
    assert not list(rep_out.rglob("*.tmp")) and not list(cmp_out.rglob("*.tmp"))  # atomic writes leave no temps
    rob = {(r["model"], r["anchor_kind"]): r for r in task["modality_robustness"]}
    assert set(rob) == {(m, k) for m in ("bm25", "minilm") for k in ("text", "image")}
    # both are text-only: blind to image anchors, and never typed "modality-biased (image)" on text anchors
    assert rob[("minilm", "image")]["kind"].startswith("blind")
    assert rob[("minilm", "text")]["kind"].startswith("not typed") and rob[("minilm", "text")]["modalities_seen"] == ["text"]
    assert any("result" in e for e in task["positional_bias"])
    text = (rep_out / "report.md").read_text()
    assert "Positional bias" in text and "Modality robustness" in text
