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

from mmbench.common.distributions import distribution_versions
from mmbench.common.url_redaction import redact_url_text

PACKAGES = ("torch", "transformers", "sentence-transformers", "mteb", "numpy")
COMMAND_LINE: list[str] | None = None  # set by the CLI; else the interpreter's sys.argv is recorded


def package_version(name: str) -> str | None:
    return distribution_versions((name,))[name]


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
    # a warm run's LazyModel that did load: the weights are on the model it loaded
    holders = [model, model.real] if getattr(model, "loaded", None) is True and hasattr(model, "real") else [model]
    for obj in (o for h in holders for o in (h, *(getattr(h, a, None) for a in ("model", "encoder", "_model")))):
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


def cpu_name() -> str | None:
    """The CPU's model name (from /proc/cpuinfo on Linux, else what `platform` says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def accelerator() -> dict[str, Any]:
    """GPU name, CUDA version and driver version where torch is already imported and sees a GPU; nulls otherwise.
    torch is not imported here (a run whose model never loaded it should not pay for it)."""
    out: dict[str, Any] = {"gpu": None, "cuda": None, "driver": None}
    torch = sys.modules.get("torch")
    if torch is None:
        return out
    try:
        out["cuda"] = getattr(torch.version, "cuda", None)
        if torch.cuda.is_available():
            out["gpu"] = torch.cuda.get_device_name(torch.cuda.current_device())
            out["driver"] = nvidia_driver()
    except Exception:  # noqa: BLE001 - a broken CUDA install must not fail a finished run
        pass
    return out


def nvidia_driver() -> str | None:
    """The NVIDIA driver version (from the kernel module's procfs file, or nvidia-smi)."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
        for word in text.split():
            if word.count(".") >= 1 and word.replace(".", "").isdigit():
                return word
    except OSError:
        pass
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return res.stdout.strip().splitlines()[0] if res.returncode == 0 and res.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def provenance(model: Any = None, argv: list[str] | None = None) -> dict[str, Any]:
    from mmbench import __version__

    device, dtype = model_device_dtype(model) if model is not None else (None, None)
    return {
        "mmbench_version": __version__,
        "git": git_commit(),
        "python": platform.python_version(),
        "packages": distribution_versions(PACKAGES),
        "device": device,
        "dtype": dtype,
        "os": platform.platform(),
        "cpu": cpu_name(),
        **accelerator(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": redact_url_text(shlex.join(argv or COMMAND_LINE or sys.argv)),
    }
