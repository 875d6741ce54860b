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


def test_navigation_has_at_most_fifteen_top_level_entries():
    """Issue 37 #3: the nav had 34 flat entries with near-duplicates; related pages now share a section."""
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    titles = [next(iter(e)) if isinstance(e, dict) else e for e in nav]
    assert len(titles) <= 15, titles
    sections = {next(iter(e)): [next(iter(p)) if isinstance(p, dict) else p for p in next(iter(e.values()))]
                for e in nav if isinstance(e, dict) and isinstance(next(iter(e.values())), list)}
    # issue 47 merged the near-duplicates: one reliability page, one statistics page, the mteb export inside interop
    assert "Reliability: promises, guards, errors" in sections["Reliability and performance"]
    assert "Statistics, reports, rank intervals and floors" in sections["Statistics"]
    assert {"mteb and Hugging Face": "interop.md"} in nav


def test_site_works_from_disk(page, site):
    """mkdocs.yml says the site works from disk: a page opened as file:// and a link followed from it must
    land on a page, not on a directory listing."""
    page.goto((site / "index.html").as_uri())
    page.wait_for_load_state("load")
    href = page.locator("nav.md-nav--primary a[href*='getting-started']").first.get_attribute("href")
    assert href.endswith(".html"), href
    page.click("nav.md-nav--primary a[href*='getting-started']")
    page.wait_for_load_state("load")
    assert page.url.endswith("getting-started.html") and page.locator("article h1").count() == 1
    page.goto((site / "tasks" / "index.html").as_uri())
    page.locator("article a[href*='visual-grounding']").first.click()
    page.wait_for_load_state("load")
    assert "Visual Grounding" in page.inner_text("article h1")


def test_a_task_page_shows_its_invariants(page, base_url):
    page.goto(f"{base_url}/tasks/visual-grounding.html")
    page.wait_for_load_state("load")
    assert "Visual Grounding" in page.inner_text("article h1")
    table = page.inner_text("article")
    assert "anchor_unique" in table and "The validity report." in table
    assert page.problems == []


def test_the_api_reference_is_rendered_from_the_docstrings(page, base_url):
    page.goto(f"{base_url}/api.html")
    page.wait_for_load_state("load")
    for name in ("mmbench.api.evaluate", "mmbench.api.load_model", "mmbench.tasks.spec.TaskSpec",
                 "mmbench.models.base.EmbeddingModel", "mmbench.data.documents.Document"):
        assert page.locator(f"[id='{name}']").count() == 1, f"the API reference has no entry {name}"
    text = page.inner_text("article")
    assert "Evaluate model (an EmbeddingModel, or a name for load_model) on tasks." in text   # evaluate's docstring
    assert "the task version, recorded in every pool set and result" in text                   # TaskSpec's
    assert page.problems == []


def test_formulas_are_rendered_as_mathml_not_left_as_tex(page, base_url):
    page.goto(f"{base_url}/statistics-and-reports.html")
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


def test_fractions_in_tables_are_legible(page, base_url):
    """Issue 37 #3: a fraction in the metrics table rendered about 6 px high (a compact-style fraction in
    Material's small table text); its numerator and denominator are now at least table-text size."""
    page.goto(f"{base_url}/statistics-and-reports.html")
    page.wait_for_load_state("load")
    # [font size of the numerator, height of numerator, of denominator] of each fraction not asked to be small
    # (\\tfrac sets displaystyle="false")
    sizes = page.evaluate("""() => [...document.querySelectorAll('article table mfrac')]
        .filter(f => !f.closest('[displaystyle="false"]'))
        .map(f => [parseFloat(getComputedStyle(f.children[0]).fontSize),
                   ...[...f.children].map(c => c.getBoundingClientRect().height)])""")
    assert len(sizes) >= 2, "the statistics table should hold fractions"
    text = page.evaluate("parseFloat(getComputedStyle(document.querySelector('article table td')).fontSize)")
    for font, numerator, denominator in sizes:
        assert font >= text, f"a fraction's parts are set smaller ({font} px) than the table's text ({text} px)"
        assert min(numerator, denominator) >= 7, (numerator, denominator)  # was 4-6 px


def test_search_finds_a_command(page, base_url):
    """Search runs in a web worker over the prebuilt index; on a loaded machine it may take a while to start."""
    page.goto(f"{base_url}/index.html")
    page.wait_for_load_state("load")
    page.click("input.md-search__input")          # the header's search box (desktop width)
    # "verify backend", not "verify-backend": typed key by key, the latter passes through "verify-", an invalid search
    # query whose console warning appears or not with the search worker's timing
    for query, where in (("sweep", "running-at-scale"), ("verify backend", "verify-backend"),
                         ("leaderboard submit", "leaderboards")):
        page.fill("input.md-search__input", "")
        page.locator("input.md-search__input").press_sequentially(query)   # typed: search listens to keys
        page.wait_for_function("""where => [...document.querySelectorAll('.md-search-result__item a')]
                                   .some(a => a.getAttribute('href').includes(where))""", arg=where, timeout=90000)
    assert page.problems == []
