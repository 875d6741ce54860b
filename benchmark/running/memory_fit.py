"""Whether a model can load within the memory limits in force, decided before it loads.

Under an address-space limit (RLIMIT_AS, `ulimit -v`) or a cgroup memory limit (memory.max), a model that does not
fit used to fail wherever the allocation happened to fail: in torch's import, in the weights' loader, or in C++
code that aborts the process (`std::bad_alloc`, exit 134) with no line of mmbench's. Before a local model loads,
its footprint is compared with the limits and the load is refused in one line when it cannot fit:

- the runtime libraries (torch and transformers), measured: a probe process imports them under the same limits
  and reports how much address space (VmPeak) and resident memory (VmHWM) the import added. A probe that does
  not finish means the libraries alone do not fit.
- the weights: their size on disk, twice against the address-space limit (the file as read or mapped, and the
  tensors made from it), once against the cgroup limit (a mapped file's pages are reclaimable cache); where no
  file is found, the parameters the registry states at 4 bytes each (2 under --dtype bfloat16/float16).
- `WORKING_ALLOWANCE`, stated: one batch's activations, the tokenizer and the allocator's slack.

With no limit in force nothing is probed. API models, BM25, plugins and factories (whose libraries mmbench cannot
know) are not checked.
"""
from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

from mmbench.common.address_limit import (CGROUP_LIMIT_FILES, NO_ROOM, address_limit_bytes, cgroup_memory_limit,
                                          limits_in_force)

RUNTIME_MODULES = ("torch", "transformers")
WORKING_ALLOWANCE = 512 * 2**20  # stated, not measured per model: a batch's activations, tokenizer, slack
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
NOT_CHECKED = ("mmbench.models.bm25:", "mmbench.models.api_")  # factories that load no torch weights
PROBE_TIMEOUT_S = 300
_PROBE = ("import sys\n"
          "def status():\n"
          "    f = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)\n"
          "    return [int(f[k].split()[0]) * 1024 for k in ('VmSize', 'VmRSS', 'VmPeak', 'VmHWM')]\n"
          "size, rss, _, _ = status()\n"
          "for name in sys.argv[1:]:\n"
          "    __import__(name)\n"
          "_, _, peak, hwm = status()\n"
          "print(peak - size, hwm - rss)\n")


def _mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MB"


def _own_status() -> tuple[int, int] | None:
    """This process's address space (VmSize) and resident memory (VmRSS) in bytes, where /proc tells them."""
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
        return int(fields["VmSize"].split()[0]) * 1024, int(fields["VmRSS"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


@functools.lru_cache(maxsize=None)
def runtime_footprint(modules: tuple[str, ...] = RUNTIME_MODULES) -> tuple[int, int] | str:
    """The address space and resident memory importing `modules` adds, measured in a probe process under this
    process's limits; or, when the probe does not finish, what they do ("run out of memory", "fail: ...")."""
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, *modules], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the probe process could not run ({type(exc).__name__})"
    if done.returncode == 0:
        try:
            space, resident = (int(v) for v in done.stdout.split())
            return space, resident
        except ValueError:
            pass
    if done.returncode in (-6, 134) or any(s in done.stderr.lower() for s in NO_ROOM):
        return "run out of memory"  # where exactly varies from try to try; that they do not fit does not
    last = [line for line in done.stderr.splitlines() if line.strip()]
    return "fail: " + (" ".join(last[-1].split())[:160] if last else f"exit {done.returncode}")


def weight_files(name: str, options: dict[str, Any]) -> list[Path]:
    """The weight files the model `name` would load (with `options`): those of its local folder, packaged copy
    or hub cache snapshot; empty when none is found."""
    folder = _weights_folder(name, options)
    if folder is None or not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.suffix in WEIGHT_SUFFIXES and p.is_file())


def weights_on_disk(name: str, options: dict[str, Any]) -> int | None:
    """The size of the weight files the model `name` would load (with `options`), or None when none is found."""
    sizes = [p.stat().st_size for p in weight_files(name, options)]
    return sum(sizes) if sizes else None


def _weights_folder(name: str, options: dict[str, Any]) -> Path | None:
    from mmbench.models.registry import LOCAL_WEIGHT_OPTIONS, registered_spec

    for key in LOCAL_WEIGHT_OPTIONS:
        if options.get(key) and Path(str(options[key])).is_dir():
            return Path(str(options[key]))
    if Path(name).is_dir():
        return Path(name)
    spec = registered_spec(name)
    if spec is None:
        return None
    if spec.offline_copy and name == "minilm":
        from mmbench.models.sentence_transformer import packaged_minilm_path

        packaged = packaged_minilm_path()
        if packaged is not None:
            return packaged
    if spec.hub_id and "://" not in spec.hub_id:
        from huggingface_hub import try_to_load_from_cache

        config = try_to_load_from_cache(spec.hub_id, "config.json")
        return Path(config).parent if isinstance(config, str) else None
    return None


def _checked(name: str) -> bool:
    """Whether `name` loads torch weights mmbench can size (registered local models, folders, hub ids)."""
    from mmbench.models.registry import FACTORY_REF, registered_spec

    spec = registered_spec(name)
    if spec is not None:
        return isinstance(spec.factory, str) and not spec.factory.startswith(NOT_CHECKED)
    return not name.startswith("mteb:") and not FACTORY_REF.fullmatch(name)


def fit_problem(name: str, options: dict[str, Any]) -> str | None:
    """One line saying why the model `name` cannot load within the memory limits in force, or None (it fits,
    no limit is in force, or mmbench cannot size it)."""
    limit, cgroup = address_limit_bytes(), cgroup_memory_limit()
    if (limit is None and cgroup is None) or not _checked(name):
        return None
    runtime = runtime_footprint()
    if isinstance(runtime, str):
        return (f"model {name!r} cannot load under {limits_in_force()}: its runtime libraries "
                f"({', '.join(RUNTIME_MODULES)}) {runtime} there, measured in a probe process; raise the limit")
    weights = weights_on_disk(name, options)
    if weights is None:
        from mmbench.models.registry import registered_spec

        spec = registered_spec(name)
        if spec is None or not spec.parameters:
            return None
        half = str(options.get("dtype") or "") in ("bfloat16", "float16", "bf16", "fp16")
        weights, weights_from = spec.parameters * (2 if half else 4), f"{spec.parameters:,} parameters"
    else:
        weights_from = "on disk"
    own = _own_status()
    if own is None:
        return None
    space, resident = runtime
    # address space holds the file as read or mapped and the tensors made from it; resident memory the tensors
    # (a mapped file's pages are cache the kernel can reclaim)
    for bound, used, runtime_part, copies, what in ((limit, own[0], space, 2, "address space"),
                                                    (cgroup, own[1], resident, 1, "resident memory")):
        if bound is None:
            continue
        need = used + runtime_part + copies * weights + WORKING_ALLOWANCE
        if need > bound:
            return (f"model {name!r} cannot fit under {limits_in_force()}: it needs about {_mb(need)} of {what} "
                    f"({_mb(used)} in use, runtime libraries {_mb(runtime_part)} measured, weights "
                    f"{copies} x {_mb(weights)} {weights_from}, {_mb(WORKING_ALLOWANCE)} working allowance); "
                    "raise the limit or choose a smaller model")
    return None


MEMINFO = Path("/proc/meminfo")
CGROUP_USAGE_FILES = (Path("/sys/fs/cgroup/memory.current"), Path("/sys/fs/cgroup/memory/memory.usage_in_bytes"))


def memory_room(meminfo: Path = MEMINFO, usage_files: tuple[Path, ...] = CGROUP_USAGE_FILES,
                limit_files: tuple[Path, ...] = CGROUP_LIMIT_FILES) -> int | None:
    """The memory new processes can take now, in bytes: what the kernel says is available (MemAvailable), less
    where the cgroup's limit (memory.max) is nearer (its limit less its usage); None when neither is known."""
    room: list[int] = []
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                room.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    limit = cgroup_memory_limit(limit_files)
    if limit is not None:
        for path in usage_files:
            try:
                room.append(max(0, limit - int(path.read_text().strip())))
                break
            except (OSError, ValueError):
                continue
    return min(room) if room else None


def resident_need(name: str, options: dict[str, Any]) -> int:
    """The resident memory a process loading the model `name` (with `options`) needs for it, in bytes: its
    runtime libraries (measured, `runtime_footprint`), its weights on disk and `WORKING_ALLOWANCE`; 0 for a model
    mmbench does not size (BM25, API models, plugins) and for what cannot be measured or found."""
    if not _checked(name):
        return 0
    runtime = runtime_footprint()
    weights = weights_on_disk(name, options)
    return (0 if isinstance(runtime, str) else runtime[1]) + (weights or 0) + WORKING_ALLOWANCE
