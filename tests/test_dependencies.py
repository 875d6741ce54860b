"""Declared dependencies are used, and `import mmbench` stays light."""
from __future__ import annotations

import ast
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
}
HEAVY = ("torch", "transformers", "datasets", "mteb", "sentence_transformers", "bm25s", "qwen_vl_utils", "sklearn",
         "scipy", "pandas", "pyarrow", "matplotlib", "statsmodels", "ot", "av", "decord", "ray")


def _requirements(section: str = "install_requires") -> list[str]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = [x.strip() for x in cfg["options"][section].strip().splitlines() if x.strip()]
    return [re.split(r"[<>=!;\s\[]", x)[0] for x in lines]


def _imported_top_level_names() -> set[str]:
    """Top-level modules the package's code imports (parsed, so docstrings do not count), plus those
    it looks up by name (`importlib.util.find_spec("x")`, `importlib.resources.files("x")`)."""
    names: set[str] = set()
    by_name = re.compile(r"(?:files|find_spec)\(\"(\w+)[\".]")
    for folder in SOURCES:
        for f in (ROOT / folder).rglob("*.py"):
            text = f.read_text(encoding="utf-8")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Import):
                    names.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
            names.update(by_name.findall(text))
    return names


def _distributions_of() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, dists in md.packages_distributions().items():
        out[module] = {d.lower().replace("_", "-") for d in dists}
    return out


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


OPTIONAL = {"flash_attn": "used when installed (CUDA attention kernels)", "ray": "the `ray` extra (sweeps)"}


def test_every_third_party_import_is_declared():
    dists = _distributions_of()
    declared = {r.lower().replace("_", "-") for r in _requirements()}
    third_party = sorted(n for n in _imported_top_level_names()
                         if n not in sys.stdlib_module_names and n not in ("mmbench", "__future__") and n not in OPTIONAL)
    undeclared = [n for n in third_party if not dists.get(n, set()) & declared]
    assert not undeclared, f"imported by mmbench but not declared in setup.cfg install_requires: {undeclared}"


def test_constraints_pin_no_dropped_dependency():
    norm = lambda name: name.lower().replace("_", "-")  # noqa: E731
    pinned = {norm(x.split("==")[0]) for x in (ROOT / "ci" / "constraints.txt").read_text().split()}
    assert "xgboost" not in pinned and "nvidia-nccl-cu12" not in pinned   # the latter came only with xgboost
    assert {norm(r) for r in _requirements()} <= pinned   # every declared package has its CI pin


FRAMEWORKS = ("torch", "transformers", "datasets", "mteb", "sentence_transformers", "bm25s", "qwen_vl_utils", "sklearn")


def _loaded(code: str, names) -> list[str]:
    out = subprocess.run([sys.executable, "-c", f"import sys; {code}; print([m for m in {tuple(names)!r} "
                          "if m in sys.modules])"], capture_output=True, text=True, check=True).stdout
    return eval(out)  # noqa: S307 (a list literal printed by the child)


def test_import_mmbench_is_light():
    """`import mmbench` loads none of the heavy libraries; the hub, export, card and model modules load
    no framework until used (torch, datasets, mteb, bm25s and qwen_vl_utils are imported inside functions)."""
    assert _loaded("import mmbench", HEAVY) == []
    modules = ("mmbench.data.dataset_card", "mmbench.interop.mteb_folder", "mmbench.builders.sources.hub", "mmbench.models.bm25",
               "mmbench.models.qwen_vl", "mmbench.cli")
    assert _loaded("import " + ", ".join(modules), FRAMEWORKS) == []
