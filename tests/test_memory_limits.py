"""Memory failures named as memory (issue 45, item 3): one line saying memory ran out, in which step and under
which limit, exit 2, no results folder left; a model that cannot fit refused before it loads."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mmbench.cli import main
from mmbench.common import address_limit
from mmbench.common.address_limit import OutOfMemory, is_out_of_memory, memory_step, out_of_memory_message

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS as Linux applies it")


@pytest.fixture(scope="module")
def vg_small(tmp_path_factory) -> Path:
    """The smallest Visual Grounding pool set: one bin, text only, 2 needles (12 candidates)."""
    from mmbench.tasks import get_task

    out = tmp_path_factory.mktemp("vg") / "vg_small"
    get_task("visual_grounding").build("sample", out, seed=0, lengths=(256,), backgrounds=("text",),
                                       kinds=("text",), needles_per_kind=2, progress=False)
    return out


def _run_under(limit_mb: int, vg: Path, out: Path, home: Path) -> subprocess.CompletedProcess:
    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit_mb * 2**20, limit_mb * 2**20))

    env = {k: v for k, v in os.environ.items() if k not in address_limit.THREAD_VARIABLES}
    env["MMBENCH_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "mmbench", "run", "--task", "visual_grounding", "--model", "minilm",
                           "--data", str(vg), "--output", str(out), "--quiet"], env=env, capture_output=True,
                          text=True, timeout=600, preexec_fn=limit)


def _memory_lines(limit_mb: int, vg: Path, tmp_path: Path, tries: int) -> set[str]:
    """The error lines of `tries` runs under `limit_mb`; each run either succeeded (a whole results folder) or
    failed with exit 2, one line about memory naming the limit, and no results folder."""
    lines = set()
    for i in range(tries):
        out = tmp_path / f"out{limit_mb}-{i}"
        done = _run_under(limit_mb, vg, out, tmp_path / f"home{i}")
        err = [ln for ln in done.stderr.splitlines() if ln.strip()]
        if done.returncode == 0:
            assert (out / "per_query.parquet").is_file(), done.stdout[-500:]
            continue
        assert done.returncode == 2 and len(err) == 1, (done.returncode, done.stderr[-3000:])
        assert err[0].startswith("mmbench: error:") and "memory" in err[0], err
        assert f"address-space limit of {limit_mb} MB" in err[0], err
        assert not out.exists(), f"a results folder was left behind: {list(out.rglob('*'))}"
        lines.add(err[0])
    return lines


@linux_only
@pytest.mark.parametrize("limit_mb", [400, 1500, 3000])
def test_a_run_under_an_address_limit_ends_in_one_memory_line_or_succeeds(limit_mb, vg_small, tmp_path):
    lines = _memory_lines(limit_mb, vg_small, tmp_path, tries=2 if limit_mb == 1500 else 1)
    assert len(lines) <= 1, lines
    if limit_mb <= 1500:  # minilm with torch cannot run in 1.5 GB: refused, not attempted
        assert len(lines) == 1


@linux_only
@pytest.mark.parametrize("limit_mb", [400, 1500, 3000])
def test_ten_runs_under_an_address_limit_give_the_same_line(limit_mb, vg_small, tmp_path):
    assert len(_memory_lines(limit_mb, vg_small, tmp_path, tries=10)) <= 1


def test_out_of_memory_is_told_apart_and_names_its_step(monkeypatch):
    import pyarrow as pa

    for exc in (MemoryError(), pa.ArrowMemoryError("malloc of size 64 failed"),
                OSError(12, "Cannot allocate memory"), ImportError("x.so: failed to map segment from shared object"),
                RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")):
        assert is_out_of_memory(exc), exc
    for exc in (ValueError("bad value"), OSError(2, "No such file"), pa.ArrowInvalid("not a parquet file")):
        assert not is_out_of_memory(exc), exc
    monkeypatch.setattr(address_limit, "address_limit_bytes", lambda: 1500 * 2**20)
    monkeypatch.setattr(address_limit, "cgroup_memory_limit", lambda: 2 * 2**30)
    with pytest.raises(OutOfMemory) as caught:
        with memory_step("outer"):
            with memory_step("reading the pool set"):
                raise MemoryError()
    line = str(caught.value)
    assert line.startswith("out of memory while reading the pool set under the address-space limit of 1500 MB")
    assert "cgroup memory limit of 2048 MB (memory.max)" in line and "\n" not in line
    with pytest.raises(ValueError):
        with memory_step("reading"):
            raise ValueError("not memory")
    assert out_of_memory_message(caught.value) == line


def test_the_cgroup_limit_is_read_from_memory_max(tmp_path):
    v2, v1 = tmp_path / "memory.max", tmp_path / "limit_in_bytes"
    assert address_limit.cgroup_memory_limit((v2, v1)) is None
    v2.write_text("max\n")
    assert address_limit.cgroup_memory_limit((v2, v1)) is None
    v2.write_text("1073741824\n")
    assert address_limit.cgroup_memory_limit((v2, v1)) == 2**30
    v2.unlink()
    v1.write_text(str(2**63 - 4096))  # cgroup v1's "no limit"
    assert address_limit.cgroup_memory_limit((v2, v1)) is None


def test_a_healthy_table_that_does_not_fit_is_not_called_unreadable(vg_small, monkeypatch):
    import pyarrow.parquet as pq

    from mmbench.data import poolset_tables
    from mmbench.data.poolset import PoolSetError

    raw = (vg_small / "candidates.parquet").read_bytes()

    def no_room(*a, **k):
        raise MemoryError()

    monkeypatch.setattr(pq, "ParquetFile", no_room)
    with pytest.raises(MemoryError):
        list(poolset_tables.read_rows(vg_small / "candidates.parquet", raw))
    with pytest.raises(MemoryError):
        poolset_tables.read_columns(vg_small / "candidates.parquet", raw, ["id"])
    with pytest.raises(PoolSetError, match="unreadable parquet"):  # a corrupt table still is
        monkeypatch.undo()
        list(poolset_tables.read_rows(vg_small / "candidates.parquet", b"PAR1 not parquet"))


def test_the_cli_names_the_step_and_leaves_no_results_folder(vg_small, tmp_path, monkeypatch, capsys):
    import pyarrow.parquet as pq

    real = pq.ParquetFile

    def no_room(source, *a, **k):
        raise MemoryError()

    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(pq, "ParquetFile", no_room)
    out = tmp_path / "runs" / "out"
    assert main(["-v", "run", "--task", "visual_grounding", "--model", "bm25", "--data", str(vg_small),
                 "--output", str(out)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("mmbench: error")]
    assert len(err) == 1 and "out of memory while reading the pool set of visual_grounding" in err[0], err
    assert "unreadable parquet" not in err[0]
    assert not (tmp_path / "runs").exists()
    monkeypatch.setattr(pq, "ParquetFile", real)


def test_one_document_that_does_not_fit_stops_the_run_as_memory():
    from mmbench.data.documents import Document, Text
    from mmbench.running.executors.local import encode_batch

    class NoRoom:
        def encode(self, views, role, media):
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes")

    docs = [Document(id=f"d{i}", segments=[Text("x")]) for i in range(2)]
    with pytest.raises(RuntimeError, match="can't allocate memory"):
        encode_batch(NoRoom(), docs, "document", None)


def test_a_model_that_cannot_fit_is_refused_before_it_loads(monkeypatch):
    from mmbench.running import memory_fit
    from mmbench.running.model_loading import load_model_explained

    monkeypatch.setattr(memory_fit, "address_limit_bytes", lambda: 3000 * 2**20)
    monkeypatch.setattr(memory_fit, "cgroup_memory_limit", lambda: None)
    monkeypatch.setattr(address_limit, "address_limit_bytes", lambda: 3000 * 2**20)
    monkeypatch.setattr(memory_fit, "_own_status", lambda: (1000 * 2**20, 300 * 2**20))
    weights = memory_fit.weights_on_disk("minilm", {})
    assert weights is not None and 80 * 2**20 < weights < 100 * 2**20  # the packaged model.safetensors
    monkeypatch.setattr(memory_fit, "runtime_footprint", lambda: (1000 * 2**20, 400 * 2**20))
    assert memory_fit.fit_problem("minilm", {}) is None  # 1000 + 1000 + 2 x 87 + 512 MB < 3000 MB
    assert memory_fit.fit_problem("bm25", {}) is None    # loads no torch weights
    monkeypatch.setattr(memory_fit, "runtime_footprint", lambda: (1500 * 2**20, 400 * 2**20))
    line = memory_fit.fit_problem("minilm", {})
    assert line is not None and "cannot fit under the address-space limit of 3000 MB" in line
    assert "weights 2 x 87 MB on disk" in line and "runtime libraries 1,500 MB measured" in line
    with pytest.raises(OutOfMemory, match="cannot fit"):
        load_model_explained("minilm", {})
    monkeypatch.setattr(memory_fit, "runtime_footprint", lambda: "run out of memory")
    assert "runtime libraries (torch, transformers) run out of memory" in memory_fit.fit_problem("minilm", {})
    # no weights on disk: the registry's parameters at 4 bytes (2 in half precision)
    monkeypatch.setattr(memory_fit, "runtime_footprint", lambda: (500 * 2**20, 400 * 2**20))
    monkeypatch.setattr(memory_fit, "weights_on_disk", lambda name, options: None)
    assert "cannot fit" in memory_fit.fit_problem("gme-7b", {})  # 7.7e9 x 4 bytes


def test_the_probe_measures_an_import():
    from mmbench.running.memory_fit import runtime_footprint

    space, resident = runtime_footprint(("json",))
    assert 0 <= space < 2**30 and 0 <= resident < 2**30
    assert runtime_footprint(("no_such_module_anywhere",)).startswith("fail: ModuleNotFoundError")


def test_the_cgroup_limit_counts_resident_memory_and_the_weights_once(monkeypatch):
    from mmbench.running import memory_fit

    monkeypatch.setattr(memory_fit, "address_limit_bytes", lambda: None)
    monkeypatch.setattr(memory_fit, "_own_status", lambda: (9000 * 2**20, 300 * 2**20))   # VmSize is not counted
    monkeypatch.setattr(memory_fit, "runtime_footprint", lambda: (4000 * 2**20, 400 * 2**20))
    monkeypatch.setattr(memory_fit, "weights_on_disk", lambda name, options: 1000 * 2**20)
    monkeypatch.setattr(address_limit, "address_limit_bytes", lambda: None)
    for bound_mb, fits in ((2300, True), (2100, False)):   # 300 + 400 + 1 x 1000 + 512 = 2212 MB
        monkeypatch.setattr(memory_fit, "cgroup_memory_limit", lambda: bound_mb * 2**20)
        monkeypatch.setattr(address_limit, "cgroup_memory_limit", lambda: bound_mb * 2**20)
        line = memory_fit.fit_problem("minilm", {})
        assert (line is None) == fits, line
        if line is not None:
            assert f"cgroup memory limit of {bound_mb} MB (memory.max)" in line and "resident memory" in line
            assert "weights 1 x 1,000 MB on disk" in line
