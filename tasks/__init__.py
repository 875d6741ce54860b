"""The task registry: one short declarative module per task, plus tasks from plugins.

A plugin package declares its tasks under the `mmbench.tasks` entry-point group; each entry point
names a `TaskSpec` (or a callable returning one or several). A script can also call
`register_task(spec)` (the CLI's `--include FILE` runs such a script before resolving names).
"""
from __future__ import annotations

import importlib

from mmbench.common.names import did_you_mean
from mmbench.tasks.spec import TaskSpec

ENTRY_POINT_GROUP = "mmbench.tasks"
# The built-in tasks, each in its own module (whose TASK is its spec), imported when first asked for: a module
# imports its builder for the design's constants, and a run from a built pool set needs one task, not five builders.
BUILT_IN = ("visual_grounding", "flickr_hard_negatives", "temporal_summarization", "multi_source_reasoning",
            "logical_summarization")
_TASKS: dict[str, TaskSpec] = {}
# Named groups of tasks, accepted wherever a list of tasks is (`--task mmlongembed`).
BENCHMARKS: dict[str, tuple[str, ...]] = {
    "mmlongembed": ("visual_grounding", "temporal_summarization", "multi_source_reasoning", "logical_summarization"),
}
_entry_points_loaded = False


class UnknownTaskError(LookupError):
    pass


def register_task(spec: TaskSpec) -> TaskSpec:
    """Add a task defined outside the package; a name already taken (or a benchmark's) is an error."""
    if not isinstance(spec, TaskSpec):
        raise TypeError(f"register_task expects a TaskSpec, got {type(spec).__name__}")
    if spec.name in BENCHMARKS:
        raise ValueError(f"task name {spec.name!r} is the name of a benchmark")
    if spec.name in BUILT_IN:
        _load_built_in(spec.name)
    if spec.name in _TASKS and _TASKS[spec.name] is not spec:
        raise ValueError(f"task {spec.name!r} is already registered")
    _TASKS[spec.name] = spec
    return spec


def _load_built_in(name: str) -> None:
    if name not in _TASKS:
        spec = importlib.import_module(f"mmbench.tasks.{name}").TASK
        _TASKS[spec.name] = spec


def _load_entry_points() -> None:
    """Register the tasks installed packages declare (once; a broken plugin is named, not skipped)."""
    import sys

    from mmbench.common.plugins import new_entry_points

    for ep in new_entry_points(sys.modules[__name__], ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            specs = obj() if callable(obj) and not isinstance(obj, TaskSpec) else obj
        except Exception as exc:
            raise UnknownTaskError(f"task plugin {ep.name!r} ({ep.value}) failed to load: "
                                   f"{type(exc).__name__}: {exc}") from exc
        for spec in specs if isinstance(specs, (list, tuple)) else [specs]:
            if spec.name not in _TASKS:
                register_task(spec)


def get_task(name: str) -> TaskSpec:
    if name in BUILT_IN:
        _load_built_in(name)
    if name not in _TASKS:
        _load_all()
    try:
        return _TASKS[name]
    except KeyError:
        hint = f"; {name!r} is a benchmark, run it with --task {name}" if name in BENCHMARKS else ""
        hint = hint or did_you_mean(name, [*_TASKS, *BENCHMARKS])
        raise UnknownTaskError(f"unknown task {name!r}{hint}; known: {', '.join(sorted(_TASKS))}") from None


def design_strata(name: str) -> tuple[str, ...]:
    """The strata of task `name`'s design (`TaskSpec.strata`); none for a task this installation does not know."""
    try:
        return get_task(name).strata
    except UnknownTaskError:
        return ()


def _load_all() -> None:
    for name in BUILT_IN:
        _load_built_in(name)
    _load_entry_points()


def task_specs() -> list[TaskSpec]:
    _load_all()
    return [_TASKS[k] for k in sorted(_TASKS)]


def resolve_tasks(names: str | TaskSpec | list[str | TaskSpec] | tuple[str | TaskSpec, ...]) -> list[TaskSpec]:
    """Task specs, task names, benchmark names and comma-separated lists of names, as task specs in the order
    given (a task named twice runs once)."""
    parts = [names] if isinstance(names, (str, TaskSpec)) else list(names)
    out: dict[str, TaskSpec] = {}
    for part in parts:
        if isinstance(part, TaskSpec):
            out.setdefault(part.name, part)
            continue
        for name in (p.strip() for p in str(part).split(",") if p.strip()):
            for task in BENCHMARKS.get(name, (name,)):
                out.setdefault(task, get_task(task))
    if not out:
        raise UnknownTaskError("no task given")
    return list(out.values())


__all__ = ["TaskSpec", "get_task", "design_strata", "task_specs", "resolve_tasks", "register_task", "BENCHMARKS", "UnknownTaskError"]
