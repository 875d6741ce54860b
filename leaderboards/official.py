"""The official pool sets: which data a leaderboard accepts results on.

For each task and task version the registry holds the content hash of the official pool set
(the default ``sample`` build with seed 0 unless stated otherwise) and, per subset, the number of
evaluation items and a fingerprint of them: item id, relevant ids, the candidate set and the
metadata axes the boards group by. A submission must reproduce all of it, so a partial run, a
run on other data, or per-query rows with edited relevance or metadata is refused.

The shipped registry is ``mmbench/leaderboards/data/official_hashes.json``; a different file can
be given explicitly or through the ``MMBENCH_OFFICIAL_HASHES`` environment variable (tests and
private boards use this).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping

from mmbench.data.media import atomic_write_bytes
from mmbench.data.poolset import PoolSet
from mmbench.results.aggregate import GROUP_AXES

ENV_VAR = "MMBENCH_OFFICIAL_HASHES"
FORMAT = "mmbench-official/1"


class UnknownOfficialError(LookupError):
    """No official pool set is registered for a task or task version."""


@dataclass(frozen=True)
class SubsetPrint:
    n_items: int
    items_sha256: str


@dataclass(frozen=True)
class OfficialEntry:
    """The official pool set of one task version."""

    task: str
    task_version: str
    content_hash: str
    n_items: int
    subsets: dict[str, SubsetPrint] = field(default_factory=dict)
    build: dict[str, Any] = field(default_factory=dict)  # how it was made (source, seed, params)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("task")
        d.pop("task_version")
        return d

    @classmethod
    def from_json(cls, task: str, version: str, d: Mapping[str, Any]) -> "OfficialEntry":
        subsets = {str(k): SubsetPrint(int(v["n_items"]), str(v["items_sha256"])) for k, v in d.get("subsets", {}).items()}
        return cls(task, version, str(d["content_hash"]), int(d["n_items"]), subsets, dict(d.get("build", {})))


def _canon(value: Any) -> Any:
    """A metadata value in a form that survives Parquet round trips (ints read back as floats)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and math.isnan(value) else repr(float(value))
    return str(value)


def item_line(item_id: str, relevant: Iterable[str], candidates: Iterable[str], axes: Mapping[str, Any]) -> str:
    meta = {a: _canon(axes.get(a)) for a in GROUP_AXES}
    return json.dumps([str(item_id), sorted(map(str, relevant)), sorted(map(str, candidates)),
                       {k: v for k, v in meta.items() if v is not None}], separators=(",", ":"), ensure_ascii=False)


def fingerprint(lines_by_subset: Mapping[str, list[str]]) -> dict[str, SubsetPrint]:
    out = {}
    for subset, lines in sorted(lines_by_subset.items()):
        h = hashlib.sha256()
        for line in sorted(lines):
            h.update(line.encode("utf-8") + b"\n")
        out[subset] = SubsetPrint(len(lines), h.hexdigest())
    return out


def poolset_fingerprint(ps: PoolSet) -> dict[str, SubsetPrint]:
    lines: dict[str, list[str]] = {}
    for p in ps.pools:
        lines.setdefault(p.subset, []).append(item_line(p.id, p.relevant_ids, p.candidate_ids, p.meta))
    return fingerprint(lines)


def entry_from_poolset(ps: PoolSet, build: Mapping[str, Any] | None = None) -> OfficialEntry:
    """The registry entry that makes `ps` the official pool set of its task version."""
    return OfficialEntry(ps.task, ps.task_version, ps.content_hash, len(ps.pools), poolset_fingerprint(ps),
                         dict(build or {"source": "sample", "seed": ps.seed}))


@dataclass
class OfficialRegistry:
    entries: dict[tuple[str, str], OfficialEntry] = field(default_factory=dict)
    path: Path | None = None

    @classmethod
    def load(cls, path: Path | str | None = None) -> "OfficialRegistry":
        """`path`, else $MMBENCH_OFFICIAL_HASHES, else the shipped file."""
        path = Path(path or os.environ.get(ENV_VAR) or shipped_path())
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"official hash registry {path} does not exist") from None
        except ValueError as exc:
            raise ValueError(f"official hash registry {path}: invalid JSON ({exc})") from exc
        reg = cls(path=path)
        for task, versions in data.get("tasks", {}).items():
            for version, d in versions.items():
                reg.add(OfficialEntry.from_json(task, version, d))
        return reg

    def add(self, entry: OfficialEntry) -> None:
        self.entries[(entry.task, entry.task_version)] = entry

    def tasks(self) -> list[str]:
        return sorted({t for t, _ in self.entries})

    def get(self, task: str, version: str) -> OfficialEntry:
        if (task, version) in self.entries:
            return self.entries[(task, version)]
        versions = sorted(v for t, v in self.entries if t == task)
        if not versions:
            raise UnknownOfficialError(f"task {task!r} has no official pool set; known: {', '.join(self.tasks()) or 'none'}")
        raise UnknownOfficialError(f"task {task!r} version {version!r} is not official; official versions: {', '.join(versions)}")

    def to_json(self) -> dict[str, Any]:
        tasks: dict[str, dict[str, Any]] = {}
        for (task, version), e in sorted(self.entries.items()):
            tasks.setdefault(task, {})[version] = e.to_json()
        return {"format": FORMAT, "tasks": tasks}

    def save(self, path: Path | str) -> Path:
        path = Path(path)
        atomic_write_bytes(path, (json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n").encode())
        self.path = path
        return path


def shipped_path() -> Path:
    return Path(str(resources.files("mmbench.leaderboards").joinpath("data", "official_hashes.json")))
