"""The fast loop: perf/slow_tests.py picks the slowest tests from a durations report; conftest marks them."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("slow_tests", ROOT / "perf" / "slow_tests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REPORT = """============================= slowest durations ==============================
40.10s call     tests/test_a.py::test_big[x]
20.00s setup    tests/test_a.py::test_big[x]
30.00s call     tests/test_b.py::test_mid
5.00s call     tests/test_c.py::test_small
0.50s teardown tests/test_c.py::test_small
"""


def test_durations_add_setup_call_and_teardown_and_the_slowest_go_first():
    mod = _script()
    times = mod.durations(REPORT)
    assert times == {"tests/test_a.py::test_big[x]": 60.1, "tests/test_b.py::test_mid": 30.0,
                     "tests/test_c.py::test_small": 5.5}
    assert mod.slowest_until(times, 40) == ["tests/test_a.py::test_big[x]"]
    assert mod.slowest_until(times, 10) == ["tests/test_a.py::test_big[x]", "tests/test_b.py::test_mid"]
    assert mod.slowest_until(times, 1000) == []


def test_ordered_snippet_files_are_skipped_whole():
    """Snippets run in order and read what earlier ones wrote: one slow snippet takes its whole file along."""
    mod = _script()
    times = {"tests/test_docs_snippets.py::test_snippet[a.md:L1]": 50.0,
             "tests/test_docs_snippets.py::test_snippet[b.md:L9]": 1.0, "tests/test_x.py::test_y": 10.0}
    assert mod.slowest_until(times, 20) == ["tests/test_docs_snippets.py"]


def test_listed_tests_carry_the_slow_mark(request):
    from conftest import _slow_prefixes

    listed = _slow_prefixes()
    assert all(p.startswith("tests/") for p in listed)
    marked = request.node.get_closest_marker("slow") is not None
    assert marked == request.node.nodeid.startswith(listed) if listed else not marked
