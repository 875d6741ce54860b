"""Where a result came from: mmbench version and commit, library versions, device, dtype, date, command.

Recorded in results.json as `mmbench.provenance`. Versions are read from package metadata, so recording
them imports nothing heavy; the commit is read from the checkout mmbench runs from, if any.
"""
from __future__ import annotations

import datetime
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from mmbench.common.http_client import redact_url_text

PACKAGES = ("torch", "transformers", "sentence-transformers", "mteb", "numpy")
COMMAND_LINE: list[str] | None = None  # set by the CLI; else the interpreter's sys.argv is recorded


def package_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def git_commit(where: Path | None = None) -> dict[str, Any] | None:
    """The commit (and whether the tree has local changes) of the checkout holding the mmbench source;
    None when mmbench is not run from a git checkout (an installed wheel) or git is unavailable."""
    where = where or Path(__file__).resolve().parent
    try:
        top = subprocess.run(["git", "-C", str(where), "rev-parse", "--show-toplevel", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        if top.returncode != 0:
            return None
        root, commit = top.stdout.split()
        status = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return {"commit": commit, "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def model_device_dtype(model: Any) -> tuple[str | None, str | None]:
    """Best effort: the device and dtype the model's weights live on (None when it has no weights, e.g. BM25
    or an API model)."""
    settings = getattr(getattr(model, "card", None), "settings", {}) or {}
    device, dtype = settings.get("device"), settings.get("dtype")
    if getattr(model, "loaded", True) is False:  # a warm run's LazyModel: asking the weights would load them
        remembered = getattr(model, "remembered_weights", None) or {}
        device, dtype = device or remembered.get("device"), dtype or remembered.get("dtype")
        return (str(device) if device is not None else None, str(dtype) if dtype is not None else None)
    for obj in (model, *(getattr(model, a, None) for a in ("model", "encoder", "_model"))):
        if obj is None:
            continue
        if device is None and getattr(obj, "device", None) is not None:
            device = str(obj.device)
        params = getattr(obj, "parameters", None)
        if callable(params) and (device is None or dtype is None):
            try:
                first = next(iter(params()))
            except (StopIteration, TypeError):
                continue
            device = device or str(first.device)
            dtype = dtype or str(first.dtype).replace("torch.", "")
    return (str(device) if device is not None else None, str(dtype) if dtype is not None else None)


def provenance(model: Any = None, argv: list[str] | None = None) -> dict[str, Any]:
    from mmbench import __version__

    device, dtype = model_device_dtype(model) if model is not None else (None, None)
    return {
        "mmbench_version": __version__,
        "git": git_commit(),
        "python": platform.python_version(),
        "packages": {name: package_version(name) for name in PACKAGES},
        "device": device,
        "dtype": dtype,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": redact_url_text(shlex.join(argv or COMMAND_LINE or sys.argv)),
    }
