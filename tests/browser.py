"""Headless Chromium for the HTML tests, through Playwright.

The Debian ``chromium`` binary is driven by Playwright (``pip install playwright``; no
browser download: ``executable_path`` is the system binary). :func:`launch` starts it
once (use it in a module-scoped fixture); :func:`open_html` opens a file and records
every console message of level warning or error, every uncaught exception and every
request that is not the file itself or a ``data:`` URL (a self-contained page makes
none). If no Chromium (or no Playwright) is found the test skips, unless
FAIRNESS_REQUIRE_BROWSER=1 (set in CI), where it fails.
"""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def _unavailable(why: str):
    if os.environ.get("FAIRNESS_REQUIRE_BROWSER") == "1":
        pytest.fail(f"FAIRNESS_REQUIRE_BROWSER=1 but {why}")
    pytest.skip(why)


def chromium_path() -> str:
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    _unavailable("no chromium binary (apt-get install -y chromium)")


@contextmanager
def launch():
    """A running headless Chromium (Playwright ``Browser``), closed on exit."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install playwright)")
    exe = chromium_path()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Opened:
    page: object
    problems: list[str] = field(default_factory=list)

    def evaluate(self, expression: str):
        return self.page.evaluate(expression)


@contextmanager
def open_html(browser, path: Path, width: int = 1280, height: int = 2000):
    """The page of ``path`` in a fresh context; ``.problems`` lists console warnings
    and errors, uncaught exceptions and any request other than the file itself."""
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    opened = Opened(page)
    url = Path(path).resolve().as_uri()

    def on_console(msg):
        if msg.type in ("error", "warning", "assert"):
            opened.problems.append(f"console.{msg.type}: {msg.text}")

    def on_request(req):
        if req.url != url and not req.url.startswith(("data:", "about:")):
            opened.problems.append(f"request: {req.url}")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: opened.problems.append(f"exception: {exc}"))
    page.on("request", on_request)
    page.goto(url, wait_until="load")
    try:
        yield opened
    finally:
        ctx.close()
