"""Every shell and Python snippet of the docs site (docs/*.md) runs as pasted, the how-to guides among them.

The pages run in the order of mkdocs.yml's nav, in one working folder, the way tests/test_readme_snippets.py
runs the README (tests/snippets.py: the marks, the workspace, what each mark checks). A guide may use what an
earlier page of the nav wrote (Add a source continues Add a task), never what a later one writes.
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml

from snippets import KINDS, ROOT, Snippet, exercise, make_workspace, parse_snippets

DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
GUIDES = ("your-own-data", "add-a-task", "add-a-model", "add-a-source", "add-a-statistic", "submit-to-a-board")
TASK_PAGES = {"visual_grounding": "visual-grounding", "multi_source_reasoning": "multi-source-reasoning",
              "logical_summarization": "logical-summarization", "temporal_summarization": "temporal-summarization",
              "flickr_hard_negatives": "flickr-hard-negatives"}


def nav_pages(nav) -> list[str]:
    """The Markdown files mkdocs.yml's nav lists, in order (nested sections flattened)."""
    out: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        out += nav_pages(value) if isinstance(value, list) else [value]
    return out


PAGES = nav_pages(yaml.safe_load(MKDOCS.read_text(encoding="utf-8"))["nav"])
SNIPPETS: list[tuple[str, Snippet]] = [(page, s) for page in PAGES
                                       for s in parse_snippets((DOCS / page).read_text(encoding="utf-8"))]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return make_workspace(tmp_path_factory, "docs")


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert set(PAGES) == on_disk, f"not in the nav: {sorted(on_disk - set(PAGES))}; missing: {sorted(set(PAGES) - on_disk)}"


def test_marks_are_known_and_skips_say_why():
    for page, s in SNIPPETS:
        assert not s.kinds - KINDS, f"docs/{page} line {s.line}: unknown snippet mark {s.kinds - KINDS}"
        assert "skip" not in s.kinds or s.reason, f"docs/{page} line {s.line}: a skipped snippet must say why"


@pytest.mark.parametrize("guide", GUIDES)
def test_each_how_to_guide_is_a_worked_example_that_runs(guide):
    """A guide has runnable blocks (unmarked) in both languages or at least three shell steps."""
    page = f"howto/{guide}.md"
    assert page in PAGES, f"docs/{page} is not in the nav"
    runnable = [s for p, s in SNIPPETS if p == page and not s.kinds]
    assert len(runnable) >= 3, f"docs/{page}: {len(runnable)} runnable blocks; a guide is a worked example"


@pytest.mark.parametrize("task", sorted(TASK_PAGES))
def test_task_pages_state_their_invariants(task):
    """Each task page lists every invariant of builders/checks/<task>.py with its promise, word for word."""
    from mmbench.builders.parts.validity import COMMON_INVARIANTS

    text = (DOCS / "tasks" / f"{TASK_PAGES[task]}.md").read_text(encoding="utf-8")
    promises = {**COMMON_INVARIANTS, **importlib.import_module(f"mmbench.builders.checks.{task}").INVARIANTS}
    for name, promise in promises.items():
        assert re.search(rf"^\| `{re.escape(name)}` \| {re.escape(promise)} \|$", text, re.M), \
            f"docs/tasks/{TASK_PAGES[task]}.md does not state invariant {name!r} as builders/checks/{task}.py does"


@pytest.mark.parametrize("page, snippet", SNIPPETS, ids=[f"{p}:{s.id}" for p, s in SNIPPETS])
def test_snippet(page: str, snippet: Snippet, workspace):
    exercise(snippet, workspace, f"docs/{page}")


def test_nav_order_is_the_run_order():
    """Add a source uses the files Add a task writes, Add a statistic the run of Add a model."""
    order = [PAGES.index(f"howto/{g}.md") for g in GUIDES]
    assert order == sorted(order)
    assert Path(DOCS / "howto" / "add-a-source.md").read_text().count("recipe_task.py") >= 1
