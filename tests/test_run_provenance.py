"""Provenance in results.json, --version, and what `run` does with a results folder that already holds results."""
from __future__ import annotations

import json

import pytest

from mmbench.cli import main


def _run(vg_tiny, out, *extra):
    return main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(vg_tiny), "--output", str(out),
                 "--quiet", "--no-cache", *extra])


def test_results_record_where_they_came_from(vg_tiny, tmp_path):
    out = tmp_path / "res"
    assert _run(vg_tiny, out, "--limit", "5") == 0
    info = json.loads((out / "results.json").read_text())["mmbench"]
    prov = info["provenance"]
    assert prov["mmbench_version"] and prov["python"].count(".") == 2 and prov["date"].endswith("+00:00")
    assert prov["packages"]["torch"] and prov["packages"]["mteb"]
    assert prov["command"].startswith("mmbench run --task visual_grounding --model bm25") and "--limit 5" in prov["command"]
    assert prov["git"] is None or len(prov["git"]["commit"]) == 40
    assert info["seed"] == 0


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("mmbench 0.")


def test_same_run_is_skipped_and_a_different_one_needs_overwrite(vg_tiny, tmp_path, capsys):
    out = tmp_path / "res"
    assert _run(vg_tiny, out, "--limit", "5") == 0
    stamp = (out / "per_query.parquet").stat().st_mtime_ns
    capsys.readouterr()
    assert _run(vg_tiny, out, "--limit", "5") == 0
    assert "skipped" in capsys.readouterr().out and (out / "per_query.parquet").stat().st_mtime_ns == stamp
    assert _run(vg_tiny, out, "--limit", "6") == 2
    err = capsys.readouterr().err
    assert "already holds results of another run: --limit differs (5 there, 6 now)" in err and "--overwrite" in err
    assert (out / "per_query.parquet").stat().st_mtime_ns == stamp
    assert _run(vg_tiny, out, "--limit", "6", "--overwrite") == 0
    assert json.loads((out / "results.json").read_text())["mmbench"]["limit"] == 6


def test_failed_model_load_leaves_no_empty_folder(vg_tiny, tmp_path, capsys):
    out = tmp_path / "new" / "nested"
    code = main(["run", "--task", "visual_grounding", "--model", "no-such-model", "--data", str(vg_tiny),
                 "--output", str(out), "--quiet"])
    assert code == 2 and "unknown model 'no-such-model'" in capsys.readouterr().err
    assert not (tmp_path / "new").exists() and tmp_path.exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    assert main(["run", "--task", "visual_grounding", "--model", "no-such-model", "--data", str(vg_tiny),
                 "--output", str(kept), "--quiet"]) == 2
    assert (kept / "notes.txt").read_text() == "mine"  # a folder it did not create is left alone


def test_quiet_silences_library_progress_bars(vg_tiny, tmp_path):
    """Before: transformers printed its 'Loading weights' bar even with --quiet."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS")}
    done = subprocess.run([sys.executable, "-m", "mmbench", "run", "--task", "visual_grounding", "--model", "minilm",
                           "--data", str(vg_tiny), "--limit", "3", "--no-cache", "--quiet", "--output",
                           str(tmp_path / "q")], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "%|" not in done.stderr and "Loading" not in done.stderr, done.stderr


def test_a_local_folder_is_named_by_folder_and_hash_or_model_name(vg_tiny, tmp_path):
    import re

    from mmbench.models.registry import load_model
    from mmbench.models.sentence_transformer import packaged_minilm_path

    folder = packaged_minilm_path()
    if folder is None:
        pytest.skip("the packaged MiniLM is not installed")
    name = load_model(str(folder)).card.name
    assert re.fullmatch(r"model@[0-9a-f]{8}", name) and str(folder) not in name
    out = tmp_path / "named"
    assert _run(vg_tiny, out, "--limit", "3", "--model-name", "my-bm25") == 0
    assert json.loads((out / "results.json").read_text())["mmbench"]["model"]["name"] == "my-bm25"


def test_provenance_records_the_device_of_a_lazily_loaded_model_and_the_machine():
    """A warm run's LazyModel that loaded its weights: the device is the loaded model's (it was null before:
    provenance looked for weights on the wrapper only). OS and CPU are always recorded; GPU fields are keys."""
    import torch

    from mmbench.running.lazy_model import LazyModel
    from mmbench.running.provenance import provenance
    from toy_models import HashingModel

    class WithWeights(HashingModel):
        def __init__(self):
            super().__init__()
            self._model = torch.nn.Linear(2, 2)

    lazy = LazyModel(WithWeights().card, WithWeights, lambda m: None)
    assert provenance(lazy)["device"] is None  # not loaded yet, nothing remembered
    lazy.real  # noqa: B018 - load it
    prov = provenance(lazy)
    assert prov["device"] == "cpu" and prov["dtype"] == "float32"
    assert prov["os"] and prov["cpu"] and {"gpu", "cuda", "driver"} <= set(prov)
