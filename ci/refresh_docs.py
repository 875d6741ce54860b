"""Refresh the numbers the docs print, after the reproduction matrix or an official hash changed: one command.

    python ci/refresh_docs.py            # figures quoted from the matrix, then the compared output blocks
    python ci/refresh_docs.py --figures  # only the figures quoted from the matrix (no command runs)
    python ci/refresh_docs.py --only getting-started   # only the snippets whose test id matches (pytest -k)

1. Every figure quoted as `<!--repro:TASK/MODEL/LIMIT/FIGURE-->0.458` in README.md and docs/ is rewritten from
   mmbench/leaderboards/data/reproduction_matrix.json at the decimals it shows (`mmbench reproduce
   --write-matrix ...` writes the matrix; tests/test_docs_outputs.py checks the two agree), and every sample size
   quoted as `<!--sample:TASK/items-->7,200` (or `/candidates`, or the build's seconds as `/build_seconds`) from
   leaderboards/data/sample_runtimes.json, the file `mmbench list tasks` reads: one source for the sizes and
   build times every page states.
2. The snippet tests run with MMBENCH_DOCS_REFRESH=1: every output block shown under a command is compared with
   what the command prints, and each stale line is rewritten with the printed one (tests/shown_output.py).
Review the diff (`git diff README.md docs/`) before committing it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / "leaderboards" / "data" / "reproduction_matrix.json"
RUNTIMES = ROOT / "leaderboards" / "data" / "sample_runtimes.json"
MARK = re.compile(r"<!--(?P<key>(?:repro|sample):[a-z0-9_./-]+)-->(?P<value>-?\d[\d,]*(?:\.\d+)?)")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def matrix_figures(path: Path = MATRIX, runtimes: Path = RUNTIMES) -> dict[str, float]:
    """`repro:task/model/limit/figure` -> the matrix's value (limit: `all` or the number), and
    `sample:task/items` / `sample:task/candidates` / `sample:task/build_seconds` -> the shipped sample sizes and
    build times (perf/sample_runtimes.py measures them)."""
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
    out = {f"repro:{r['task']}/{r['model']}/{'all' if r['limit'] is None else r['limit']}/{name}": fig["value"]
           for r in rows for name, fig in r["figures"].items()}
    for task, f in json.loads(runtimes.read_text(encoding="utf-8"))["tasks"].items():
        out.update({f"sample:{task}/items": f["items"], f"sample:{task}/candidates": f["candidates"],
                    f"sample:{task}/build_seconds": f["build_seconds"]})
    return out


def figure_text(value: float, like: str) -> str:
    """`value` with as many decimals as `like` shows (thousands grouped where `like` groups them)."""
    decimals = len(like.split(".", 1)[1]) if "." in like else 0
    return f"{value:,.{decimals}f}" if "," in like or (decimals == 0 and abs(value) >= 1000) else f"{value:.{decimals}f}"


def quoted_figures(files: list[Path] | None = None) -> list[tuple[Path, int, str, str]]:
    """(file, line, key, shown value) of every matrix figure quoted in the pages."""
    out = []
    for path in files or pages():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            out += [(path, number, m.group("key"), m.group("value")) for m in MARK.finditer(line)]
    return out


def refresh_figures() -> int:
    figures, changed = matrix_figures(), 0
    for path in pages():
        text = path.read_text(encoding="utf-8")

        def fill(m: re.Match) -> str:
            key = m.group("key")
            if key not in figures:
                raise SystemExit(f"{path}: {key} is not in the reproduction matrix {MATRIX}")
            return f"<!--{key}-->{figure_text(figures[key], m.group('value'))}"

        new = MARK.sub(fill, text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed += 1
    return changed


def parse_args(argv: list[str]):
    import argparse

    parser = argparse.ArgumentParser(prog="python ci/refresh_docs.py", description=__doc__.split("\n\n")[0],
                                     epilog="Review the diff (`git diff README.md docs/`) before committing it.")
    parser.add_argument("--figures", action="store_true",
                        help="only the figures quoted from the matrix and the sample sizes (no command runs)")
    parser.add_argument("--only", metavar="EXPR", default=None,
                        help="only the snippets whose test id matches EXPR (a pytest -k expression, e.g. "
                             "getting-started)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)   # --help prints the usage and exits before anything is rewritten
    print(f"figures from the matrix: {refresh_figures()} page(s) rewritten")
    if args.figures:
        return 0
    env = {**os.environ, "MMBENCH_DOCS_REFRESH": "1"}
    select = f"test_snippet and ({args.only})" if args.only else "test_snippet"
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-q", "tests/test_docs_snippets.py",
                           "tests/test_readme_snippets.py", "-k", select, "--timeout", "3000"], cwd=ROOT, env=env)
    print("output blocks: stale lines rewritten; see `git diff README.md docs/`"
          if done.returncode == 0 else "some snippets still fail (read the test output above)")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
