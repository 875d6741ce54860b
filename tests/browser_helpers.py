"""Headless Chromium for the browser tests: Debian's chromium driven by playwright, a static folder served
on loopback, and a page that records console errors, page errors and failed requests in `page.problems`.

Used by tests/test_leaderboard_site.py and tests/test_docs_site.py, which import the fixtures `base_url`,
`browser` and `page` from here. The tests skip, saying why, where
/usr/bin/chromium or the playwright package is missing (`.ci/run` installs chromium; never `playwright install`).
"""
from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
NEEDS_CHROMIUM = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium (/usr/bin/chromium) is not "
                                    "installed; `apt-get install -y chromium` to run the browser tests")


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve `folder` on a free loopback port; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def chromium(playwright_api):
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def watched_page(browser):
    """A fresh page whose `problems` lists console errors and warnings, page errors and failed requests."""
    context = browser.new_context()
    pg = context.new_page()
    pg.problems = []
    pg.on("console", lambda m: pg.problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    pg.on("pageerror", lambda e: pg.problems.append(f"pageerror: {e}"))
    # A request the next navigation cancels (e.g. the favicon, fetched after the load event) fails with
    # net::ERR_ABORTED; that is the test moving on, not the site. A missing file still shows as HTTP 404.
    pg.on("requestfailed", lambda r: None if "ERR_ABORTED" in (r.failure or "") else
          pg.problems.append(f"request failed: {r.url} ({r.failure})"))
    pg.on("response", lambda r: pg.problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    try:
        yield pg
    finally:
        context.close()


# The fixtures both browser tests use; a test module imports them beside its own `site` fixture (the folder
# to serve) and its own skip marks.
@pytest.fixture(scope="module")
def base_url(site):
    with serve(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    with chromium(playwright_api) as b:
        yield b


@pytest.fixture
def page(browser):
    with watched_page(browser) as pg:
        yield pg
