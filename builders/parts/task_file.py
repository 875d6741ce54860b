"""A declarative task file: read (YAML or TOML), checked against the published schema, with its defaults.

The schema ships beside this module (`task_file.schema.json`, `TASK_FILE_SCHEMA`); `jsonschema` checks a file
against it, and every problem is a `TaskFileError` of one line naming the file and the field
(`my_task.yaml: design.pool_size: 1 is less than the minimum of 2`). What the schema cannot say (bins that
overlap, a bin whose lower bound is not below its upper) is checked here too.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

SCHEMA_FILE = "task_file.schema.json"
SOURCE = "files"   # the one source of a declarative task: the files its task file names
SUFFIXES = (".yaml", ".yml", ".toml")
FORMATS = ("jsonl", "mteb")   # the order of the schema's sources branches
DEFAULTS = {"pool_size": 8, "distractors": "same_bin", "seed": 0}


class TaskFileError(ValueError):
    """A task file that cannot be used; the message names the file and the field."""


def task_file_schema() -> dict[str, Any]:
    """The JSON schema every task file is checked against (shipped as package data)."""
    text = resources.files("mmbench.builders.parts").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


@dataclass(frozen=True)
class TaskFile:
    """A checked task file: where it is, its exact text and SHA-256, and its content with defaults filled in."""

    path: Path
    text: str
    sha256: str
    data: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def version(self) -> str:
        return str(self.data.get("version", "1"))

    @property
    def design(self) -> dict[str, Any]:
        return self.data["design"]

    @property
    def base(self) -> Path:
        """The folder relative source paths are read from."""
        return self.path.parent

    def record(self) -> dict[str, Any]:
        """What a pool set's manifest keeps of the file: enough to build it again from the file and the sources."""
        return {"name": self.path.name, "sha256": self.sha256, "text": self.text, "design": self.design,
                "sources": self.data["sources"]}


def read_task_file(path: str | Path, text: str | None = None) -> TaskFile:
    """The task file at `path` (or its `text`, as a manifest recorded it), parsed, checked and completed."""
    path = Path(path).expanduser().resolve()
    if path.suffix.lower() not in SUFFIXES:
        raise TaskFileError(f"{path}: a task file is YAML (.yaml, .yml) or TOML (.toml)")
    if text is None:
        if not path.is_file():
            raise TaskFileError(f"{path}: no such task file")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise TaskFileError(f"{path}: not valid UTF-8") from None
    data = _parse(path, text)
    _check_schema(path, data)
    data = {**data, "version": str(data.get("version", "1")),
            "design": {**DEFAULTS, **data["design"]}}
    design = data["design"]
    design.setdefault("min_documents_per_bin", design["pool_size"])
    if design["min_documents_per_bin"] < design["pool_size"] and design["distractors"] != "none":
        raise TaskFileError(f"{path}: design.min_documents_per_bin: {design['min_documents_per_bin']} is below "
                            f"pool_size {design['pool_size']}, so a pool could not be filled (distractors none "
                            "ranks each query against its whole bin and allows it)")
    _check_bins(path, design["length_bins"])
    return TaskFile(path, text, hashlib.sha256(text.encode("utf-8")).hexdigest(), data)


def _parse(path: Path, text: str) -> dict[str, Any]:
    if path.suffix.lower() == ".toml":
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise TaskFileError(f"{path}: not valid TOML ({exc})") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f":{mark.line + 1}" if mark is not None else ""
            raise TaskFileError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    if not isinstance(data, dict):
        raise TaskFileError(f"{path}: expected a mapping of name, sources and design at the top")
    return data


def _check_schema(path: Path, data: dict[str, Any]) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(task_file_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.path), list(map(str, e.path))))
    if not errors:
        return
    err = errors[0]
    if err.validator == "oneOf" and isinstance(err.instance, dict):   # name the layout's own problem
        fmt = err.instance.get("format")
        inner = [e for e in err.context or [] if fmt is not None and _branch_format(e) == fmt]
        if not inner:
            where = ".".join(map(str, err.absolute_path)) or "(top)"
            raise TaskFileError(f"{path}: {where}.format: expected 'jsonl' or 'mteb', got {json.dumps(fmt)}")
        err = min(inner, key=lambda e: (e.validator != "additionalProperties", len(e.path)))
    where = ".".join(str(p) for p in err.absolute_path) or "(top)"
    message = err.message
    if err.validator == "additionalProperties":
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        where = ".".join([*map(str, err.absolute_path), extra[0]]) if extra else where
        known = ", ".join(sorted(err.schema.get("properties", {})))
        message = f"not a field here (fields: {known})"
    elif err.validator == "required":
        missing = next((k for k in err.validator_value if k not in err.instance), "")
        where = ".".join([*map(str, err.absolute_path), missing])
        message = "missing"
    raise TaskFileError(f"{path}: {where}: {message}")


def _branch_format(err: Any) -> str | None:
    """The layout (`format`) of the `sources` branch a oneOf sub-error belongs to."""
    path = list(err.relative_schema_path)
    return FORMATS[path[0]] if path and isinstance(path[0], int) and path[0] < len(FORMATS) else None


def _check_bins(path: Path, bins: dict[str, list[int]]) -> None:
    spans = []
    for name, (lo, hi) in bins.items():
        if not lo < hi:
            raise TaskFileError(f"{path}: design.length_bins.{name}: lower bound {lo} is not below upper bound {hi}")
        spans.append((lo, hi, name))
    spans.sort()
    for (lo1, hi1, a), (lo2, hi2, b) in zip(spans, spans[1:]):
        if lo2 < hi1:
            raise TaskFileError(f"{path}: design.length_bins.{b}: ({lo2}, {hi2}] overlaps {a} ({lo1}, {hi1}]")
