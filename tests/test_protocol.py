"""The protocol record and id on every result; compare and report refuse to join different protocols."""
from __future__ import annotations

import dataclasses
import json
import re

from mmbench.cli import main
from mmbench.data.poolset import load_poolset
from mmbench.running.evaluation import evaluate_to_folder
from mmbench.running.runner import RunOptions
from mmbench.results.protocol import join_problems, protocol_differences
from toy_models import HashingModel


def _toy(name, dim=64, dtype=None):
    m = HashingModel(dim=dim)
    m.card = dataclasses.replace(m.card, name=name, settings={**m.card.settings, **({"dtype": dtype} if dtype else {})})
    return m


def _run(ps, model, out, limit=None):
    return evaluate_to_folder("visual_grounding", ps, model, RunOptions(limit=limit, use_cache=False, progress=False),
                              out, model.card.name)


def test_results_carry_a_protocol_record_and_id(vg_tiny, tmp_path):
    ps = load_poolset(vg_tiny)
    info = _run(ps, _toy("a"), tmp_path / "a", limit=7)["mmbench"]
    assert re.fullmatch(r"[0-9a-f]{8}\.[0-9a-f]{8}", info["protocol_id"])
    rec = info["protocol"]
    sel = rec["evaluation"]["selection"]
    assert sel["limit"] == 7 and sel["n_items"] == 7 and len(sel["items_hash"]) == 16
    assert rec["setup"]["backend"] == "local weights" and rec["setup"]["pooling"]["similarity"] == "cosine"
    assert rec["strata"]["cells_covered"] >= 1
    # another limit: the evaluation part of the id changes, the setup part does not
    other = _run(ps, _toy("a"), tmp_path / "a8", limit=8)["mmbench"]
    assert other["protocol_id"].split(".")[0] != info["protocol_id"].split(".")[0]
    assert other["protocol_id"].split(".")[1] == info["protocol_id"].split(".")[1]
    assert any(d.startswith("evaluation.selection.limit: 7 vs 8") for d in protocol_differences(info["protocol"], other["protocol"]))


def test_join_rules_evaluation_per_pool_set_setup_per_model():
    rec = lambda limit, window: {"evaluation": {"selection": {"limit": limit}}, "setup": {"window": window}}  # noqa: E731
    assert join_problems([("r1", "m1", "ps", rec(5, 100)), ("r2", "m2", "ps", rec(5, 200))]) == []  # other models differ
    assert "selection.limit" in join_problems([("r1", "m1", "ps", rec(5, 100)), ("r2", "m2", "ps", rec(6, 100))])[0]
    assert "setup.window" in join_problems([("r1", "m1", "ps", rec(5, 100)), ("r2", "m1", "ps2", rec(9, 200))])[0]


def test_compare_refuses_different_protocols_and_ranks_three_runs(vg_tiny, tmp_path, capsys):
    ps = load_poolset(vg_tiny)
    for name, dim in (("a", 64), ("b", 32), ("c", 16)):
        _run(ps, _toy(name, dim), tmp_path / name, limit=30)
    _run(ps, _toy("c", 16), tmp_path / "c20", limit=20)
    _run(ps, _toy("c", 16, dtype="float16"), tmp_path / "c_half", limit=30)
    folders = [str(tmp_path / n) for n in ("a", "b", "c")]
    assert main(["compare", *folders, "--out", str(tmp_path / "cmp"), "--resamples", "200", "--ci-resamples", "200"]) == 0
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    ranking = data["ranking"]
    assert ranking["models"] == ["a", "b", "c"] and len(ranking["tiers"]) == 3
    assert all(lo <= r <= hi for lo, r, hi in zip(ranking["rank_low"], ranking["ranks"], ranking["rank_high"]))
    assert all("floor" in p and p["floor"]["n"] == 30 for p in data["pairs"])
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "## Ranks and tiers" in md and "statistically tied" in md and "floor (MDE)" in md
    assert "rank set (95%, simultaneous)" in md and "marginal rank interval" in md
    capsys.readouterr()
    # another --limit: refused (exit 2), naming the field
    assert main(["compare", folders[0], str(tmp_path / "c20")]) == 2
    err = capsys.readouterr().err
    assert "different protocols" in err and "evaluation.selection.limit: 30 vs 20" in err
    # the same model in another dtype: refused, naming the field
    assert main(["compare", folders[2], str(tmp_path / "c_half")]) == 2
    assert 'setup.dtype: null vs "float16"' in capsys.readouterr().err
    # the flag joins them and prints the difference
    assert main(["compare", folders[0], str(tmp_path / "c20"), "--allow-protocol-mismatch"]) == 0
    assert "joined despite a protocol difference" in capsys.readouterr().err
    # report too
    assert main(["report", folders[0], str(tmp_path / "c20"), "--out", str(tmp_path / "rep")]) == 2
    assert "evaluation.selection.limit" in capsys.readouterr().err


def test_validate_prints_design_floors_per_group_and_cell(vg_tiny, capsys):
    """Design-time floors are derived when read (the pool set and its content hash stay as built)."""
    from mmbench.evaluators.stats.floors import design_floor

    ps = load_poolset(vg_tiny)
    assert main(["validate", str(vg_tiny)]) == 0
    out = capsys.readouterr().out
    assert f"  all: {len(ps.pools)} items, floor {design_floor(len(ps.pools)).mde:.3f}" in out
    cell = [p for p in ps.pools if p.meta["depth"] == 0.0]
    assert f"  length_bin=256 x depth=0.0: {len(cell)} items, floor {design_floor(len(cell)).mde:.3f}" in out
    assert "depth=0.0:" in out and load_poolset(vg_tiny).content_hash == ps.content_hash
