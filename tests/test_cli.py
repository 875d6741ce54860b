"""The command line as a user meets it: listing, building, running, showing, and its errors."""
import hashlib
import json

import pytest

from mmbench.cli import main


def test_list_tasks_and_models(capsys):
    assert main(["list", "tasks"]) == 0
    out = capsys.readouterr().out
    assert "visual_grounding" in out
    # each task's default sample size, read from the shipped official registry without building it
    from mmbench.leaderboards.official import OfficialRegistry
    from mmbench.tasks import get_task

    vg = OfficialRegistry.load().get("visual_grounding", get_task("visual_grounding").version)
    assert f"default sample (seed 0): {vg.n_items:,} items in {len(vg.subsets)} subsets" in out
    # its candidates and a rough CPU time per model, from figures measured by perf/sample_runtimes.py (no build)
    from mmbench.cli.commands_core import sample_runtimes

    shipped = sample_runtimes()
    for task, figures in shipped["tasks"].items():
        assert f"    {figures['candidates']:,} candidates; rough CPU time, sample built: bm25 " in out, task
    assert f"CPU times: measured by perf/sample_runtimes.py on {shipped['machine']}, {shipped['measured']}" in out
    assert main(["list", "models"]) == 0
    out = capsys.readouterr().out
    for name in ("minilm", "bm25", "clip-vit-b-32", "gme-2b"):
        assert name in out
    assert "text" in out and "254" in out


def test_rough_cpu_time_reads_at_a_glance_and_names_a_stale_measurement():
    from mmbench.cli.commands_core import rough_duration, runtime_line

    assert [rough_duration(s) for s in (0.2, 1.4, 89.4, 95, 540)] == ["<1 s", "~1 s", "~89 s", "~2 min", "~9 min"]
    figures = {"version": "1.3", "candidates": 7200, "build_seconds": 130,
               "models": {"bm25": {"estimate_seconds": 61}, "minilm": {"estimate_seconds": 560}}}
    assert runtime_line(figures, "1.4") == ("7,200 candidates; rough CPU time, sample built: bm25 ~61 s, minilm ~9 min "
                                            "(its build ~2 min) (measured on v1.3)")
    assert runtime_line(figures, "1.3").endswith("(its build ~2 min)")


@pytest.mark.parametrize("argv,needle", [
    (["run", "--task", "nope", "--model", "minilm"], "unknown task"),
    (["run", "--task", "visual_grounding", "--model", "no-such-model", "--data", "{vg}"], "unknown model"),
    (["run", "--task", "visual_grounding", "--model", "minilm", "--data", "/nonexistent/ps"], "does not exist"),
    (["build", "--task", "visual_grounding", "--source", "nowhere"], "has no source"),
    (["build", "--task", "visual_grounding", "--param", "noequals"], "KEY=VALUE"),
    (["show", "/nonexistent/results"], "does not exist"),
    (["run", "--task", "visual_grounding", "--model", "gme-2b", "--data", "{vg}"], "could not load model 'gme-2b'"),
])
def test_user_errors_exit_2_with_a_clear_message(argv, needle, capsys, vg_tiny):
    argv = [a.replace("{vg}", str(vg_tiny)) for a in argv]
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_bad_argument_is_argparse_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--task"])
    assert exc.value.code == 2


def test_build_help_points_to_each_tasks_sources(capsys):
    with pytest.raises(SystemExit):
        main(["build", "--help"])
    assert "mmbench list tasks" in capsys.readouterr().out  # sources differ per task (activitynet, hf, ...)


def test_build_real_source_without_paths_is_explained(tmp_path, capsys):
    code = main(["build", "--task", "visual_grounding", "--source", "real", "--out", str(tmp_path / "x")])
    assert code == 2  # a parameter the user can fix
    assert "needs parameters" in capsys.readouterr().err


@pytest.mark.parametrize("param,needle", [
    ("needles_per_kind=-5", "needles_per_kind"),
    ("depths=[2]", "depth 2.0"),
    ("backgrounds=['video']", "background"),
    ("needles_per_kind=30", "only 25 text needles"),
])
def test_bad_builder_values_exit_2_naming_the_parameter(param, needle, tmp_path, capsys):
    assert main(["build", "--task", "visual_grounding", "--out", str(tmp_path / "x"), "--param", param]) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_an_unknown_build_parameter_lists_the_valid_ones(tmp_path, capsys):
    """Issue 26 #8: "build() got an unexpected keyword argument" before, naming no valid key."""
    assert main(["build", "--task", "visual_grounding", "--out", str(tmp_path / "x"), "--param", "bogus=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no build parameter 'bogus'" in err[0]
    assert "needles_per_kind" in err[0] and "lengths" in err[0] and "load_" not in err[0]
    assert not (tmp_path / "x").exists()


def test_param_lists_of_bare_words_are_lists(tmp_path, capsys):
    from mmbench.cli.commands_core import parse_params

    assert parse_params(["datasets=[hotpotqa]", "backgrounds=[text, mixed]", "lengths=[256,512]", "x=[a, 2, 'b c']",
                         "path=/data/x.json", "empty=[]"]) == {
        "datasets": ["hotpotqa"], "backgrounds": ["text", "mixed"], "lengths": [256, 512], "x": ["a", 2, "b c"],
        "path": "/data/x.json", "empty": []}
    # unquoted words in brackets reach the builder as a list, not as the string's characters
    assert main(["build", "--task", "visual_grounding", "--out", str(tmp_path / "x"), "--param", "backgrounds=[video]"]) == 2
    err = capsys.readouterr().err
    assert "['video']" in err and "'['" not in err


@pytest.mark.parametrize("argv,option", [
    (["run", "--task", "visual_grounding", "--model", "bm25", "--limit", "0"], "--limit"),
    (["run", "--task", "visual_grounding", "--model", "bm25", "--limit", "-3"], "--limit"),
    (["run", "--task", "visual_grounding", "--model", "bm25", "--batch-tokens", "0"], "--batch-tokens"),
    (["run", "--task", "visual_grounding", "--model", "bm25", "--seed", "-1"], "--seed"),
    (["build", "--task", "visual_grounding", "--seed", "-1"], "--seed"),
])
def test_out_of_range_numbers_are_rejected_before_any_work(argv, option, capsys):
    """Rejected by the parser (exit 2, naming the option) before a model loads or a build starts."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert option in err and "integer" in err


def test_run_and_show(vg_tiny, tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(vg_tiny), "--output", str(out),
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "precision_at_1 by length_bin" in printed and "256" in printed
    summary = json.loads((out / "results.json").read_text())
    assert summary["mmbench"]["content_hash"] == json.loads((vg_tiny / "manifest.json").read_text())["content_hash"]
    assert summary["mmbench"]["model"]["name"] == "bm25"
    assert main(["show", str(out)]) == 0
    assert "precision_at_1 by depth" in capsys.readouterr().out


def test_results_load_as_mteb_task_result(vg_tiny, tmp_path):
    from mteb import TaskResult

    out = tmp_path / "res"
    assert main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(vg_tiny), "--output", str(out),
                 "--quiet"]) == 0
    res = TaskResult.from_disk(out / "results.json")
    assert res.task_name == "visual_grounding"
    import pandas as pd

    pq = pd.read_parquet(out / "per_query.parquet")
    # one mteb entry over all items, so mteb's own average is mmbench's main score; the facets stay mmbench's
    assert [s["hf_subset"] for s in res.scores["test"]] == ["default"]
    assert res.get_score() == pytest.approx(pq["precision_at_1"].mean())
    groups = {g["hf_subset"]: g for g in json.loads((out / "results.json").read_text())["mmbench"]["groups"]}
    assert groups["length_bin=256"]["n_items"] == len(pq)


def test_run_builds_the_default_sample_when_no_data_is_given(monkeypatch, tmp_path, capsys):
    """Without --data the sample pool set is built under MMBENCH_HOME (reduced here for speed)."""
    from mmbench.running.poolsets import default_poolset_dir
    from mmbench.tasks.spec import TaskSpec

    original = TaskSpec.build

    def reduced(self, source, out, seed=0, **params):
        return original(self, source, out, seed=seed, lengths=(256,), backgrounds=("image",), kinds=("text",),
                        needles_per_kind=5, progress=False)

    monkeypatch.setattr(TaskSpec, "build", reduced)
    out = tmp_path / "res"
    assert main(["run", "--task", "visual_grounding", "--model", "bm25", "--output", str(out), "--quiet"]) == 0
    assert (default_poolset_dir("visual_grounding", "sample", 0) / "manifest.json").is_file()
    assert "building the offline sample" in capsys.readouterr().out
    assert (out / "per_query.parquet").is_file()


def test_unusable_output_is_refused_before_the_run(vg_tiny, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    for out in (blocker, blocker / "sub"):
        assert main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(vg_tiny),
                     "--output", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert f"--output {out}" in err and "encode" not in err


def test_show_names_a_corrupt_results_table(vg_tiny, tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(vg_tiny), "--output", str(out),
                 "--quiet", "--limit", "5"]) == 0
    capsys.readouterr()
    summary = json.loads((out / "results.json").read_text())
    for name in ("seen.parquet", "per_query.parquet"):
        (out / name).write_bytes((out / name).read_bytes()[:200])
        assert main(["show", str(out)]) == 2  # results.json records each table's digest
        assert f"{name} does not match the digest in results.json" in capsys.readouterr().err
    del summary["mmbench"]["files"]  # without digests tamper detection would be off: refused, not read
    (out / "results.json").write_text(json.dumps(summary))
    assert main(["show", str(out)]) == 2
    assert "records no table digests (mmbench.files)" in capsys.readouterr().err
    summary["mmbench"]["files"] = {n: hashlib.sha256((out / n).read_bytes()).hexdigest()   # digests of the damage:
                                   for n in ("seen.parquet", "per_query.parquet")}          # the reader names it
    (out / "results.json").write_text(json.dumps(summary))
    assert main(["show", str(out)]) == 2
    assert f"{out / 'per_query.parquet'}: unreadable parquet" in capsys.readouterr().err


def test_a_run_killed_while_rewriting_its_results_is_detected(vg_tiny, tmp_path, capsys):
    """Tables are written before results.json, which names their digests: a mix of two runs is refused."""
    first, second = tmp_path / "first", tmp_path / "second"
    for out, limit in ((first, "5"), (second, "7")):
        assert main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(vg_tiny),
                     "--output", str(out), "--quiet", "--limit", limit, "--no-cache"]) == 0
    assert main(["show", str(first)]) == 0
    (first / "per_query.parquet").write_bytes((second / "per_query.parquet").read_bytes())  # killed before the json
    capsys.readouterr()
    assert main(["show", str(first)]) == 2
    assert "per_query.parquet does not match the digest" in capsys.readouterr().err


def test_run_refuses_a_pool_set_edited_after_its_build(vg_tiny, tmp_path, capsys):
    """Results carry the manifest's content hash, so a run must not score records that no longer match it."""
    import shutil

    import pyarrow.parquet as pq

    edited = tmp_path / "edited"
    shutil.copytree(vg_tiny, edited)
    table = pq.read_table(edited / "queries.parquet")
    rows = table.to_pylist()
    rows[0]["segments"] = rows[0]["segments"].replace('"text": "', '"text": "edited ', 1)
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), edited / "queries.parquet")
    assert main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(edited), "--quiet",
                 "--no-cache", "--output", str(tmp_path / "out")]) == 2
    assert "content hash mismatch" in capsys.readouterr().err
    assert not (tmp_path / "out" / "results.json").exists()


def test_model_options_reach_the_adapter_and_unknown_ones_are_refused(vg_tiny, tmp_path, capsys):
    base = ["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(vg_tiny), "--limit", "5",
            "--no-cache", "--quiet"]
    assert main([*base, "--model-option", "k1=0.9", "--output", str(tmp_path / "k1")]) == 0
    settings = json.loads((tmp_path / "k1" / "results.json").read_text())["mmbench"]["model"]["settings"]
    assert settings["k1"] == 0.9 and settings["b"] == 0.75
    capsys.readouterr()
    assert main([*base, "--model-option", "k2=1"]) == 2
    assert "model 'bm25' has no option 'k2'; its options: b, k1" in capsys.readouterr().err
    assert main([*base, "--device", "cpu", "--model-option", "device=cpu"]) == 2
    assert "repeats an option given by its own flag" in capsys.readouterr().err
    assert main(["list", "models", "--options"]) == 0
    out = capsys.readouterr().out
    assert "options: b, k1" in out and "base_url" in out and "query_instruction" in out


def test_output_into_a_closed_pipe_is_not_an_error():
    """`mmbench list models | head -1`: the reader has gone; nothing to report, exit 0."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "mmbench", "list", "models"], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == 0 and "Broken pipe" not in proc.stderr and "Traceback" not in proc.stderr
