"""Functions on the main path stay short: none over 60 lines in the runner's and the reports' packages."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 60
PACKAGES = ("benchmark/running", "benchmark/reports")


def long_functions(source: str, limit: int = LIMIT) -> list[tuple[str, int]]:
    """(name, lines) of every function or method, nested ones included, longer than `limit` lines."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno is not None and node.end_lineno - node.lineno + 1 > limit]


def test_a_long_function_is_found_nested_or_not():
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT))
    assert long_functions(f"def f():\n{body}") == [("f", LIMIT + 1)]
    assert long_functions(f"class C:\n    def g(self):\n    {body.replace(chr(10), chr(10) + '    ')}") != []
    assert long_functions("def h():\n    return 1\n") == []


def test_no_function_over_the_limit_in_running_and_reports():
    found = [f"{path.relative_to(ROOT)}: {name} ({n} lines)" for package in PACKAGES
             for path in sorted((ROOT / package).rglob("*.py"))
             for name, n in long_functions(path.read_text(encoding="utf-8"))]
    assert found == []
