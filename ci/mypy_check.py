"""Type-check mmbench with mypy: the strict packages clean, the rest no worse than the recorded baseline.

setup.cfg's `package_dir` joins five folders (benchmark/, tasks/, builders/, evaluators/, leaderboards/) into the
one package `mmbench`, which mypy cannot see through the editable install's import hook. The script builds that
package as a tree of links (`.mypy_cache/package-tree/mmbench`), runs mypy on it with the settings in pyproject.toml, and maps
every reported path back to the checkout.

- Modules under the strict settings (pyproject.toml's `[[tool.mypy.overrides]]` with `disallow_untyped_defs`)
  must have no error.
- Every other module together may have at most the count in `ci/mypy_baseline.json`. A count below it is a
  success that asks for the baseline to be lowered (`--lower` writes it); the count may only go down.

Usage: python ci/mypy_check.py [--lower]      exit 0: passed; 1: errors over the limits (listed)
"""
from __future__ import annotations

import argparse
import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "ci" / "mypy_baseline.json"
CACHE = ROOT / ".mypy_cache"
TREE = CACHE / "package-tree"   # at a fixed place: mypy's cache remembers the paths of what it checked
ERROR = re.compile(r"^(?P<path>[^:\n]+\.py):(?P<line>\d+): error: (?P<message>.*)$")


@dataclass(frozen=True)
class MypyError:
    module: str
    where: str      # path:line in the checkout
    message: str


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """Import name -> folder, as setup.cfg's package_dir says."""
    cfg = configparser.ConfigParser()
    cfg.read(root / "setup.cfg")
    lines = [x.strip() for x in cfg["options"]["package_dir"].strip().splitlines() if x.strip()]
    return {k.strip(): root / v.strip() for k, v in (x.split("=", 1) for x in lines)}


def link_tree(dest: Path, root: Path = ROOT) -> Path:
    """`dest/mmbench`: the package as Python imports it, made of links to the checkout's files."""
    for name, folder in sorted(package_dirs(root).items(), key=lambda kv: kv[0].count(".")):
        target = dest.joinpath(*name.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for entry in folder.iterdir():
            if entry.name == "__pycache__" or (target / entry.name).exists():
                continue
            if entry.suffix == ".py" or (entry.is_dir() and (entry / "__init__.py").exists()):
                (target / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    return dest / "mmbench"


def strict_patterns(root: Path = ROOT) -> list[str]:
    """The module patterns pyproject.toml checks under `disallow_untyped_defs`."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    out: list[str] = []
    for override in config["tool"]["mypy"].get("overrides", []):
        if override.get("disallow_untyped_defs"):
            modules = override["module"]
            out += [modules] if isinstance(modules, str) else list(modules)
    return out


def is_strict(module: str, patterns: list[str]) -> bool:
    """mypy's matching: `a.b.*` is a.b and everything under it; a plain name is that module only."""
    return any(module == p[:-2] or fnmatchcase(module, p) if p.endswith(".*") else module == p for p in patterns)


def parse(output: str, tree: Path, root: Path = ROOT) -> list[MypyError]:
    """mypy's error lines as (module, checkout path:line, message); notes and the summary are left out."""
    errors = []
    for line in output.splitlines():
        m = ERROR.match(line.strip())
        if not m:
            continue
        path = Path(m["path"])
        rel = path.relative_to(tree.parent) if path.is_relative_to(tree.parent) else path
        parts = list(rel.with_suffix("").parts)
        parts = parts[len(parts) - 1 - parts[::-1].index("mmbench"):] if "mmbench" in parts else parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        real = (tree.parent / rel).resolve()  # the link's target: the checkout's file
        where = f"{real.relative_to(root) if real.is_relative_to(root) else real}:{m['line']}"
        errors.append(MypyError(".".join(parts), where, m["message"]))
    return errors


def verdict(errors: list[MypyError], patterns: list[str], baseline: int) -> tuple[bool, list[str]]:
    """Whether the check passes, and the lines that say why."""
    strict = [e for e in errors if is_strict(e.module, patterns)]
    rest = len(errors) - len(strict)
    lines = [f"{e.where}: {e.message}" for e in strict]
    if strict:
        lines.append(f"mypy: {len(strict)} errors in the strict packages (they must have none)")
    if rest > baseline:
        lines += [f"{e.where}: {e.message}" for e in errors if not is_strict(e.module, patterns)]
        lines.append(f"mypy: {rest} errors outside the strict packages, more than the baseline {baseline} "
                     f"({BASELINE.relative_to(ROOT)}); fix the new ones")
    elif rest < baseline:
        lines.append(f"mypy: {rest} errors outside the strict packages, below the baseline {baseline}: "
                     "lower it with `python ci/mypy_check.py --lower`")
    else:
        lines.append(f"mypy: strict packages clean; {rest} errors elsewhere (baseline {baseline})")
    return not strict and rest <= baseline, lines


def run_mypy(tree: Path) -> str:
    env = {**os.environ, "MYPYPATH": str(tree.parent)}
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(CACHE), "--no-error-summary", "--show-absolute-path",
                           "-p", "mmbench"], cwd=tree.parent, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 2: mypy itself failed (a bad config, a crash)
        raise SystemExit(f"mypy failed (exit {done.returncode}):\n{done.stderr or done.stdout}")
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lower", action="store_true", help="write the current count as the baseline when it is "
                        "lower (default: only check)")
    args = parser.parse_args(argv)
    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))["errors_outside_strict"]
    if TREE.exists():
        shutil.rmtree(TREE)   # only links this script made
    tree = link_tree(TREE)
    errors = parse(run_mypy(tree), tree)
    patterns = strict_patterns()
    ok, lines = verdict(errors, patterns, baseline)
    print("\n".join(lines))
    rest = sum(not is_strict(e.module, patterns) for e in errors)
    if args.lower and ok and rest < baseline:
        BASELINE.write_text(json.dumps({"errors_outside_strict": rest}, indent=2) + "\n", encoding="utf-8")
        print(f"baseline lowered to {rest}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
