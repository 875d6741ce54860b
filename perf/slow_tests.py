"""Write tests/slow_tests.txt from a pytest run's `--durations=0` report: the tests `pytest -m "not slow"` skips.

    python -m pytest --durations=0 -q > /tmp/durations.txt
    python perf/slow_tests.py /tmp/durations.txt --budget 200

Tests are taken slowest first until what is left (setup + call time of every other test) fits the budget in
seconds; a parametrised test's cases are listed one by one. The budget is the fast loop's time on the machine
that ran the report, less pytest's own start-up and collection.
"""
from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s+(\S+)")
OUT = Path(__file__).resolve().parent.parent / "tests" / "slow_tests.txt"


def durations(report: str) -> dict[str, float]:
    """Seconds per test node id (setup, call and teardown added), from pytest's durations section."""
    total: dict[str, float] = defaultdict(float)
    for line in report.splitlines():
        m = LINE.match(line)
        if m:
            total[m.group(3)] += float(m.group(1))
    return dict(total)


# files whose tests run in order and read what earlier ones wrote (the README's and the docs' snippets): one of
# their tests is never skipped alone, the whole file is
ORDERED_FILES = ("tests/test_docs_snippets.py", "tests/test_readme_snippets.py")


def slowest_until(times: dict[str, float], budget: float) -> list[str]:
    """The slowest node ids (or whole ordered files) whose removal brings the rest's total under `budget` seconds."""
    rest = sum(times.values())
    chosen: list[str] = []
    for node, seconds in sorted(times.items(), key=lambda kv: (-kv[1], kv[0])):
        if rest <= budget:
            break
        if any(node.startswith(c) for c in chosen):
            continue
        whole = next((f for f in ORDERED_FILES if node.startswith(f + "::")), None)
        if whole:
            chosen.append(whole)
            rest -= sum(t for n, t in times.items() if n.startswith(whole + "::"))
            continue
        chosen.append(node)
        rest -= seconds
    return sorted(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="output of `pytest --durations=0`")
    parser.add_argument("--budget", type=float, default=200.0, help="seconds the fast loop's tests may take")
    args = parser.parse_args()
    times = durations(args.report.read_text())
    chosen = slowest_until(times, args.budget)
    kept = sum(t for n, t in times.items() if not n.startswith(tuple(chosen)))
    OUT.write_text("# the slowest tests, marked `slow` by tests/conftest.py; written by perf/slow_tests.py\n"
                   f"# {len(chosen)} of {len(times)} tests; the rest take {kept:.0f} s of test time\n"
                   + "".join(f"{n}\n" for n in chosen))
    print(f"{len(chosen)} of {len(times)} tests marked slow; the rest take {kept:.0f} s "
          f"(all: {sum(times.values()):.0f} s); wrote {OUT}")


if __name__ == "__main__":
    main()
