"""The documentation site, built with mkdocs as CI builds it, in a real headless browser.

The home page, a task page and the API reference render without console errors or failed requests,
Material's search (which runs in the browser, with no server) finds a command, and formulas are MathML the
browser lays out (no TeX left on the page).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from browser_helpers import NEEDS_CHROMIUM, base_url, browser, page  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[1]

pytestmark = NEEDS_CHROMIUM
playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs-site") / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
                          timeout=300)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-3000:]}"
    return out


def test_home_page_renders_with_its_navigation(page, base_url):
    page.goto(f"{base_url}/index.html")
    page.wait_for_load_state("load")
    assert page.title().startswith("mmbench")
    assert page.inner_text("article h1").rstrip("¶") == "mmbench"
    nav = page.inner_text("nav.md-nav--primary")
    for entry in ("Getting started", "Visual Grounding", "How-to guides", "API reference"):
        assert entry in nav, f"the navigation lacks {entry!r}"
    assert page.problems == []


def test_a_task_page_shows_its_invariants(page, base_url):
    page.goto(f"{base_url}/tasks/visual-grounding/")
    page.wait_for_load_state("load")
    assert "Visual Grounding" in page.inner_text("article h1")
    table = page.inner_text("article")
    assert "anchor_unique" in table and "The validity report." in table
    assert page.problems == []


def test_the_api_reference_is_rendered_from_the_docstrings(page, base_url):
    page.goto(f"{base_url}/api/")
    page.wait_for_load_state("load")
    for name in ("mmbench.api.evaluate", "mmbench.api.load_model", "mmbench.tasks.spec.TaskSpec",
                 "mmbench.models.base.EmbeddingModel", "mmbench.data.documents.Document"):
        assert page.locator(f"[id='{name}']").count() == 1, f"the API reference has no entry {name}"
    text = page.inner_text("article")
    assert "Evaluate model (an EmbeddingModel, or a name for load_model) on tasks." in text   # evaluate's docstring
    assert "the task version, recorded in every pool set and result" in text                   # TaskSpec's
    assert page.problems == []


def test_formulas_are_rendered_as_mathml_not_left_as_tex(page, base_url):
    page.goto(f"{base_url}/statistics-and-reports/")
    page.wait_for_load_state("load")
    formulas = page.locator("article .arithmatex math")
    assert formulas.count() >= 20
    widths = page.evaluate("Array.from(document.querySelectorAll('article .arithmatex math'))"
                           ".map(m => m.getBoundingClientRect().width)")
    assert min(widths) > 0, "a formula is not laid out"
    text = page.inner_text("article")
    assert "\\frac" not in text and "\\(" not in text and "\\binom" not in text
    tex = page.locator("article .arithmatex").first.get_attribute("data-tex")
    assert tex == "n"   # the first formula of the page, its TeX kept for copying
    assert page.problems == []


def test_search_finds_a_command(page, base_url):
    """Search runs in a web worker over the prebuilt index; on a loaded machine it may take a while to start."""
    page.goto(f"{base_url}/index.html")
    page.wait_for_load_state("load")
    page.click("input.md-search__input")          # the header's search box (desktop width)
    for query, where in (("sweep", "running-at-scale"), ("verify-backend", "verify-backend"),
                         ("leaderboard submit", "leaderboards")):
        page.fill("input.md-search__input", "")
        page.locator("input.md-search__input").press_sequentially(query)   # typed: search listens to keys
        page.wait_for_function("""where => [...document.querySelectorAll('.md-search-result__item a')]
                                   .some(a => a.getAttribute('href').includes(where))""", arg=where, timeout=90000)
    assert page.problems == []
