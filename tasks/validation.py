"""A pool set read from disk, checked against the invariants its task declares (`mmbench validate`)."""
from __future__ import annotations

import importlib
from types import ModuleType

from mmbench.builders.parts.validity import ValidityReport
from mmbench.builders.parts.validity import validate as validate_with
from mmbench.data.poolset import PoolSet
from mmbench.tasks import get_task


def task_checks(task: str) -> ModuleType | None:
    """The task's checks module (INVARIANTS, check), or None for a task that declares none."""
    name = get_task(task).validator
    return importlib.import_module(name) if name else None


def validate(ps: PoolSet) -> ValidityReport:
    """The common and the task's own invariant checks on a pool set's records."""
    return validate_with(ps, task_checks(ps.task))
