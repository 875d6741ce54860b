"""Remembered scipy values (issue 38): the same bits as scipy, a damaged file never trusted, and a warm run's
modules (the task registry, the runner, the summary's floors and effective context) import no scipy."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mmbench.common import value_memo
from mmbench.evaluators.stats.effective_length import normal_quantile
from mmbench.evaluators.stats.floors import DESIGN_DISCORDANCE, binary_floor, design_floor


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path))
    value_memo.forget()
    yield tmp_path
    value_memo.forget()


def _file(home):
    (path,) = (home / "scipy-values").glob("*.json")
    return path


def test_a_remembered_floor_is_scipys_value_and_is_read_back_without_computing(home):
    from scipy import stats

    first = design_floor(37, ceiling=0.2).mde
    assert first == binary_floor(37, DESIGN_DISCORDANCE) * 0.2
    assert normal_quantile(0.975) == stats.norm.ppf(0.975)
    value_memo.forget()  # as a new process would: read the file
    calls = []
    again = value_memo.remembered("binary_floor", (37, DESIGN_DISCORDANCE, 0.05, 0.8), lambda: calls.append(1) or 0.0,
                                  lambda v: True)
    assert calls == [] and again * 0.2 == first


def test_a_damaged_memo_is_ignored_and_rewritten(home):
    right = design_floor(20).mde
    path = _file(home)
    data = json.loads(path.read_text())
    key = next(k for k in data["values"] if k.startswith('["binary_floor"'))
    data["values"][key] = 0.5  # a changed value without a matching digest
    path.write_text(json.dumps(data))
    value_memo.forget()
    assert design_floor(20).mde == right
    path.write_text("{not json")
    value_memo.forget()
    assert design_floor(20).mde == right
    assert json.loads(path.read_text())["values"][key] == right  # rewritten whole


def test_a_warm_runs_modules_and_remembered_floors_import_no_scipy(home):
    design_floor(11)
    normal_quantile(0.95)
    code = ("import sys; import mmbench.tasks, mmbench.running.runner, mmbench.results.summary; "
            "from mmbench.evaluators.stats.floors import design_floor; "
            "from mmbench.evaluators.stats.effective_length import normal_quantile; "
            "print(repr(design_floor(11).mde), repr(normal_quantile(0.95)), 'scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "MMBENCH_HOME": str(home)}).stdout.split()
    assert out == [repr(design_floor(11).mde), repr(normal_quantile(0.95)), "False"]
