"""The layering rule: imports follow the pipeline, never in a circle, and private names stay in their module.

Every `mmbench` module is read with `ast` (nothing is imported), and every import counts, those inside
functions included. Each module belongs to one stage (the longest matching prefix in STAGES); an import
from one stage to another must be in ALLOWED. The checks are plain functions run on synthetic graphs
first, so a test shows each would catch what it is for.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# folder -> import name, as setup.cfg's package_dir says
PACKAGE_DIRS = {"benchmark": "mmbench", "tasks": "mmbench.tasks", "builders": "mmbench.builders",
                "evaluators": "mmbench.evaluators", "leaderboards": "mmbench.leaderboards"}

# The pipeline, in order: sources -> builders -> pool set -> models -> runner -> evaluators -> results -> reports.
STAGES = {
    "mmbench.common": "common",               # folders, locks, HTTP, plugins, user errors
    "mmbench.data": "data",                   # document model, tokens, media, pool-set storage, embedding cache
    "mmbench.evaluators": "metrics",          # pure functions over records: metrics, ordering, statistics, RAVEL
    "mmbench.builders.sources": "sources",    # readers of the source datasets
    "mmbench.builders": "builders",           # construction steps, checks, the task builders
    "mmbench.tasks": "tasks",                 # task metadata and registry
    "mmbench.models": "models",               # embedding model adapters and their registry
    "mmbench.rankers": "rankers",             # LLM listwise rankers
    "mmbench.results": "results",             # results on disk
    "mmbench.running": "running",             # views, batching, executors, the runner, evaluations, sweeps
    "mmbench.interop": "interop",             # mteb layouts and tasks
    "mmbench.reports": "reports",             # tables, figures and reports written from results folders
    "mmbench.leaderboards": "leaderboards",
    "mmbench.api": "api",                     # the Python API
    "mmbench.cli": "cli",
    "mmbench.__main__": "cli",
    "mmbench": "root",                        # the package: __version__ and lazy names only
}
_BELOW_RESULTS = {"common", "data", "metrics", "sources", "builders", "tasks", "models", "rankers"}
ALLOWED = {
    "common": set(),
    "data": {"common"},
    "metrics": {"common", "data"},
    "sources": {"common", "data"},
    "builders": {"common", "data", "metrics", "sources"},
    "tasks": {"common", "data", "sources", "builders"},
    "models": {"common", "data"},
    "rankers": {"common", "data", "metrics", "models"},
    "results": {"common", "data", "metrics", "tasks"},
    "running": _BELOW_RESULTS | {"results"},
    "interop": _BELOW_RESULTS | {"results", "running"},
    "reports": {"common", "data", "metrics", "tasks", "results"},
    "leaderboards": _BELOW_RESULTS | {"results", "running", "reports"},
    "api": _BELOW_RESULTS | {"results", "running", "interop"},
    "cli": _BELOW_RESULTS | {"results", "running", "interop", "reports", "leaderboards", "api"},
    "root": set(),
}
EVERYONE_MAY_IMPORT = {"root"}  # `from mmbench import __version__`; the package imports nothing itself
# The stages from the bottom of the import stack to the top: a stage may import only stages before it. The pure
# functions of `evaluators/` sit low, since builders and the runner use them too; the runner sits above results,
# which it writes (results never import the runner).
ORDER = ("root", "common", "data", "metrics", "sources", "builders", "tasks", "models", "rankers", "results",
         "running", "interop", "reports", "leaderboards", "api", "cli")


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every mmbench module name and its file."""
    out = {}
    for folder, package in PACKAGE_DIRS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> list[tuple[str, str, int]]:
    """(module imported, name imported or "", line) for every mmbench import in the file, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "mmbench":
                    found.append((_nearest(alias.name, known), "", node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "mmbench":
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                if sub in known:                    # `from package import module`
                    found.append((sub, "", node.lineno))
                else:
                    found.append((_nearest(module, known), alias.name, node.lineno))
    return found


def _nearest(module: str, known: set[str]) -> str:
    while module not in known and "." in module:
        module = module.rpartition(".")[0]
    return module


def import_graph(root: Path = ROOT) -> tuple[dict[str, set[str]], list[tuple[str, str, str, int]]]:
    """The module graph, and every (importer, module, name, line) import of a name."""
    files = module_files(root)
    known = set(files)
    graph: dict[str, set[str]] = {m: set() for m in files}
    names = []
    for module, path in files.items():
        for target, name, line in imports_of(module, path, known):
            if target != module:
                graph[module].add(target)
            if name:
                names.append((module, target, name, line))
    return graph, names


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def stage_of(module: str) -> str:
    prefix = max((p for p in STAGES if module == p or module.startswith(p + ".")), key=len)
    return STAGES[prefix]


def edges_against_the_pipeline(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, targets in sorted(graph.items()):
        source = stage_of(module)
        for target in sorted(targets):
            dest = stage_of(target)
            if dest != source and dest not in EVERYONE_MAY_IMPORT and dest not in ALLOWED[source]:
                bad.append(f"{module} ({source}) imports {target} ({dest})")
    return bad


def edges_up_the_pipeline(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a stage to a stage later in ORDER, whatever ALLOWED says."""
    rank = {stage: i for i, stage in enumerate(ORDER)}
    bad = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if rank[stage_of(target)] > rank[stage_of(module)]:
                bad.append(f"{module} ({stage_of(module)}) imports {target} ({stage_of(target)})")
    return bad


def allowances_up_the_pipeline(allowed: dict[str, set[str]]) -> list[str]:
    """Stages an allow-list names that come later in ORDER than the stage itself."""
    rank = {stage: i for i, stage in enumerate(ORDER)}
    return [f"{stage} may import {dest}" for stage in ORDER for dest in sorted(allowed[stage])
            if rank[dest] > rank[stage]]


def stages_nested_above_their_folder(stages: dict[str, str]) -> list[str]:
    """A stage whose package sits inside the package of an earlier stage (a folder holding two levels)."""
    rank = {stage: i for i, stage in enumerate(ORDER)}
    return [f"{inner} ({stages[inner]}) sits inside {outer} ({stages[outer]})"
            for inner in sorted(stages) for outer in sorted(stages)
            if outer != "mmbench" and inner.startswith(outer + ".") and rank[stages[inner]] > rank[stages[outer]]]


def private_imports(names: list[tuple[str, str, str, int]]) -> list[str]:
    """`from other_module import _private`: a private name used outside its module (and its package)."""
    bad = []
    for module, target, name, line in names:
        if name.startswith("_") and not name.startswith("__") and target != module:
            bad.append(f"{module}:{line} imports {name} from {target}")
    return bad


# ---- the checks catch what they are for ---------------------------------------------------------

def test_a_circle_is_found_even_when_it_closes_through_a_long_chain():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"d"}, "d": {"b"}, "e": {"a"}}
    assert circles(graph) == [["b", "c", "d"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_a_function_level_import_counts(tmp_path):
    pkg = tmp_path / "benchmark"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "one.py").write_text("def f():\n    from mmbench.two import g\n    return g\n")
    (pkg / "two.py").write_text("from mmbench import one\n")
    graph, _ = import_graph(tmp_path)
    assert circles(graph) == [["mmbench.one", "mmbench.two"]]


def test_an_upstream_import_is_reported():
    graph = {"mmbench.builders.parts.x": {"mmbench.models.registry"}, "mmbench.models.registry": set(),
             "mmbench.running.runner": {"mmbench.models.base", "mmbench"}, "mmbench.models.base": set(),
             "mmbench": set()}
    assert edges_against_the_pipeline(graph) == [
        "mmbench.builders.parts.x (builders) imports mmbench.models.registry (models)"]


def test_an_import_up_the_pipeline_is_reported_even_when_allowed():
    graph = {"mmbench.evaluators.metrics": {"mmbench.results.store"}, "mmbench.results.store": {"mmbench.data"},
             "mmbench.data": set()}
    assert edges_up_the_pipeline(graph) == [
        "mmbench.evaluators.metrics (metrics) imports mmbench.results.store (results)"]
    assert allowances_up_the_pipeline({**ALLOWED, "metrics": {"common", "results"}}) == ["metrics may import results"]


def test_a_stage_inside_an_earlier_stage_folder_is_reported():
    stages = {**STAGES, "mmbench.evaluators.reports": "reports"}
    assert stages_nested_above_their_folder(stages) == [
        "mmbench.evaluators.reports (reports) sits inside mmbench.evaluators (metrics)"]


def test_a_private_name_from_another_module_is_reported():
    names = [("mmbench.api", "mmbench.results.store", "_finite", 3), ("mmbench.api", "mmbench.api", "_own", 4),
             ("mmbench.api", "mmbench.results.store", "load_results", 5)]
    assert private_imports(names) == ["mmbench.api:3 imports _finite from mmbench.results.store"]


# ---- and the code keeps the rule -----------------------------------------------------------------

@pytest.fixture(scope="module")
def graph_and_names():
    return import_graph()


def test_every_module_has_a_stage(graph_and_names):
    graph, _ = graph_and_names
    assert len(graph) > 150
    assert {stage_of(m) for m in graph} == set(ALLOWED)


def test_no_import_circle(graph_and_names):
    assert circles(graph_and_names[0]) == []


def test_every_import_follows_the_pipeline(graph_and_names):
    assert edges_against_the_pipeline(graph_and_names[0]) == []


def test_the_allow_lists_point_only_down_the_pipeline():
    assert set(ORDER) == set(ALLOWED)
    assert allowances_up_the_pipeline(ALLOWED) == []


def test_no_import_points_up_the_pipeline(graph_and_names):
    assert edges_up_the_pipeline(graph_and_names[0]) == []
    assert stages_nested_above_their_folder(STAGES) == []  # each folder holds one level of the pipeline


def test_no_private_name_is_imported_across_modules(graph_and_names):
    assert private_imports(graph_and_names[1]) == []


def test_benchmark_keeps_only_its_public_surface_at_the_top():
    top = sorted(p.name for p in (ROOT / "benchmark").glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "api.py"]
    named_after_mteb_export = [m for m in module_files() if "mteb_export" in m.rpartition(".")[2]]
    assert named_after_mteb_export == []   # one integration package: mmbench.interop


def test_each_package_docstring_says_what_it_may_import():
    for package in ("benchmark/common", "benchmark/data", "benchmark/models", "benchmark/rankers",
                    "benchmark/running", "benchmark/results", "benchmark/interop", "benchmark/reports", "benchmark/cli",
                    "builders/sources", "builders/parts", "evaluators"):
        doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text()))
        assert doc and "Imports:" in doc, package
