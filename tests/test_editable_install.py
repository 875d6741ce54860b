"""The contributor loop tests the edit: in a development install (editable, CONTRIBUTING's set-up) a change in
the checkout is what `import mmbench` runs. The README's user path (a regular install) has its own test:
tests/test_package.py builds the wheel and checks it carries every package and data file."""
from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import mmbench

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "benchmark"   # setup.cfg maps `mmbench` to benchmark/


def _editable() -> bool:
    return Path(mmbench.__file__).resolve().parent == PACKAGE.resolve()


@pytest.mark.skipif(not _editable(), reason=f"mmbench is installed from {Path(mmbench.__file__).parent}, not this "
                    "checkout: a regular install (the README's user path); CONTRIBUTING's editable install runs this")
def test_an_edit_in_the_checkout_is_what_import_mmbench_runs(tmp_path):
    """A module written into the checkout now is imported by a fresh interpreter outside the checkout, through the
    same mapping that serves the rest of the package, with no reinstall."""
    name = f"_edit_probe_{uuid.uuid4().hex[:8]}"
    probe = PACKAGE / f"{name}.py"
    token = uuid.uuid4().hex
    probe.write_text(f"TOKEN = {token!r}\n")
    try:
        done = subprocess.run([sys.executable, "-c", f"import mmbench, mmbench.{name} as m; print(m.TOKEN); "
                               "print(mmbench.__file__)"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        printed_token, where = done.stdout.split()
        assert printed_token == token
        assert Path(where).resolve().parent == PACKAGE.resolve()
        # an edit to a mapped sub-package (setup.cfg: mmbench.evaluators = evaluators) is seen too
        done = subprocess.run([sys.executable, "-c", "import mmbench.evaluators.metrics as m; print(m.__file__)"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert Path(done.stdout.strip()).resolve() == (ROOT / "evaluators" / "metrics.py").resolve()
    finally:
        probe.unlink()


def test_contributing_says_which_install_is_for_what():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert 'pip install -c ci/constraints.txt -e ".[dev]"' in text, "CONTRIBUTING's set-up is the editable install"
    assert "non-editable" in text and "README" in text
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install -c ci/constraints.txt . " in readme and " -e " not in readme.split("## Python")[0]
