"""The static leaderboard site in a real headless browser (Debian's chromium driven by playwright).

Two models' sample-task results (one with a hostile name) and a third are submitted through the
CLI; the built site must load without console errors, sort columns correctly, show the hostile
name as text without running it, and link every model to its page.
"""
from __future__ import annotations

import functools
import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from leaderboard_helpers import HOSTILE_NAME, make_results, official_registry
from mmbench.cli import main

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium (/usr/bin/chromium) is not installed; "
                                "`apt-get install -y chromium` to run the browser tests")
playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

MODELS = (("model-a", 16), (HOSTILE_NAME, 4), ("zeta", 6))  # hashing widths chosen for distinct P@1 on vg_tiny


@pytest.fixture(scope="module")
def site(vg_tiny, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lbsite")
    official_registry(vg_tiny, root / "official.json")
    for i, (name, dim) in enumerate(MODELS):
        results = make_results(vg_tiny, root / f"results{i}", name=name, dim=dim)
        assert main(["leaderboard", "submit", str(results), "--board", str(root / "board"),
                     "--official", str(root / "official.json")]) == 0
    assert main(["leaderboard", "build", "--board", str(root / "board"), "--out", str(root / "site")]) == 0
    return root / "site"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def base_url(site):
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    pg = context.new_page()
    pg.problems = []  # console errors, page errors, failed requests
    pg.on("console", lambda m: pg.problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    pg.on("pageerror", lambda e: pg.problems.append(f"pageerror: {e}"))
    # A request the next navigation cancels (e.g. the favicon, fetched after the load event) fails with
    # net::ERR_ABORTED; that is the test moving on, not the site. A missing file still shows as HTTP 404.
    pg.on("requestfailed", lambda r: None if "ERR_ABORTED" in (r.failure or "") else
          pg.problems.append(f"request failed: {r.url} ({r.failure})"))
    pg.on("response", lambda r: pg.problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    yield pg
    context.close()


def _rows(page, table_id: str, key: str) -> list[tuple[str, str]]:
    """(model name as displayed, data-value of column `key`) for each row in display order."""
    return page.eval_on_selector(f"#table-{table_id}", """(t, key) => {
        const idx = [...t.tHead.rows[0].cells].findIndex(th => th.dataset.key === key);
        return [...t.tBodies[0].rows].map(r => [r.cells[0].textContent, r.cells[idx].dataset.value]);
    }""", key)


def test_pages_load_without_console_errors(page, base_url):
    page.goto(f"{base_url}/index.html")
    page.wait_for_load_state("load")
    links = page.eval_on_selector_all("#table-visual_grounding td.model a", "as => as.map(a => a.getAttribute('href'))")
    assert len(links) == len(MODELS)
    for href in links:
        page.goto(f"{base_url}/{href}")
        page.wait_for_load_state("load")
        widths = page.eval_on_selector_all("img.figure", "imgs => imgs.map(i => i.naturalWidth)")
        assert widths and all(w > 0 for w in widths), f"{href}: figures did not load"
    assert page.problems == []


def test_sorting_a_column_reorders_rows(page, base_url, site):
    page.goto(f"{base_url}/index.html")
    truth = {r["model"]: r["depth=0.2"] for r in json.loads((site / "data" / "visual_grounding.json").read_text())["rows"]}
    assert len(set(truth.values())) == len(MODELS), "the fixture should give distinct scores, or sorting proves nothing"
    initial = _rows(page, "visual_grounding", "depth=0.2")
    header = "#table-visual_grounding th[data-key='depth=0.2']"
    page.click(f"{header} button")
    assert page.get_attribute(header, "aria-sort") == "descending"
    rows = _rows(page, "visual_grounding", "depth=0.2")
    values = [float(v) for _, v in rows]
    assert values == sorted(values, reverse=True)
    assert {m: float(v) for m, v in rows} == pytest.approx(truth)  # whole rows moved, not just cells
    page.click(f"{header} button")
    assert page.get_attribute(header, "aria-sort") == "ascending"
    ascending = _rows(page, "visual_grounding", "depth=0.2")
    assert [float(v) for _, v in ascending] == sorted(values)
    assert ascending != initial and ascending == rows[::-1]
    page.click("#table-visual_grounding th[data-key='model'] button")
    names = [m for m, _ in _rows(page, "visual_grounding", "model")]
    assert names == sorted(names, key=str.lower)
    assert page.problems == []


def test_hostile_model_name_is_text_and_never_runs(page, base_url):
    page.goto(f"{base_url}/index.html")
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.scripts.length") == 1  # only assets/sort.js
    assert page.evaluate("document.querySelectorAll('td img').length") == 0
    shown = page.eval_on_selector_all("#table-visual_grounding td.model a", "as => as.map(a => a.textContent)")
    assert HOSTILE_NAME in shown
    page.get_by_role("link", name=HOSTILE_NAME).first.click()
    page.wait_for_load_state("load")
    assert page.text_content("#model-name") == HOSTILE_NAME
    assert page.evaluate("window.__pwned") is None
    assert page.problems == []


def test_links_to_model_pages_work(page, base_url):
    page.goto(f"{base_url}/index.html")
    names = page.eval_on_selector_all("#table-mmlongembed td.model a", "as => as.map(a => a.textContent)")
    assert sorted(names) == sorted(n for n, _ in MODELS)
    for i, name in enumerate(names):
        page.locator("#table-mmlongembed td.model a").nth(i).click()
        page.wait_for_load_state("load")
        assert "/models/" in page.url and page.url.endswith(".html")
        assert page.text_content("#model-name") == name
        page.click("text=all boards")
        page.wait_for_load_state("load")
        assert page.url.endswith("/index.html")
    assert page.problems == []


def test_site_works_from_disk_without_a_server(page, site):
    page.goto((site / "index.html").as_uri())
    header = "#table-mmlongembed th[data-key='micro']"
    page.click(f"{header} button")
    values = [float(v) for _, v in _rows(page, "mmlongembed", "micro")]
    assert values == sorted(values, reverse=True)
    assert page.evaluate("window.__pwned") is None
    assert page.problems == []
