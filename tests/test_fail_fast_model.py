"""An unavailable hub model fails in seconds, before any pool set is built or read (issue 37, item 2)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmbench.models import hub_weights
from mmbench.models.registry import weights_problem


def _closed_port() -> int:
    with socket.socket() as s:  # a port nobody listens on: bound, then released
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_run_with_no_weights_and_an_empty_home_exits_2_in_seconds_and_builds_nothing(tmp_path: Path):
    home = tmp_path / "home"
    env = {**os.environ, "MMBENCH_HOME": str(home), "HF_HUB_CACHE": str(tmp_path / "hf"),
           "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}", "HF_HUB_OFFLINE": "0"}
    for v in hub_weights.PROXY_VARIABLES:
        env.pop(v, None)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mmbench", "run", "--task", "visual_grounding", "--model", "gme-2b",
                           "--output", str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - start
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "gme-2b" in lines[0] and "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct" in lines[0]
    assert "cannot be reached" in lines[0] and "--model-path" in lines[0]
    assert not (tmp_path / "out").exists()
    built = [p for p in home.rglob("*") if p.is_file()] if home.exists() else []
    assert not any(p.name == "manifest.json" for p in built), "a pool set was built before the model was checked"
    assert took < 60  # generous on a loaded machine; the load it replaces retried for minutes


def test_hub_offline_is_refused_without_a_connection(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub_weights, "in_hub_cache", lambda repo: False)
    monkeypatch.setattr(hub_weights, "host_answers", lambda url: pytest.fail("no connection when offline"))
    problem = weights_problem("clip-vit-b-32", {})
    assert problem is not None and "HF_HUB_OFFLINE" in problem and "openai/clip-vit-base-patch32" in problem


def test_cached_weights_reachable_hub_local_paths_and_packaged_copies_go_ahead(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the suite runs with HF_HUB_OFFLINE=1
    monkeypatch.setattr(hub_weights, "in_hub_cache", lambda repo: repo == "openai/clip-vit-base-patch32")
    monkeypatch.setattr(hub_weights, "host_answers", lambda url: "hub.example:443 cannot be reached (refused)")
    for v in hub_weights.PROXY_VARIABLES:
        monkeypatch.delenv(v, raising=False)
    assert weights_problem("clip-vit-b-32", {}) is None                        # in the cache
    assert weights_problem("siglip-base", {}) is not None                      # neither cached nor reachable
    assert weights_problem("siglip-base", {"model_id": "/some/folder"}) is None  # other weights named
    assert weights_problem("gme-2b", {"model_path": "/weights"}) is None
    assert weights_problem("minilm", {}) is None                               # ships in a package
    assert weights_problem("bm25", {}) is None and weights_problem("openai-embeddings", {}) is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")                    # a direct connection proves nothing
    assert weights_problem("siglip-base", {}) is None
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.setattr(hub_weights, "host_answers", lambda url: None)
    assert weights_problem("siglip-base", {}) is None                          # the hub answers


def test_host_answers_names_a_closed_port():
    port = _closed_port()
    assert "cannot be reached" in hub_weights.host_answers(f"http://127.0.0.1:{port}", timeout=2)
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        assert hub_weights.host_answers(f"http://127.0.0.1:{srv.getsockname()[1]}", timeout=2) is None
