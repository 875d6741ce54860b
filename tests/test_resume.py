"""Killed runs resume to byte-identical tables: `mmbench run` is SIGKILLed at random moments and resumed.

The model is `toy_models.BatchSensitiveModel`, registered in the subprocess before the CLI starts: its
vectors depend in the last bits on the padded batch they are computed in (as real models' do), so a
resume that formed its batches from the documents missing from the cache would write other scores.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent
LAUNCH = (
    "import sys; sys.path.insert(0, {tests!r});"
    "from mmbench.models.registry import ModelSpec, register;"
    "register(ModelSpec('batch-sensitive', 'toy_models:BatchSensitiveModel', ('text',), None, 'test model'));"
    "from mmbench.cli import main; sys.exit(main(sys.argv[1:]))"
).format(tests=str(TESTS))


def _run(args, env):
    return subprocess.Popen([sys.executable, "-c", LAUNCH, "run", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _wait_for_entries(proc, cache: Path, n: int) -> None:
    """Poll until the run has stored `n` packs, i.e. batches (or has ended)."""
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if cache.exists() and len(list(cache.rglob("*.npz"))) >= n:
            return
        time.sleep(0.003)


def _scores(folder: Path):
    return json.loads((folder / "results.json").read_text())["scores"]


def test_ten_random_sigkills_each_resume_byte_identical(vg_tiny, tmp_path):
    env = {**os.environ, "MMBENCH_HOME": str(tmp_path / "home")}
    base = ["--task", "visual_grounding", "--model", "batch-sensitive", "--model-option", "delay=0.05", "--data", str(vg_tiny), "--quiet",
            "--batch-tokens", "600"]  # small batches: the cache stores one pack file per batch, so many packs
    ref_cache = tmp_path / "ref-cache"
    ref = _run([*base, "--cache-dir", str(ref_cache), "--output", str(tmp_path / "ref")], env)
    out, _ = ref.communicate(timeout=120)
    assert ref.returncode == 0, out
    n_entries = len(list(ref_cache.rglob("*.npz")))
    reference = (tmp_path / "ref" / "per_query.parquet").read_bytes()
    reference_seen = (tmp_path / "ref" / "seen.parquet").read_bytes()
    rng = random.Random(15)
    mid_encoding = 0
    for k in range(10):
        cache, results = tmp_path / f"cache{k}", tmp_path / f"run{k}"
        proc = _run([*base, "--cache-dir", str(cache), "--output", str(results)], env)
        # a random moment: once a random number of batches is stored, plus a random part of a batch's time
        after_all = k >= 8  # the last two kills: once every vector is stored, while results are written
        _wait_for_entries(proc, cache, n_entries if after_all else rng.randint(1, n_entries))
        time.sleep(rng.uniform(0.0, 0.4 if after_all else 0.08))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        stored = len(list(cache.rglob("*.npz")))
        mid_encoding += 0 < stored < n_entries
        resumed = _run([*base, "--cache-dir", str(cache), "--output", str(results)], env)
        text, _ = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, text
        assert (results / "per_query.parquet").read_bytes() == reference, f"kill {k} (after {stored} entries)"
        assert (results / "seen.parquet").read_bytes() == reference_seen, f"kill {k} (after {stored} entries)"
        assert _scores(results) == _scores(tmp_path / "ref")
    print(f"{mid_encoding} of 10 kills landed while vectors were being stored ({n_entries} packs in all)")
    assert mid_encoding >= 6  # the kills did land in the middle of encoding, not only before or after it
