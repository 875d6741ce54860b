"""ci/mypy_check.py, the type check `.ci/run` runs: its counting and limits, on made-up mypy output (fast: no mypy)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("mypy_check", ROOT / "ci" / "mypy_check.py")
mypy_check = sys.modules.setdefault("mypy_check", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(mypy_check)

PATTERNS = ["mmbench.common.*", "mmbench.evaluators", "mmbench.evaluators.stats.*"]


def test_strict_modules_match_as_mypy_matches_them():
    assert mypy_check.is_strict("mmbench.common", PATTERNS)
    assert mypy_check.is_strict("mmbench.common.errors", PATTERNS)
    assert mypy_check.is_strict("mmbench.evaluators", PATTERNS)
    assert mypy_check.is_strict("mmbench.evaluators.stats.paired", PATTERNS)
    assert not mypy_check.is_strict("mmbench.evaluators.ravel.core", PATTERNS)   # a plain name is that module only
    assert not mypy_check.is_strict("mmbench.commonplace", PATTERNS)


def test_the_configured_strict_packages_are_the_five_of_the_rule():
    patterns = mypy_check.strict_patterns()
    for module in ("mmbench.common.errors", "mmbench.data.poolset", "mmbench.running.runner", "mmbench.results.store",
                   "mmbench.evaluators.metrics", "mmbench.evaluators.stats.bootstrap"):
        assert mypy_check.is_strict(module, patterns), module
    assert not mypy_check.is_strict("mmbench.leaderboards.site", patterns)


def test_output_is_mapped_to_modules_and_checkout_paths(tmp_path):
    tree = mypy_check.link_tree(tmp_path / "links")
    assert (tree / "running" / "runner.py").resolve() == ROOT / "benchmark" / "running" / "runner.py"
    assert (tree / "tasks" / "__init__.py").resolve() == ROOT / "tasks" / "__init__.py"
    output = (f"{tree}/running/runner.py:12: error: Item \"None\" has no attribute \"x\"  [union-attr]\n"
              f"{tree}/tasks/__init__.py:3: note: see here\n"
              f"{tree}/leaderboards/site.py:7: error: Incompatible types  [assignment]\n"
              "Found 2 errors in 2 files (checked 200 source files)\n")
    errors = mypy_check.parse(output, tree)
    assert [(e.module, e.where) for e in errors] == [("mmbench.running.runner", "benchmark/running/runner.py:12"),
                                                     ("mmbench.leaderboards.site", "leaderboards/site.py:7")]


def _errors(strict: int, rest: int) -> list:
    make = mypy_check.MypyError
    return ([make("mmbench.common.errors", f"benchmark/common/errors.py:{i}", "x") for i in range(strict)]
            + [make("mmbench.leaderboards.site", f"leaderboards/site.py:{i}", "y") for i in range(rest)])


def test_an_error_in_a_strict_package_fails_whatever_the_baseline():
    ok, lines = mypy_check.verdict(_errors(1, 0), PATTERNS, baseline=100)
    assert not ok and "benchmark/common/errors.py:0: x" in lines


def test_the_count_elsewhere_may_only_go_down():
    assert mypy_check.verdict(_errors(0, 5), PATTERNS, baseline=5)[0]
    ok, lines = mypy_check.verdict(_errors(0, 6), PATTERNS, baseline=5)
    assert not ok and "more than the baseline 5" in lines[-1]
    ok, lines = mypy_check.verdict(_errors(0, 4), PATTERNS, baseline=5)
    assert ok and "--lower" in lines[-1]


def test_the_baseline_file_holds_a_count():
    data = json.loads((ROOT / "ci" / "mypy_baseline.json").read_text())
    assert isinstance(data["errors_outside_strict"], int) and data["errors_outside_strict"] >= 0
