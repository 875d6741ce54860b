"""Shared fixtures: small pool sets built once per session, an isolated MMBENCH_HOME."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# `datasets` caches local folders by name: a cache left by an earlier run must not answer for this one
os.environ.setdefault("HF_DATASETS_CACHE", tempfile.mkdtemp(prefix="mmbench-tests-datasets-"))


def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto` (setup.cfg's addopts): one worker per usable core, at most four (each worker loads torch and builds
    the session's pool sets once; beyond four the memory outgrows what the files gain). Two on the CI machine."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(4, usable))


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Never touch the user's ~/.cache/mmbench from a test."""
    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path_factory.getbasetemp() / "mmbench_home"))


@pytest.fixture(scope="session")
def vg_small(tmp_path_factory) -> Path:
    """Visual Grounding sample: 2 length bins, all depths and backgrounds, 10 needles per kind."""
    from mmbench.tasks import get_task

    out = tmp_path_factory.mktemp("vg") / "vg_small"
    get_task("visual_grounding").build("sample", out, seed=0, lengths=(256, 2048), needles_per_kind=10,
                                       progress=False)
    return out


@pytest.fixture(scope="session")
def vg_tiny(tmp_path_factory) -> Path:
    """Visual Grounding sample reduced to one bin, text backgrounds, text anchors: 60 candidates."""
    from mmbench.tasks import get_task

    out = tmp_path_factory.mktemp("vg") / "vg_tiny"
    get_task("visual_grounding").build("sample", out, seed=0, lengths=(256,), backgrounds=("text",),
                                       kinds=("text",), needles_per_kind=10, progress=False)
    return out


@pytest.fixture(scope="session")
def minilm():
    from mmbench.models.registry import load_model

    return load_model("minilm")


SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def _slow_prefixes() -> tuple[str, ...]:
    """Node ids (or their prefixes: a file, a test without its parameters) of the tests that take longest, one a
    line in tests/slow_tests.txt, written from a `--durations=0` run by `perf/slow_tests.py`."""
    if not SLOW_LIST.is_file():
        return ()
    lines = (ln.split("#", 1)[0].strip() for ln in SLOW_LIST.read_text().splitlines())
    return tuple(ln for ln in lines if ln)


def pytest_collection_modifyitems(config, items):
    """Mark the listed tests `slow`, so `pytest -m "not slow"` is the fast loop (CONTRIBUTING, Tests)."""
    prefixes = _slow_prefixes()
    for item in items:
        if item.nodeid.startswith(prefixes) if prefixes else False:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def official_home(tmp_path_factory) -> Path:
    """An MMBENCH_HOME shared by every xdist worker of this session: the five official samples are built once
    into it (`official_sample`), for the hash check (tests/test_leaderboard_boards.py) and `mmbench reproduce`
    (tests/test_reproduce.py), whichever worker comes first."""
    root = tmp_path_factory.getbasetemp()
    shared = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root
    home = shared / "official-samples-home"
    home.mkdir(exist_ok=True)
    return home

