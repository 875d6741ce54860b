"""The Python API (`import mmbench`), the README's example, and models and tasks defined outside the package."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mmbench
from mmbench.cli import main
from mmbench.running.poolsets import default_poolset_dir
from mmbench.models import registry
from mmbench.results.store import load_results
from mmbench import tasks as task_registry

README = Path(__file__).resolve().parents[1] / "README.md"


def test_import_mmbench_is_light():
    code = "import sys, mmbench; print(sorted(m for m in ('torch', 'pandas', 'numpy', 'mteb') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_cli_imports_no_heavy_library_until_a_command_runs():
    """Issue 26 #8: `mmbench --help` took 2.4-2.9 s because a command module imported pandas at import time
    (perf/cli_help.py times it)."""
    code = ("import sys, mmbench.cli; print(sorted(m for m in ('torch', 'pandas', 'numpy', 'pyarrow', 'mteb', 'scipy') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_evaluate_is_the_api_function_even_after_the_runner_modules_load():
    import mmbench.running.evaluation  # noqa: F401 - the module behind `mmbench run`
    from mmbench.api import evaluate

    assert mmbench.evaluate is evaluate
    assert not isinstance(mmbench.evaluate, type(sys))  # a function, not a module made callable


def _seed_sample(task: str, built: Path) -> None:
    """Put a small build where `evaluate` looks for the task's offline sample (the real one takes minutes)."""
    target = default_poolset_dir(task, "sample", 0)
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        shutil.copytree(built, target)


def _readme_example() -> str:
    text = README.read_text()
    match = re.search(r"<!-- python-api-example -->\s*```python\n(.*?)```", text, re.S)
    assert match, "README lost its Python API example"
    return match.group(1)


def test_readme_python_example_runs(vg_tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))  # the stand-in sample must not leak to other tests
    _seed_sample("visual_grounding", vg_tiny)
    monkeypatch.chdir(tmp_path)
    code = _readme_example()
    assert len([line for line in code.splitlines() if line.strip()]) <= 14
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    printed = capsys.readouterr().out.splitlines()
    res = load_results(tmp_path / "runs" / "letters" / "visual_grounding")
    p1 = res.per_query["precision_at_1"].mean()
    assert len(res.per_query) == 20 and float(printed[0]) == pytest.approx(p1)
    assert res.summary["scores"]["test"][0]["main_score"] == pytest.approx(p1)


def test_evaluate_in_memory_matches_the_cli(vg_tiny, tmp_path):
    ev = mmbench.evaluate("bm25", "visual_grounding", data=vg_tiny, limit=20)
    assert list(ev) == ["visual_grounding"] and ev.model == "bm25"
    assert main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(vg_tiny), "--limit", "20",
                 "--no-cache", "--quiet", "--output", str(tmp_path / "cli")]) == 0
    cli = load_results(tmp_path / "cli")
    r = ev["visual_grounding"]
    assert [list(x) for x in r.per_query["ranked_ids"]] == [list(x) for x in cli.per_query["ranked_ids"]]
    assert r.main_score == cli.summary["scores"]["test"][0]["main_score"]
    assert r.aggregates.loc["all", "n_items"] == 20 and "length_bin=256" in r.aggregates.index
    assert list(ev.per_query.columns[:2]) == ["task", "item_id"]
    assert r.to_mteb().get_score() == pytest.approx(r.main_score)
    with pytest.raises(ValueError, match="holds task 'visual_grounding'"):
        mmbench.evaluate("bm25", "logical_summarization", data=vg_tiny)


def test_task_lists_and_benchmarks():
    names = [t.name for t in task_registry.resolve_tasks("mmlongembed")]
    assert names == ["visual_grounding", "temporal_summarization", "multi_source_reasoning", "logical_summarization"]
    assert [t.name for t in task_registry.resolve_tasks(["visual_grounding,flickr_hard_negatives", "visual_grounding"])] \
        == ["visual_grounding", "flickr_hard_negatives"]
    with pytest.raises(task_registry.UnknownTaskError, match="unknown task 'nope'"):
        task_registry.resolve_tasks("visual_grounding,nope")


def test_cli_task_benchmark_with_one_data_folder_is_refused(vg_tiny, capsys):
    code = main(["run", "--task", "mmlongembed", "--model", "bm25", "--data", str(vg_tiny), "--quiet"])
    assert code == 2 and "--task names 4 tasks" in capsys.readouterr().err


PLUGIN = '''
import numpy as np
import mmbench
from mmbench.data.documents import Document, Text
from mmbench.data.poolset import PoolItem, PoolSet, write_poolset

TOPICS = ["apple orchard harvest", "ocean wave surfing", "mountain snow climbing", "desert camel caravan"]


class Letters(mmbench.EmbeddingModel):
    def __init__(self, smoothing=1e-3):
        self.smoothing = smoothing
        self.card = mmbench.ModelCard(name="{model}", family="toy", modalities=frozenset({{"text"}}), max_tokens=None,
                                      settings={{"smoothing": smoothing}})

    def encode(self, documents, role, media):
        return np.array([[d.text.count(c) + self.smoothing for c in "abcdefghijklmnopqrstuvwxyz"]
                         for d in documents], dtype=np.float32)


def make(**options):
    return Letters(**options)


def build(source, out, seed=0, progress=True, **params):
    queries = [Document(f"q{{i}}", [Text(t)]) for i, t in enumerate(TOPICS)]
    cands = [Document(f"c{{i}}", [Text(t + " story")]) for i, t in enumerate(TOPICS)]
    pools = [PoolItem(f"p{{i}}", f"q{{i}}", "all", [c.id for c in cands], [f"c{{i}}"], meta={{"length_bin": "short"}})
             for i in range(len(TOPICS))]
    ps = PoolSet(task="{task}", task_version="1", queries=queries, candidates=cands, pools=pools, seed=seed)
    write_poolset(ps, out)
    return ps


if {register}:
    mmbench.register_model("{model}", make, ("text",), None, "letter counts (test plugin)")
    mmbench.register_task(mmbench.TaskSpec(name="{task}", version="1", description="four topics (test plugin)",
                                           reference="tests", builder="{module}:build", sources=("sample",),
                                           length_bins=("short",)))
'''


def _plugin(tmp_path: Path, module: str, task: str, model: str, register: bool = True) -> Path:
    path = tmp_path / f"{module}.py"
    path.write_text(textwrap.dedent(PLUGIN.format(module=module, task=task, model=model, register=register)))
    return path


@pytest.fixture
def clean_registries(monkeypatch):
    """Plugins registered by a test are gone afterwards."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(task_registry, "_TASKS", dict(task_registry._TASKS))
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("user_"):
            del sys.modules[name]


def test_include_file_adds_a_task_and_a_model(tmp_path, capsys, clean_registries):
    plugin = _plugin(tmp_path, "user_plugin", "toy_topics", "letters-plugin")
    assert main(["list", "tasks", "--include", str(plugin)]) == 0
    assert "toy_topics  v1" in capsys.readouterr().out
    out = tmp_path / "res"
    assert main(["run", "--include", str(plugin), "--task", "toy_topics", "--model", "letters-plugin",
                 "--model-option", "smoothing=0.01", "--output", str(out), "--quiet", "--no-cache"]) == 0
    res = load_results(out)
    assert res.task == "toy_topics" and res.model_name == "letters-plugin" and len(res.per_query) == 4
    assert res.info["model"]["settings"] == {"smoothing": 0.01}
    assert res.summary["scores"]["test"][0]["main_score"] == pytest.approx(res.per_query["precision_at_1"].mean())


def test_include_errors_name_the_file_and_line(tmp_path, capsys, clean_registries):
    bad = tmp_path / "user_bad.py"
    bad.write_text("import mmbench\n\nraise ValueError('no such dataset')\n")
    assert main(["list", "tasks", "--include", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"--include {bad}: ValueError: no such dataset (line 3)" in err
    assert main(["list", "tasks", "--include", str(tmp_path / "missing.py")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_model_factory_from_the_working_folder(tmp_path, monkeypatch, clean_registries, vg_tiny):
    _plugin(tmp_path, "user_models", "unused_task", "letters-factory", register=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert main(["run", "--task", "visual_grounding", "--data", str(vg_tiny), "--model", "user_models:make",
                 "--limit", "10", "--output", str(tmp_path / "res"), "--quiet", "--no-cache"]) == 0
    assert load_results(tmp_path / "res").model_name == "letters-factory"
    with pytest.raises(registry.UnknownModelError, match="no callable 'nothing'"):
        registry.load_model("user_models:nothing")
    with pytest.raises(registry.UnknownModelError, match="no module 'user_absent'"):
        registry.load_model("user_absent:make")


def _one_error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    return err[0]


def _run_user_factory(tmp_path, monkeypatch, vg_tiny, capsys, module: str, source: str) -> str:
    """`mmbench run --model <module>:make` with `source` as the module: it must exit 2 with one error line."""
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["run", "--task", "visual_grounding", "--data", str(vg_tiny), "--model", f"{module}:make",
                 "--output", str(tmp_path / "res"), "--quiet", "--no-cache"]) == 2
    return _one_error_line(capsys)


def test_a_factory_module_with_a_syntax_error_is_one_line(tmp_path, monkeypatch, clean_registries, vg_tiny, capsys):
    """Issue 26 #7: a traceback before."""
    line = _run_user_factory(tmp_path, monkeypatch, vg_tiny, capsys, "user_broken", "def make(:\n    pass\n")
    assert "user_broken:make" in line and "user_broken.py, line 1: SyntaxError" in line


def test_a_factory_that_raises_is_named(tmp_path, monkeypatch, clean_registries, vg_tiny, capsys):
    """Issue 26 #7: the error did not name the factory before."""
    line = _run_user_factory(tmp_path, monkeypatch, vg_tiny, capsys, "user_raising",
                             "def make(**options):\n    raise RuntimeError('no GPU here')\n")
    assert "model factory 'user_raising:make' raised RuntimeError: no GPU here" in line and "line 2" in line


def test_an_include_calling_sys_exit_does_not_end_mmbench_silently(tmp_path, capsys, clean_registries, vg_tiny):
    """Issue 26 #7: `sys.exit(0)` in an --include file made mmbench exit 0 with no results."""
    plugin = tmp_path / "user_exits.py"
    plugin.write_text("import sys\n\nsys.exit(0)\n")
    out = tmp_path / "res"
    assert main(["run", "--include", str(plugin), "--task", "visual_grounding", "--data", str(vg_tiny),
                 "--model", "bm25", "--output", str(out), "--quiet", "--no-cache"]) == 2
    assert f"--include {plugin.resolve()}: called sys.exit(0) while being imported (line 3)" in _one_error_line(capsys)


def test_entry_points_register_models_and_tasks(tmp_path, monkeypatch, clean_registries):
    """A package installed with `mmbench.models` / `mmbench.tasks` entry points (a dist-info folder on sys.path)."""
    _plugin(tmp_path, "user_pkg", "ep_topics", "letters-ep", register=False)
    (tmp_path / "user_pkg_tasks.py").write_text(
        "from mmbench.tasks.spec import TaskSpec\n"
        "TASK = TaskSpec(name='ep_topics', version='1', description='entry-point task', reference='tests',\n"
        "                builder='user_pkg:build', sources=('sample',), length_bins=('short',))\n")
    dist = tmp_path / "user_pkg-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: user-pkg\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mmbench.models]\nletters-ep = user_pkg:make\n\n"
                                           "[mmbench.tasks]\nep_topics = user_pkg_tasks:TASK\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    monkeypatch.setattr(task_registry, "_entry_points_loaded", False)
    assert "letters-ep" in [m.name for m in registry.model_specs()]
    spec = mmbench.get_task("ep_topics")
    assert spec.description == "entry-point task"
    ev = mmbench.evaluate("letters-ep", "ep_topics", data=None)
    assert ev["ep_topics"].aggregates.loc["all", "n_items"] == 4
    assert json.loads(json.dumps(ev.main_scores)) == {"ep_topics": pytest.approx(ev["ep_topics"].main_score)}


def test_cli_runs_several_tasks_into_subfolders(tmp_path, vg_tiny, clean_registries, capsys, monkeypatch):
    plugin = _plugin(tmp_path, "user_multi", "toy_multi", "letters-multi")
    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))  # the stand-in sample must not leak to other tests
    _seed_sample("visual_grounding", vg_tiny)
    out = tmp_path / "res"
    assert main(["run", "--include", str(plugin), "--task", "toy_multi,visual_grounding", "--model", "bm25",
                 "--limit", "10", "--output", str(out), "--quiet", "--no-cache"]) == 0
    assert load_results(out / "toy_multi").task == "toy_multi"
    assert load_results(out / "visual_grounding").task == "visual_grounding"
    shown = capsys.readouterr().out
    assert "== toy_multi" in shown and "== visual_grounding" in shown
