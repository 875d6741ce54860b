"""User code the CLI runs before resolving names: `--include FILE` (like lm-eval's --include_path).

The file is imported as a module named after it (`my_tasks.py` -> `my_tasks`), so a task it registers
can name its builder `"my_tasks:build"`. It registers what it defines with `mmbench.register_task`
and `mmbench.register_model`. Installed packages use entry points instead (`mmbench.tasks`,
`mmbench.models`), which need no flag.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


class IncludeError(RuntimeError):
    """An --include file is missing or fails to import; the message names the file and the error."""


def include_file(path: Path | str) -> ModuleType:
    """Import the Python file `path` once (again only if it is a different file under the same name)."""
    path = Path(path).expanduser().resolve()
    if path.is_dir():
        raise IncludeError(f"--include {path}: a folder; give a Python file")
    if not path.is_file():
        raise IncludeError(f"--include {path}: no such file")
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve() == path:
        return loaded
    if loaded is not None:
        raise IncludeError(f"--include {path}: a module named {name!r} is already imported from "
                           f"{getattr(loaded, '__file__', '?')}; rename the file")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise IncludeError(f"--include {path}: not importable as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # sys.exit() in an included file must not end mmbench silently
        del sys.modules[name]
        where = ""
        tb = exc.__traceback__
        while tb is not None:  # the innermost frame inside the included file
            if Path(tb.tb_frame.f_code.co_filename).resolve() == path:
                where = f" (line {tb.tb_lineno})"
            tb = tb.tb_next
        if isinstance(exc, SyntaxError) and exc.lineno:
            where = f" (line {exc.lineno})"
        what = f"called sys.exit({exc.code!r}) while being imported" if isinstance(exc, SystemExit) else \
            f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        raise IncludeError(f"--include {path}: {what}{where}") from exc
    return module


def new_entry_points(owner: ModuleType, group: str) -> list[Any]:
    """The entry points installed packages declare under `group`, the first time registry `owner` asks;
    [] afterwards. The "already read" flag is the owner module's `_entry_points_loaded`, so each registry
    (models, tasks) reads its group once and what to do with each entry point stays with it."""
    if getattr(owner, "_entry_points_loaded", False):
        return []
    owner._entry_points_loaded = True  # type: ignore[attr-defined]
    from importlib.metadata import entry_points

    return list(entry_points(group=group))
