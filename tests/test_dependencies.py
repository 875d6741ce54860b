"""Declared dependencies are used, and `import mmbench` stays light."""
from __future__ import annotations

import configparser
import importlib.metadata as md
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("benchmark", "builders", "tasks", "evaluators", "leaderboards")
# Declared without an import in mmbench's own code, each for a stated reason.
INDIRECT = {
    "torchvision": "the Qwen-VL image/video processors (transformers) and qwen_vl_utils import it at run time",
    "safetensors": "lower bound for the .safetensors weights transformers loads",
    "requests": "HTTP client of the API embedders and rankers (its replacement is being reviewed, issue 16)",
}
HEAVY = ("torch", "transformers", "datasets", "mteb", "sentence_transformers", "bm25s", "qwen_vl_utils", "sklearn",
         "scipy", "pandas", "pyarrow", "matplotlib", "statsmodels", "ot", "av", "decord", "ray")


def _requirements(section: str = "install_requires") -> list[str]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = [x.strip() for x in cfg["options"][section].strip().splitlines() if x.strip()]
    return [re.split(r"[<>=!;\s\[]", x)[0] for x in lines]


def _imported_top_level_names() -> set[str]:
    names: set[str] = set()
    pattern = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)|(?:files|find_spec)\(\"(\w+)[\".]", re.M)
    for folder in SOURCES:
        for f in (ROOT / folder).rglob("*.py"):
            for a, b in pattern.findall(f.read_text(encoding="utf-8")):
                names.add(a or b)
    return names


def test_every_declared_dependency_is_imported_or_explained():
    by_dist: dict[str, set[str]] = {}
    for module, dists in md.packages_distributions().items():
        for d in dists:
            by_dist.setdefault(d.lower().replace("_", "-"), set()).add(module)
    imported = _imported_top_level_names()
    unused = [r for r in _requirements()
              if r not in INDIRECT and not (by_dist.get(r.lower().replace("_", "-"), set()) & imported)]
    assert not unused, f"declared in setup.cfg but never imported by mmbench: {unused}"
    assert "xgboost" not in _requirements() and "rank-bm25" not in _requirements()  # tests-only: the dev extra


def test_constraints_pin_no_dropped_dependency():
    pinned = {x.split("==")[0].lower() for x in (ROOT / "ci" / "constraints.txt").read_text().split()}
    assert "xgboost" not in pinned
    assert {r.lower() for r in _requirements()} - {"decord"} <= pinned | {"pillow", "pot"}


FRAMEWORKS = ("torch", "transformers", "datasets", "mteb", "sentence_transformers", "bm25s", "qwen_vl_utils", "sklearn")


def _loaded(code: str, names) -> list[str]:
    out = subprocess.run([sys.executable, "-c", f"import sys; {code}; print([m for m in {tuple(names)!r} "
                          "if m in sys.modules])"], capture_output=True, text=True, check=True).stdout
    return eval(out)  # noqa: S307 (a list literal printed by the child)


def test_import_mmbench_is_light():
    """`import mmbench` loads none of the heavy libraries; the hub, export, card and model modules load
    no framework until used (torch, datasets, mteb, bm25s and qwen_vl_utils are imported inside functions)."""
    assert _loaded("import mmbench", HEAVY) == []
    modules = ("mmbench.dataset_card", "mmbench.mteb_export", "mmbench.builders.sources.hub", "mmbench.models.bm25",
               "mmbench.models.qwen_vl", "mmbench.cli")
    assert _loaded("import " + ", ".join(modules), FRAMEWORKS) == []
