"""Remembered scipy values are checked, not only sealed (issue 45 #4). Before: an edited memo sealed again with its
own SHA-256 was trusted, so `show` printed floors of 0.000, NaN, -1 and a 309-digit number and a board built from
that home printed 0.000; eight concurrent writers kept 42 of 400 entries; a full disk left zero-byte `.tmp` files."""
from __future__ import annotations

import errno
import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

from mmbench.cli import main
from mmbench.common import value_memo
from mmbench.evaluators.stats.effective_length import normal_quantile
from mmbench.evaluators.stats.floors import binary_floor_bounds, design_floor

FORGED = [-1.0, 0.0, float("nan"), 1e308]


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    value_memo.forget()
    yield tmp_path / "home"
    value_memo.forget()


def _reseal(home, edit):
    """Edit the memo's values and seal it again as mmbench would (the digest then matches)."""
    (path,) = (home / "scipy-values").glob("*.json")
    data = json.loads(path.read_text())
    for key in data["values"]:
        data["values"][key] = edit(key, data["values"][key])
    data["check"] = value_memo._check(data["values"])
    path.write_text(json.dumps(data))
    value_memo.forget()   # as the next process would: read the file
    return data


@pytest.fixture(scope="module")
def run(vg_tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("memo") / "run"
    assert main(["run", "--task", "visual_grounding", "--data", str(vg_tiny), "--no-cache", "--quiet", "--model",
                 "toy_models:HashingModel", "--output", str(out)]) == 0
    return out


@pytest.mark.parametrize("forged", FORGED, ids=["minus-one", "zero", "nan", "1e308"])
def test_a_resealed_floor_never_reaches_show(run, home, capsys, forged):
    assert main(["show", str(run)]) == 0
    honest = capsys.readouterr().out
    assert "floor (MDE)" in honest
    data = _reseal(home, lambda key, v: forged if key.startswith('["binary_floor"') else v)
    assert any(k.startswith('["binary_floor"') for k in data["values"])
    assert main(["show", str(run)]) == 0
    assert capsys.readouterr().out == honest          # the true floors, computed again
    values = json.loads(next((home / "scipy-values").glob("*.json")).read_text())["values"]
    assert all(isinstance(v, float) and 0 < v <= 0.5 for k, v in values.items() if k.startswith('["binary_floor"'))


def test_a_resealed_floor_never_reaches_the_board(run, vg_tiny, home, tmp_path):
    from leaderboard_helpers import official_registry

    official_registry(vg_tiny, tmp_path / "official.json")
    assert main(["leaderboard", "submit", str(run), "--board", str(tmp_path / "board"),
                 "--official", str(tmp_path / "official.json")]) == 0

    def build(name):
        assert main(["leaderboard", "build", "--board", str(tmp_path / "board"), "--out", str(tmp_path / name)]) == 0
        return {p.name: p.read_bytes() for p in sorted((tmp_path / name / "data").glob("*.json"))}

    honest = build("honest")
    for forged in FORGED:
        _reseal(home, lambda key, v: forged if key.startswith('["binary_floor"') else v)
        assert build(f"forged-{forged}") == honest


def test_a_forged_quantile_is_computed_again(home):
    from scipy import stats

    assert normal_quantile(0.975) == stats.norm.ppf(0.975)
    for forged in (-1.0, 0.0, 1.96, 1e308, float("nan")):   # 1.96 is close, but not scipy's value
        _reseal(home, lambda key, v: forged if key.startswith('["norm.ppf"') else v)
        assert normal_quantile(0.975) == stats.norm.ppf(0.975)


def test_the_floor_bounds_accept_every_true_floor_and_refuse_the_forged():
    from mmbench.evaluators.stats.floors import binary_floor

    for n in (2, 3, 5, 10, 37, 200, 5000):
        for alpha, power in ((0.05, 0.8), (0.01, 0.9), (0.1, 0.5)):
            valid = binary_floor_bounds(n, 0.5, alpha, power)
            true = binary_floor(n, 0.5, alpha, power)
            assert true is None or valid(true)
            assert not any(valid(f) for f in FORGED) and not valid(math.inf)
            if true is not None:
                assert not valid(true / 2) and not valid(0.51)   # below the normal approximation; above psi
    assert binary_floor_bounds(1, 0.5, 0.05, 0.8)(None) and not binary_floor_bounds(50, 0.5, 0.05, 0.8)(None)


WRITER = textwrap.dedent("""
    import sys
    from mmbench.common import value_memo
    w = int(sys.argv[1])
    for i in range(50):
        value_memo.remembered("test_entry", (w, i), lambda: float(w * 1000 + i), lambda v: v is not None and v >= 0)
""")


def test_eight_concurrent_writers_keep_every_entry(home):
    env = {**os.environ, "MMBENCH_HOME": str(home)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(w)], env=env) for w in range(8)]
    assert [p.wait(timeout=300) for p in procs] == [0] * 8
    (path,) = (home / "scipy-values").glob("*.json")
    values = json.loads(path.read_text())["values"]
    assert len([k for k in values if k.startswith('["test_entry"')]) == 400
    assert all(values[json.dumps(["test_entry", w, i])] == w * 1000 + i for w in range(8) for i in range(50))
    assert not list((home / "scipy-values").glob("*.tmp"))


def test_a_full_disk_leaves_no_temporary_file(home, monkeypatch):
    right = design_floor(20).mde            # the file exists
    real = os.fdopen

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, text):   # a full disk: the first block fails
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(value_memo.os, "fdopen", lambda fd, *a, **k: Full(real(fd, *a, **k)))
    value_memo.forget()
    assert design_floor(21).mde is not None          # computed, only not remembered
    monkeypatch.undo()
    leftovers = [p.name for p in (home / "scipy-values").iterdir() if p.suffix == ".tmp"]
    assert leftovers == []
    value_memo.forget()
    assert design_floor(20).mde == right              # the file before the failed write is intact
