"""A results folder exactly as `mmbench run` writes it is accepted by `mmbench leaderboard submit`.

The other leaderboard tests build their results with the runner directly; `mmbench run` also records its
settings (the tie-breaking seed among them), and the README's leaderboard example submits such a folder."""
from __future__ import annotations

import json

from leaderboard_helpers import official_registry
from mmbench.cli import main


def test_a_folder_written_by_mmbench_run_is_accepted_and_its_seed_checked(vg_tiny, tmp_path, capsys):
    out, board, registry = tmp_path / "run", tmp_path / "board", tmp_path / "official.json"
    official_registry(vg_tiny, registry)
    assert main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(vg_tiny), "--output", str(out),
                 "--seed", "3", "--no-cache", "--quiet"]) == 0
    assert json.loads((out / "results.json").read_text())["mmbench"]["seed"] == 3
    capsys.readouterr()
    assert main(["leaderboard", "submit", str(out), "--board", str(board), "--official", str(registry)]) == 0, \
        capsys.readouterr().err
    summary = json.loads((out / "results.json").read_text())
    summary["mmbench"]["seed"] = -1           # a setting, but still checked: not any number passes
    (out / "results.json").write_text(json.dumps(summary))
    assert main(["leaderboard", "submit", str(out), "--board", str(board), "--official", str(registry),
                 "--replace"]) == 2
    assert "mmbench.seed: -1 is not a non-negative integer" in capsys.readouterr().err
