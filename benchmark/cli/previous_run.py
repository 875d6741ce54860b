"""The results folders `mmbench run` creates, removed again when the model fails to load."""
from __future__ import annotations

from pathlib import Path


def missing_ancestor(path: Path) -> Path | None:
    """The outermost folder of `path` that does not exist yet (what creating it would create), or None."""
    path = Path(path).absolute()
    first = None
    while not path.exists():
        first, path = path, path.parent
    return first


def remove_if_empty(created: Path | None, leaf: Path) -> None:
    """Remove the empty folders from `leaf` up to `created` (the folders this run made), nothing else."""
    if created is None:
        return
    path = Path(leaf).absolute()
    while True:
        try:
            path.rmdir()  # only succeeds on an empty folder
        except OSError:
            return
        if path == created:
            return
        path = path.parent
