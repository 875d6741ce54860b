"""Declarative tasks: a task file (YAML or TOML) registered as a task, with no Python.

`mmbench build --task-file my_task.yaml` builds it; every command that resolves task names takes the file
with `--include my_task.yaml` (as it takes a Python file), so `run`, `draws`, `rank` and the rest find the
task by its name. The builder is `mmbench.builders.declarative:build`, the checks
`mmbench.builders.checks.declarative`; the file itself is the one build parameter (`task_file`).
"""
from __future__ import annotations

from pathlib import Path

from mmbench.builders.parts.task_file import SOURCE, SUFFIXES, TaskFile, read_task_file
from mmbench.tasks import get_task, register_task, UnknownTaskError
from mmbench.tasks.spec import TaskSpec


def is_task_file(path: str | Path) -> bool:
    """Whether `path` names a task file (by its suffix), not a Python file."""
    return Path(path).suffix.lower() in SUFFIXES


def spec_of(tf: TaskFile) -> TaskSpec:
    """The `TaskSpec` of a checked task file."""
    design = tf.design
    return TaskSpec(
        name=tf.name, version=tf.version,
        description=tf.data.get("description") or f"declarative task from {tf.path.name}",
        reference=f"task file {tf.path} (sha256 {tf.sha256[:12]})",
        builder="mmbench.builders.declarative:build", sources=(SOURCE,),
        length_bins=tuple(design["length_bins"]), modalities=("text", "image", "video"),
        summary_axes=("length_bin", "depth_target") if "depth" in design else ("length_bin",),
        default_params={"task_file": str(tf.path)},
        source_params={"task_file": "the task file (set by --task-file or --include)"},
        validator="mmbench.builders.checks.declarative",
    )


def register_task_file(path: str | Path) -> TaskSpec:
    """Read, check and register the task file at `path`; the same file again returns its task."""
    tf = read_task_file(path)
    spec = spec_of(tf)
    try:
        known = get_task(spec.name)
    except UnknownTaskError:
        return register_task(spec)
    if known.default_params.get("task_file") == spec.default_params["task_file"]:
        return known
    raise ValueError(f"{tf.path}: name: task {spec.name!r} is already registered "
                     f"({known.reference}); give the task file another name")
