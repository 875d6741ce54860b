"""A pool set read from disk, checked against the invariants its task declares (`mmbench validate`)."""
from __future__ import annotations

import importlib
from types import ModuleType

from mmbench.builders.parts.validity import ValidityReport
from mmbench.builders.parts.validity import validate as validate_with
from mmbench.data.poolset import PoolSet
from mmbench.tasks import UnknownTaskError, get_task

CHECKS_PACKAGE = "mmbench.builders.checks."   # where a manifest's recorded validator may point


def task_checks(task: str, recorded: str = "") -> ModuleType | None:
    """The task's checks module (INVARIANTS, check), or None for a task that declares none. A task this
    installation does not register (a declarative task's pool set, read without its task file) uses the checks
    module its manifest records, when that is one of mmbench's own."""
    try:
        name = get_task(task).validator
    except UnknownTaskError:
        if not recorded.startswith(CHECKS_PACKAGE):
            raise
        name = recorded
    return importlib.import_module(name) if name else None


def validate(ps: PoolSet) -> ValidityReport:
    """The common and the task's own invariant checks on a pool set's records."""
    return validate_with(ps, task_checks(ps.task, str((ps.builder or {}).get("validator") or "")))
