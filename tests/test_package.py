"""A regular (non-editable) install must carry every sub-package and data file."""
import configparser
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mapping():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = [x.strip() for x in cfg["options"]["package_dir"].strip().splitlines() if x.strip()]
    return {k.strip(): v.strip() for k, v in (x.split("=") for x in lines)}


def _expected_packages():
    """Every folder with an __init__.py under a mapped root, as its dotted import name."""
    expected = set()
    for name, folder in _mapping().items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if not any(part == "__pycache__" or part.startswith(".") for part in rel.parts):
                expected.add(".".join([name, *rel.parts]))
    return expected


def test_wheel_contains_every_subpackage_and_data(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("mmbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {str(Path(n).parent).replace("/", ".") for n in names if n.endswith("__init__.py")}
    missing = sorted(_expected_packages() - packages)
    assert not missing, f"sub-packages missing from the wheel (add them to setup.cfg packages): {missing}"
    assert "mmbench/tasks/visual_grounding.py" in names
    assert "mmbench/cli/__init__.py" in names
    assert "mmbench.evaluators.stats" in _expected_packages()
    for folder in ("evaluators", "leaderboards"):
        for f in (ROOT / folder / "data").glob("*"):
            if f.is_file():
                assert f"mmbench/{folder}/data/{f.name}" in names, f"package data {f} missing from the wheel"
    assert "mmbench/builders/parts/task_file.schema.json" in names   # the published task-file schema
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "mmbench = mmbench.cli:program" in zipfile.ZipFile(wheel).read(entry).decode()
