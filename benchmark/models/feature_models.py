"""The feature-model kinds RAVEL loads: vision encoders (patch tokens) and language models (caption vectors).

Like `registry.py` for embedding models, each kind maps to a factory (`"module:Class"`, imported on first use);
`register_feature_kind` adds one. `load_feature_model(kind, name, path)` loads a transformers folder or hub id
and turns a load failure (no such folder, a hub id that is not cached offline, a broken config or weights) into
one `FeatureModelError` line naming the option, the model and the cause.
"""
from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from typing import Any

from mmbench.common.errors import CLIError

FEATURE_KINDS: dict[str, tuple[str, str]] = {  # kind -> (factory, option that names such a model)
    "vision-patches": ("mmbench.models.patch_encoder:VisionEncoder", "--encoder"),
    "llm-hidden": ("mmbench.models.llm_text:TextModel", "--llm"),
}


class FeatureModelError(CLIError):
    """A vision encoder or language model that cannot be loaded or run; the message names it."""


def register_feature_kind(kind: str, factory: str, option: str) -> None:
    if kind in FEATURE_KINDS:
        raise ValueError(f"feature-model kind {kind!r} is already registered")
    FEATURE_KINDS[kind] = (factory, option)


def model_identity(name_or_path: str) -> str:
    """Hub id, or for a local folder its resolved path + hash of its config and weight file sizes."""
    p = Path(name_or_path)
    if not p.exists():
        return str(name_or_path)
    h = hashlib.sha256(str(p.resolve()).encode())
    for f in sorted(p.glob("*")):
        if f.is_file():
            h.update(f.name.encode())
            h.update(str(f.stat().st_size).encode())
            if f.suffix == ".json":
                h.update(f.read_bytes())
    return f"{p.resolve()}#{h.hexdigest()[:16]}"


def one_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (transformers writes paragraphs)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def load_feature_model(kind: str, name: str, path: str, *, online: bool = False, **options: Any) -> Any:
    """The `kind` adapter for `path` (a transformers folder, or a hub id: from the local cache unless `online`)."""
    if kind not in FEATURE_KINDS:
        raise FeatureModelError(f"unknown feature-model kind {kind!r}; known: {', '.join(sorted(FEATURE_KINDS))}")
    factory, option = FEATURE_KINDS[kind]
    where = f"{option} {name}={path}"
    local = Path(path)
    if not local.exists() and (path.startswith((".", "/", "~")) or ("/" not in path and not online)):
        raise FeatureModelError(f"{where}: unknown model: no such folder, and not a hub id (owner/name; a hub "
                                "name without an owner needs --online)")
    if local.is_dir() and not (local / "config.json").is_file():
        raise FeatureModelError(f"{where}: not a transformers model folder (no config.json)")
    module, attr = factory.split(":")
    cls = getattr(importlib.import_module(module), attr)
    try:
        return cls(path, local_files_only=not online, **options)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
        hint = "" if online or local.exists() else " (not in the local hub cache; pass --online to download)"
        raise FeatureModelError(f"{where}: cannot load it as a {kind} model: {one_line(exc)}{hint}") from None
