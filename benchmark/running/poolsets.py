"""Which pool set a run uses: the one resolver behind `mmbench run`, `rank`, `sweep`, the Python API and the mteb export.

A run names a pool set folder, passes a `PoolSet` it already holds, or names nothing and gets the
task's offline sample, built on first use under MMBENCH_HOME. Whatever it gets must still hash to
its manifest's content hash (results carry that hash) and must hold the task asked for.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from mmbench.common.home import mmbench_home
from mmbench.data.poolset import PoolSet, PoolSetError, check_integrity, load_poolset
from mmbench.tasks import TaskSpec, get_task


class PoolSetUnusable(PoolSetError, ValueError):
    """The pool set a run asked for is missing, damaged or of another task; the message says which."""


def default_poolset_dir(task: str | TaskSpec, source: str, seed: int) -> Path:
    """Default build location; the task version is part of it so a new version is rebuilt. `task` is a registered
    task's name or a spec (a task file's, which `build --task-file` need not register)."""
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    return mmbench_home() / "poolsets" / f"{spec.name}-v{spec.version}-{source}-seed{seed}"


def resolve_poolset(spec: TaskSpec, data: Any, seed: int, *, progress: bool = True, verify: bool = False,
                    announce: Callable[[str], Any] | None = None) -> PoolSet:
    """The pool set of `spec`: `data` (a `PoolSet` or a folder), or the offline sample (built on first use; a task
    with no sample source, a declarative task, builds from its one source).

    Integrity is checked from the tables' recorded digests where the manifest has them, in full (records
    and media) with `verify`. `announce` is told, in one line, when the sample is being built.
    """
    if isinstance(data, PoolSet):
        ps = data
    else:
        if data is None:   # the offline sample; a task without one (a task file's) builds from its one source
            source = "sample" if "sample" in spec.sources or not spec.sources else spec.sources[0]
            folder = default_poolset_dir(spec, source, seed)
            if not (folder / "manifest.json").is_file():
                if announce is not None:
                    what = "the offline sample" if source == "sample" else f"its {source!r} source"
                    announce(f"no pool set given: building {what} of {spec.name} into {folder}")
                spec.build(source, folder, seed=seed, progress=progress)
        else:
            folder = Path(data)
            if not folder.exists():
                raise PoolSetUnusable(f"pool set folder {folder} does not exist (build one with "
                                      f"`mmbench build --task {spec.name}`)")
        try:
            ps = load_poolset(folder)
            check_integrity(ps, full=verify)
        except PoolSetUnusable:
            raise
        except PoolSetError as exc:
            raise PoolSetUnusable(str(exc)) from None
    if ps.task != spec.name:
        raise PoolSetUnusable(f"pool set {ps.root or '(in memory)'} holds task {ps.task!r}, not {spec.name!r}")
    return ps
