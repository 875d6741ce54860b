"""Installed distributions as the names of their metadata folders (`numpy-2.4.6.dist-info`): name and version
without parsing METADATA files, which costs a run tens of milliseconds through importlib.metadata. The model-card
memo keys on the whole list; provenance records a few versions from it."""
from __future__ import annotations

import os
import re
import sys


def installed_distributions() -> list[str]:
    """The metadata folders (`.dist-info`, `.egg-info`) on sys.path, sorted by name."""
    names: set[str] = set()
    for entry in sys.path:
        try:
            names.update(n for n in os.listdir(entry or ".") if n.endswith((".dist-info", ".egg-info")))
        except OSError:  # a zip file or a missing folder on the path
            continue
    return sorted(names)


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def distribution_versions(names: list[str] | tuple[str, ...]) -> dict[str, str | None]:
    """The installed version of each distribution in `names`, from its one `.dist-info` folder name; through
    importlib.metadata where the folders do not say it unambiguously (an egg-info, two copies on the path); None
    for one not installed."""
    found: dict[str, set[str]] = {}
    for folder in installed_distributions():
        stem = folder[: -len(".dist-info")]
        if folder.endswith(".dist-info") and stem.count("-") == 1:
            found.setdefault(_normalised(stem.split("-")[0]), set()).add(stem.split("-")[1])
    out: dict[str, str | None] = {}
    for name in names:
        versions = found.get(_normalised(name), set())
        out[name] = next(iter(versions)) if len(versions) == 1 else _metadata_version(name)
    return out


def _metadata_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None
