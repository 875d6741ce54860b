"""How many draws `mmbench draws` and `mmbench overfit` make at once (`--jobs auto`): at most one per draw, one per
usable core, and as many as fit in the memory available now, each worker counted at what one needs.

What a worker needs is what its process peaks at: the build of one draw and the runs it does over it (BM25 holds
the whole corpus: over the Visual Grounding sample it peaked at 5.0 GB, while the build peaked near 1 GB). It is
measured, not guessed, wherever it can be: each worker reports its peak resident memory (VmHWM), and the command
keeps the largest per design and set of models in `<draws root>/worker_peaks.json` (the draws root holds the seeds
of one task, source and parameter set). A later command with that design and those models counts each worker at
that peak and a quarter more. Before any has been measured, a worker is counted at `DRAW_WORKER_ALLOWANCE`, the
largest peak measured on the project's sample tasks with a margin, plus the runtime and weights of any torch model
it loads (`memory_fit.resident_need`). The record is a hint: an unreadable one counts as absent.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Sequence

# measured (VmHWM) on one worker making a default sample draw and running BM25 over it: Visual Grounding 5,055 MB,
# Multi-Source Reasoning 1,400 MB; a reduced Multi-Source Reasoning draw (one 4K length, four queries) 330 MB
DRAW_WORKER_ALLOWANCE = 6 * 2**30
MEASURED_MARGIN = 1.25    # a measured peak is counted a quarter higher: another seed's draw may take a little more
PEAKS = "worker_peaks.json"
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")   # cgroup v2: "QUOTA PERIOD" in microseconds, or "max PERIOD"


def usable_cores(cpu_max: Path = CPU_MAX) -> int:
    """The cores this process may run on: its CPU affinity, within the cgroup's CPU quota (cpu.max) if any."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def auto_workers(draws: int, per_worker: int, cores: int | None = None, room: int | None = -1) -> int:
    """Workers for `draws` draws: at most one per draw and per usable core, and as many as `room` bytes of memory
    hold at `per_worker` each (`room` -1: the memory available now; None: unknown, no bound); at least one."""
    from mmbench.running.memory_fit import memory_room

    room = memory_room() if room == -1 else room
    by_memory = draws if room is None else room // max(1, per_worker)
    return max(1, min(draws, usable_cores() if cores is None else cores, by_memory))


def models_key(requested: Iterable[str]) -> str:
    """The record's key for a worker running `requested` models over its draw (the build alone: "build")."""
    return "+".join(["build", *sorted(requested)])


def worker_need(roots: Sequence[Path], key: str, models: Sequence[str]) -> int:
    """What one worker is counted at, in bytes: the largest peak recorded under `roots` for `key` (with the margin)
    when every root has one, else `DRAW_WORKER_ALLOWANCE` plus what each of `models` needs resident."""
    from mmbench.running.memory_fit import resident_need

    peaks = [recorded_peak(root, key) for root in roots]
    if peaks and all(p is not None for p in peaks):
        return int(max(p for p in peaks if p is not None) * MEASURED_MARGIN)
    return DRAW_WORKER_ALLOWANCE + sum(resident_need(name, {}) for name in models)


def recorded_peak(root: Path, key: str) -> int | None:
    try:
        value = json.loads((root / PEAKS).read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


def remember_peak(root: Path, key: str, peak: int | None) -> None:
    """Keep `peak` (bytes) for `key` under `root` when it is larger than the one recorded; a folder that cannot be
    written keeps nothing (the record is a hint)."""
    from mmbench.data.media import atomic_write_bytes

    known = recorded_peak(root, key)
    if peak is None or (known is not None and known >= peak):
        return
    try:
        record = json.loads((root / PEAKS).read_text())
        record = record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        record = {}
    try:
        atomic_write_bytes(root / PEAKS, (json.dumps({**record, key: int(peak)}, indent=2, sort_keys=True) + "\n")
                           .encode())
    except OSError:
        pass
