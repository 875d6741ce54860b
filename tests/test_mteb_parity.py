"""One set of numbers: the same model on the same pool set through `mmbench run` and through
`mteb.evaluate` on the exported task; mmbench results read by mteb's TaskResult and ResultCache."""
from __future__ import annotations

import json

import pytest

mteb = pytest.importorskip("mteb")

from mmbench.cli import main  # noqa: E402
from mmbench.evaluators.metrics import metric_names  # noqa: E402
from mmbench.interop import mteb_task as mteb_export  # noqa: E402
from mmbench.models.mteb_bridge import MtebEncoderModel  # noqa: E402
from mmbench.interop.mteb_task import export_mteb_task, mmbench_encoder  # noqa: E402
from mmbench.interop.mteb_cache import write_mteb_cache  # noqa: E402
from mmbench.data.poolset import load_poolset  # noqa: E402
from mmbench.running.runner import RunOptions, run_poolset  # noqa: E402
from mteb_helpers import BagOfWords  # noqa: E402


def _mmbench_metrics(ps, model, limit=None, seed=0) -> dict[str, float]:
    per_query, _, _ = run_poolset(ps, model, RunOptions(use_cache=False, progress=False, limit=limit, seed=seed))
    assert per_query["error"].isna().all()
    return per_query[metric_names()].mean().to_dict()


def _mteb_metrics(model, task) -> dict[str, float]:
    (entry,) = mteb.evaluate(model, task, cache=None, show_progress_bar=False).task_results[0].scores["test"]
    assert entry["hf_subset"] == "default"
    return entry


def _assert_same(ours: dict[str, float], theirs: dict[str, float]) -> None:
    for name in metric_names():
        assert theirs[name] == pytest.approx(ours[name], abs=1e-6), name


def test_export_has_the_mmbench_task_identity(vg_tiny):
    ps = load_poolset(vg_tiny)
    md = export_mteb_task(ps).metadata
    assert (md.name, md.main_score, md.eval_splits, md.hf_subsets) == ("visual_grounding", "precision_at_1",
                                                                       ["test"], ["default"])
    assert md.dataset["revision"] == ps.content_hash


@pytest.mark.parametrize("encoder", [dict(dim=4), dict(dim=64), dict(constant=True)], ids=["dim4", "dim64", "all-ties"])
def test_mteb_encoder_gives_the_same_metrics_both_ways(vg_tiny, encoder):
    """A native mteb encoder, run by mmbench through the bridge and by mteb.evaluate on the export."""
    ps = load_poolset(vg_tiny)
    ours = _mmbench_metrics(ps, MtebEncoderModel(BagOfWords(**encoder)), seed=3)
    _assert_same(ours, _mteb_metrics(BagOfWords(**encoder), export_mteb_task(ps, seed=3)))


def test_mteb_encoder_with_images_gives_the_same_metrics_both_ways(tmp_path):
    """Documents with images (text + first image reach the model on both paths; the rest is dropped alike)."""
    from test_mteb_bridge import _toy_poolset

    ps = load_poolset(_toy_poolset(tmp_path, with_image=True))
    mods = ("text", "image")
    ours = _mmbench_metrics(ps, MtebEncoderModel(BagOfWords(modalities=mods, dim=4)))
    task = export_mteb_task(ps)
    assert task.metadata.modalities == ["text", "image"]
    _assert_same(ours, _mteb_metrics(BagOfWords(modalities=mods, dim=4), task))


def test_without_mmbench_tie_breaking_the_numbers_differ(vg_tiny, monkeypatch):
    """The check above can fail: with mteb's own tie order (by document id) every pool of the constant
    encoder ranks the same way, and P@1 moves away from mmbench's."""
    ps = load_poolset(vg_tiny)
    ours = _mmbench_metrics(ps, MtebEncoderModel(BagOfWords(constant=True)))
    monkeypatch.setattr(mteb_export, "PoolOrder", lambda model, pools, seed: model)
    theirs = _mteb_metrics(BagOfWords(constant=True), export_mteb_task(ps))
    assert any(abs(theirs[n] - ours[n]) > 1e-3 for n in metric_names())


def test_mmbench_model_gives_the_same_metrics_under_mteb(vg_tiny, minilm):
    """An mmbench model (offline MiniLM, middle-truncated to its window) evaluated by mteb on the export."""
    ps = load_poolset(vg_tiny)
    ours = _mmbench_metrics(ps, minilm, limit=20)
    _assert_same(ours, _mteb_metrics(mmbench_encoder(minilm, ps, limit=20), export_mteb_task(ps, limit=20)))


def test_bm25_gives_the_same_metrics_under_mteb(vg_tiny):
    """A corpus-fitted sparse model: fitted on the same candidates, densified for mteb's scoring."""
    from mmbench.models.registry import load_model

    ps = load_poolset(vg_tiny)
    ours = _mmbench_metrics(ps, load_model("bm25"))
    _assert_same(ours, _mteb_metrics(mmbench_encoder(load_model("bm25"), ps), export_mteb_task(ps)))


@pytest.fixture(scope="module")
def bm25_results(vg_tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("mteb_results") / "bm25"
    assert main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(vg_tiny), "--output", str(out),
                 "--no-cache", "--quiet"]) == 0
    return out


def test_mteb_result_cache_loads_mmbench_results_with_the_main_score(bm25_results, tmp_path):
    import pandas as pd

    target = write_mteb_cache(bm25_results, tmp_path / "cache")
    assert target.name == "visual_grounding.json" and (target.parent / "model_meta.json").is_file()
    loaded = mteb.ResultCache(tmp_path / "cache").load_results()
    (model_result,) = loaded.model_results
    (task_result,) = model_result.task_results
    main_score = pd.read_parquet(bm25_results / "per_query.parquet")["precision_at_1"].mean()
    assert model_result.model_name == "mmbench/bm25" and task_result.task_name == "visual_grounding"
    assert task_result.get_score() == pytest.approx(main_score, abs=1e-9)


def test_a_limit_run_in_the_mteb_cache_says_it_is_one(vg_tiny, tmp_path):
    """A --limit run carried the full pool set's hash as its revision before (it looked like a full run)."""
    out = tmp_path / "lim"
    assert main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(vg_tiny), "--output", str(out),
                 "--no-cache", "--quiet", "--limit", "5"]) == 0
    items = json.loads((out / "results.json").read_text())["mmbench"]["selection"]["items_hash"]
    target = write_mteb_cache(out, tmp_path / "cache")
    written = json.loads(target.read_text())
    assert written["dataset_revision"].endswith(f"-limit5-{items[:12]}")
    assert target.parent.name.endswith(f"-limit5-{items[:12]}")
    (model_result,) = mteb.ResultCache(tmp_path / "cache").load_results().model_results
    assert model_result.model_revision.endswith("-limit5-" + items[:12])


def test_mteb_round_trip_stays_readable_by_mmbench_show(bm25_results, tmp_path, capsys):
    import shutil

    folder = shutil.copytree(bm25_results, tmp_path / "rt")
    rewritten = mteb.TaskResult.from_disk(folder / "results.json")
    rewritten.to_disk(folder / "results.json")  # mteb keeps only its own fields
    assert "mmbench" not in json.loads((folder / "results.json").read_text())
    capsys.readouterr()
    assert main(["show", str(folder)]) == 0
    shown = capsys.readouterr().out
    assert "task visual_grounding  model bm25" in shown and "micro (over items): P@1" in shown


class _Broken(MtebEncoderModel):
    def encode(self, documents, role, media):
        raise RuntimeError("model crashed")


def test_results_whose_items_all_failed_load_in_mteb(vg_tiny, tmp_path):
    from mmbench.running.evaluation import evaluate_to_folder

    ps = load_poolset(vg_tiny)
    summary = evaluate_to_folder("visual_grounding", ps, _Broken(BagOfWords()), RunOptions(use_cache=False, progress=False),
                                 tmp_path / "failed", "broken")
    assert summary["mmbench"]["n_failed_items"] == len(ps.pools)
    res = mteb.TaskResult.from_disk(tmp_path / "failed" / "results.json")
    assert res.scores["test"][0]["main_score"] is None and res.scores["test"][0]["n_items"] == 0
    write_mteb_cache(tmp_path / "failed", tmp_path / "cache")
    assert len(mteb.ResultCache(tmp_path / "cache").load_results().model_results) == 1


def test_the_suite_as_one_mteb_benchmark(vg_tiny, tmp_path):
    bench = mteb_export.mteb_benchmark({"visual_grounding": vg_tiny})
    assert isinstance(bench, mteb.Benchmark) and [t.metadata.name for t in bench.tasks] == ["visual_grounding"]
    with pytest.raises(ValueError, match="holds task 'visual_grounding'"):
        mteb_export.mteb_benchmark({"logical_summarization": vg_tiny})
    results = mteb.evaluate(BagOfWords(), bench, cache=None, show_progress_bar=False)
    assert [r.task_name for r in results.task_results] == ["visual_grounding"]


def test_docs_mteb_example_runs(vg_tiny, bm25_results, tmp_path, monkeypatch, capsys):
    import re
    import shutil
    import textwrap
    from pathlib import Path

    from mmbench.running.poolsets import default_poolset_dir

    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))  # the stand-in sample must not leak to other tests
    target = default_poolset_dir("visual_grounding", "sample", 0)  # the tiny build stands in for the sample
    if not target.exists():
        shutil.copytree(vg_tiny, target)
    page = (Path(__file__).resolve().parents[1] / "docs" / "interop.md").read_text()  # the docs' mteb example
    code = textwrap.dedent(re.search(r"<!-- mteb-export-example -->\s*```python\n(.*?)```", page, re.S).group(1))
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/interop.md", "exec"), {"__name__": "docs_mteb"})
    printed = float(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == pytest.approx(json.loads((bm25_results / "results.json").read_text())["scores"]["test"][0]["main_score"])


def test_results_written_before_the_layout_change_still_read():
    """Older results kept every group under scores.test; show, sweep and the leaderboard read both layouts."""
    from mmbench.results.mteb_layout import group_entries

    old = {"scores": {"test": [{"hf_subset": "all", "precision_at_1": 0.5}, {"hf_subset": "subset=a", "precision_at_1": 0.2}]},
           "mmbench": {"task": "t"}}
    assert set(group_entries(old)) == {"all", "subset=a"}
    new = {"scores": {"test": [{"hf_subset": "default", "precision_at_1": 0.5}]},
           "mmbench": {"groups": [{"hf_subset": "all", "precision_at_1": 0.5}]}}
    assert set(group_entries(new)) == {"all"}
