"""mkdocs hook: lay the `mmbench` package out as it installs, so mkdocstrings finds every module statically.

setup.cfg maps `mmbench` to `benchmark/` and `mmbench.tasks`, `.builders`, `.evaluators`, `.leaderboards` to
folders beside it; griffe reads a package from one folder. The hook builds `build/api-source/mmbench/` out of
symbolic links (nothing is copied or imported) before mkdocstrings reads `paths: [build/api-source]`.
"""
from __future__ import annotations

import configparser
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "build" / "api-source"


def package_dirs() -> dict[str, Path]:
    """setup.cfg's package_dir: import name -> folder."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = [x.strip() for x in cfg["options"]["package_dir"].splitlines() if x.strip()]
    return {name.strip(): ROOT / folder.strip() for name, folder in (x.split("=") for x in lines)}


def lay_out(target: Path = SOURCE) -> Path:
    shutil.rmtree(target, ignore_errors=True)
    dirs = package_dirs()
    top = target / "mmbench"
    top.mkdir(parents=True)
    mapped = {name.split(".", 1)[1] for name in dirs if name != "mmbench"}
    for entry in dirs["mmbench"].iterdir():
        if entry.name not in mapped and entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    for name, folder in dirs.items():
        if name != "mmbench":
            (top / name.split(".", 1)[1]).symlink_to(folder, target_is_directory=True)
    return target


# At import, not in `on_config`: mkdocstrings keeps only the `paths` that exist when it reads its configuration,
# which happens before the hooks' events run; mkdocs imports this file while it loads that configuration.
lay_out()
