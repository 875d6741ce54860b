"""Draws made in parallel (worker processes, Ray tasks) give the bytes of draws made one after another, and a
SIGKILLed `mmbench draws` resumes without rebuilding or rerunning the draws it finished.

The builds are reduced Multi-Source Reasoning samples (one dataset, four queries, one length). The models are BM25
(not cached: its runs go with the draws to the workers) and `toy_models.BatchSensitiveModel` (cached, and its vectors
move in the last bits with the batch they are computed in, as real models' do: its runs stay in the driver, over the
draws in order), registered by an --include file, which the workers load too.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SMALL = ["--task", "multi_source_reasoning", "--param", "lengths=[4096]", "--param", 'datasets=["hotpotqa"]',
         "--param", "queries_per_dataset=4", "--param", "candidates_per_query=4"]
PLUGIN = ("import sys\nsys.path.insert(0, {tests!r})\n"
          "from mmbench.models.registry import ModelSpec, register\n"
          "register(ModelSpec('batch-sensitive', 'toy_models:BatchSensitiveModel', ('text',), None, 'test model'))\n")


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plugin") / "batch_sensitive_plugin.py"
    path.write_text(PLUGIN.format(tests=str(TESTS)))
    return path


def _draws(home: Path, out: Path, plugin: Path, *extra: str, seeds: str = "0..2") -> int:
    from mmbench.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MMBENCH_HOME", str(home))
        return main(["draws", *SMALL, "--seeds", seeds, "--include", str(plugin), "--model", "bm25",
                     "--model", "batch-sensitive", "--out", str(out), *extra])


def _files(out: Path) -> dict[str, bytes]:
    """Every table of every run, and the report, by path under `out`."""
    found = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.parquet"))}
    return {**found, "draws.json": (out / "draws.json").read_bytes()}


@pytest.fixture(scope="module")
def one_after_another(tmp_path_factory, plugin) -> dict[str, bytes]:
    root = tmp_path_factory.mktemp("sequential")
    assert _draws(root / "home", root / "out", plugin, "--jobs", "1") == 0
    return _files(root / "out")


def test_two_worker_processes_give_the_bytes_of_one_after_another(tmp_path, plugin, one_after_another, capsys):
    assert _draws(tmp_path / "home", tmp_path / "out", plugin, "--jobs", "2") == 0
    out = capsys.readouterr().out
    assert out.count("building draw") == 3 and "making 3 draws in 2 worker processes (--jobs 2)" in out
    files = _files(tmp_path / "out")
    assert len(files) == 1 + 3 * 2 * 2  # three draws, two models, two tables each, and the report
    assert files == one_after_another
    peaks = json.loads(next((tmp_path / "home" / "draws").glob("*/worker_peaks.json")).read_text())
    assert set(peaks) == {"build+bm25"} and peaks["build+bm25"] > 50 * 2**20   # what the next --jobs auto counts
    assert _draws(tmp_path / "home", tmp_path / "out", plugin, "--jobs", "2") == 0   # again: all there
    out = capsys.readouterr().out
    assert "building draw" not in out and out.count("already there; reused") == 6


def test_ray_tasks_give_the_bytes_of_one_after_another(tmp_path, plugin, one_after_another):
    ray = pytest.importorskip("ray")
    try:   # a Ray that cannot start here (no shared memory, no ports) is no failure of the draws
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"Ray cannot start here: {exc}")
    try:
        assert _draws(tmp_path / "home", tmp_path / "out", plugin, "--executor", "ray") == 0
    finally:
        ray.shutdown()
    assert _files(tmp_path / "out") == one_after_another


def test_a_build_error_in_a_worker_is_said_as_one_after_another_says_it(tmp_path, plugin, capsys):
    bad = ["--param", "candidates_per_query=1"]
    from mmbench.cli import main

    said = []
    for jobs in ("1", "2"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("MMBENCH_HOME", str(tmp_path / jobs))
            assert main(["draws", *SMALL, *bad, "--seeds", "0..1", "--model", "bm25", "--jobs", jobs,
                         "--out", str(tmp_path / f"out{jobs}")]) == 2
        said.append(capsys.readouterr().err.replace(str(tmp_path / jobs), "HOME"))
    assert said[0] == said[1] and said[0].startswith("mmbench: error: cannot build multi_source_reasoning: ")


def _children(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _wait_for(path_of, proc, timeout: float = 240.0) -> Path:
    deadline = time.time() + timeout
    while time.time() < deadline:
        path = path_of()
        if path is not None and path.is_file():
            return path
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.005)
    raise AssertionError("timed out")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_sigkilled_draws_resumes_without_rebuilding_or_rerunning_finished_draws(tmp_path, plugin):
    """The driver alone is SIGKILLed once draw 0 is built and run (its workers end with it); the command again
    rebuilds and reruns nothing of draw 0 and ends with the bytes of an uninterrupted run."""
    seeds = "0..3"   # two workers: when draw 0 is done, draws 2 and 3 cannot both be
    assert _draws(tmp_path / "ref-home", tmp_path / "ref", plugin, "--jobs", "1", seeds=seeds) == 0
    env = {**os.environ, "MMBENCH_HOME": str(tmp_path / "home")}
    args = [sys.executable, "-m", "mmbench", "draws", *SMALL, "--seeds", seeds, "--include", str(plugin),
            "--model", "bm25", "--model", "batch-sensitive", "--out", str(tmp_path / "out"), "--jobs", "2"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    root = tmp_path / "home" / "draws"
    manifest = _wait_for(lambda: next(root.glob("*/seed0/manifest.json"), None), proc)
    content = json.loads(manifest.read_text())["content_hash"][:16]
    bm25 = _wait_for(lambda: tmp_path / "out" / "bm25" / content / "results.json", proc)
    workers = _children(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.time() + 30
    while time.time() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
        time.sleep(0.05)
    assert not [w for w in workers if Path(f"/proc/{w}/stat").exists()
                and Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"], "workers outlived it"
    built = {p.parent.name for p in root.glob("*/seed*/manifest.json")}
    assert "seed0" in built and len(built) < 4
    stamps = {p: p.stat().st_mtime_ns for p in (manifest, bm25, bm25.with_name("per_query.parquet"))}
    resumed = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "building draw 0 " not in resumed.stdout
    assert f"{tmp_path / 'out' / 'bm25' / content}: this run is already there; reused" in resumed.stdout
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert _files(tmp_path / "out") == _files(tmp_path / "ref")


def test_how_many_workers():
    from mmbench.running.draw_memory import auto_workers

    gib = 2**30
    assert auto_workers(5, gib, cores=2, room=10 * gib) == 2       # the cores bound
    assert auto_workers(5, gib, cores=8, room=3 * gib + 1) == 3    # the memory bound
    assert auto_workers(2, gib, cores=8, room=None) == 2           # the draws bound (memory unknown)
    assert auto_workers(5, gib, cores=8, room=gib // 2) == 1       # never none
    assert auto_workers(1, gib, cores=8, room=10 * gib) == 1


def test_usable_cores_and_memory_room(tmp_path):
    from mmbench.running.draw_memory import usable_cores
    from mmbench.running.memory_fit import memory_room

    mine = len(os.sched_getaffinity(0))
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert usable_cores(tmp_path / "cpu.max") == min(mine, 1)
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert usable_cores(tmp_path / "cpu.max") == mine == usable_cores(tmp_path / "missing")
    (tmp_path / "meminfo").write_text("MemTotal: 8000000 kB\nMemAvailable: 4000000 kB\n")
    (tmp_path / "memory.max").write_text(f"{3 * 2**30}\n")
    (tmp_path / "memory.current").write_text(f"{2**30}\n")
    none = (tmp_path / "missing",)
    assert memory_room(tmp_path / "meminfo", none, none) == 4000000 * 1024
    assert memory_room(tmp_path / "meminfo", (tmp_path / "memory.current",), (tmp_path / "memory.max",)) == 2 * 2**30
    assert memory_room(tmp_path / "missing", none, none) is None


def test_which_runs_stay_in_the_driver(tmp_path):
    sys.path.insert(0, str(TESTS))
    from toy_models import HashingModel

    from mmbench.models.bm25 import BM25Model
    from mmbench.running.draw_pool import runs_here
    from mmbench.running.runner import RunOptions

    cached, off = RunOptions(cache_dir=tmp_path), RunOptions(cache_dir=tmp_path, use_cache=False)
    assert runs_here(HashingModel(), cached) and not runs_here(HashingModel(), off)
    assert not runs_here(BM25Model(), cached)


def test_a_cached_model_runs_in_the_driver_over_the_draws_in_order(tmp_path, monkeypatch):
    """Through the Python entry point: the cached model (an object no worker could load by its name) runs here,
    draw after draw in the plans' order; the draws themselves are built by two workers."""
    sys.path.insert(0, str(TESTS))
    from toy_models import HashingModel

    from mmbench.running.draw_pool import DrawPlan, Parallel, build_and_run, draw_folder
    from mmbench.running.runner import RunOptions
    from mmbench.tasks import get_task

    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    spec, model = get_task("multi_source_reasoning"), HashingModel()
    params = {"lengths": [4096], "datasets": ["hotpotqa"], "queries_per_dataset": 4, "candidates_per_query": 4}
    plans = [DrawPlan(seed, params, (tmp_path / "runs",)) for seed in (3, 1)]
    said: list[str] = []
    poolsets, (runs,) = build_and_run(spec, "sample", plans, [("not-a-registered-name", model)],
                                      RunOptions(cache_dir=tmp_path / "cache", progress=False), Parallel(jobs=2),
                                      announce=said.append)
    assert [ps.manifest["seed"] for ps in poolsets] == [3, 1] and model.calls
    assert [r.content_hash for r in runs] == [ps.content_hash for ps in poolsets]
    assert said == ["making 2 draws in 2 worker processes (--jobs 2)"] + [
        f"building draw {p.seed} of multi_source_reasoning into {draw_folder(spec, 'sample', p)}" for p in plans]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_killed_mid_build_stops_the_command_in_one_line(tmp_path):
    env = {**os.environ, "MMBENCH_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen([sys.executable, "-m", "mmbench", "draws", *SMALL, "--seeds", "0..1", "--model", "bm25",
                             "--out", str(tmp_path / "out"), "--jobs", "2"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline, workers = time.time() + 120, []
    while time.time() < deadline and not workers and proc.poll() is None:
        workers = [w for w in _children(proc.pid) if b"spawn_main" in Path(f"/proc/{w}/cmdline").read_bytes()]
        time.sleep(0.01)
    assert workers, "no worker started"
    os.kill(workers[0], signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, out + err
    assert err.startswith("mmbench: error: a worker process died while making draw ") and len(err.splitlines()) == 1


def test_a_worker_is_counted_at_its_measured_peak_once_there_is_one(tmp_path):
    from mmbench.running.draw_memory import (DRAW_WORKER_ALLOWANCE, MEASURED_MARGIN, models_key, recorded_peak,
                                             remember_peak, worker_need)

    a, b, key = tmp_path / "a", tmp_path / "b", models_key(["bm25"])
    a.mkdir(), b.mkdir()
    assert key == "build+bm25" and worker_need([a, b], key, ["bm25"]) == DRAW_WORKER_ALLOWANCE   # nothing measured
    remember_peak(a, key, 2 * 2**30)
    remember_peak(a, key, 2**30)          # a smaller peak does not replace the larger one
    assert recorded_peak(a, key) == 2 * 2**30 and recorded_peak(a, models_key([])) is None
    assert worker_need([a, b], key, ["bm25"]) == DRAW_WORKER_ALLOWANCE            # b (the fresh draws') unmeasured
    remember_peak(b, key, 3 * 2**30)
    assert worker_need([a, b], key, ["bm25"]) == int(3 * 2**30 * MEASURED_MARGIN)
    (a / "worker_peaks.json").write_text("[not a record")
    assert recorded_peak(a, key) is None and worker_need([a], key, []) == DRAW_WORKER_ALLOWANCE
