"""The task registry: one short declarative module per task."""
from __future__ import annotations

from .spec import TaskSpec
from . import flickr_hard_negatives, visual_grounding, temporal_summarization
from . import logical_summarization, multi_source_reasoning

_TASKS: dict[str, TaskSpec] = {m.TASK.name: m.TASK for m in (visual_grounding, flickr_hard_negatives, temporal_summarization,
                                                          multi_source_reasoning, logical_summarization)}


class UnknownTaskError(LookupError):
    pass


def get_task(name: str) -> TaskSpec:
    try:
        return _TASKS[name]
    except KeyError:
        raise UnknownTaskError(f"unknown task {name!r}; known: {', '.join(sorted(_TASKS))}") from None


def task_specs() -> list[TaskSpec]:
    return [_TASKS[k] for k in sorted(_TASKS)]


__all__ = ["TaskSpec", "get_task", "task_specs", "UnknownTaskError"]
