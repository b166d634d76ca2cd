"""Headless Chromium for the HTML tests (the card, the compare report), via Playwright.

Playwright drives Debian's Chromium (``executable_path``; no browser download).
:func:`launch` starts it once (use it in a module-scoped fixture); :class:`Opened`
opens a file:// page and collects every console warning or error, uncaught exception
and network request while it loads. The probes read the rendered DOM:
:data:`CLIPPED_PROBE` (every SVG ``<text>``'s box against its SVG's: no label may be
clipped) and :data:`A11Y_PROBE` (unique ids, a ``<title>`` and an ``aria-label`` on
every plot, table-of-contents links that resolve). :func:`screenshots` writes one
PNG per section for review (to ``$FAIRNESS_SCREENSHOT_DIR`` when set).

Needs ``playwright`` (pip) and the Debian package ``chromium``. Without them the
tests skip, unless FAIRNESS_REQUIRE_BROWSER=1 (set in CI), where they fail.
"""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

LAUNCH_TIMEOUT_MS = 120_000     # starting Chromium on a loaded machine
ACTION_TIMEOUT_MS = 60_000      # each page action (load, screenshot, locator)
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]       # plus --headless (headless=True)


def _unavailable(why: str):
    if os.environ.get("FAIRNESS_REQUIRE_BROWSER") == "1":
        pytest.fail(f"FAIRNESS_REQUIRE_BROWSER=1 but {why}")
    pytest.skip(why)


@contextmanager
def launch():
    """A running headless Chromium (a Playwright ``Browser``), closed on exit."""
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415  optional ([test] extra)
    except ImportError:
        _unavailable("playwright is not installed (pip install 'fairness-tests[test]')")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        _unavailable("no chromium binary on PATH (apt-get install -y chromium)")
    with sync_playwright() as p:
        # explicit bounds: a Playwright timeout names the action and what it waited for
        b = p.chromium.launch(executable_path=exe, headless=True, args=FLAGS,
                              timeout=LAUNCH_TIMEOUT_MS)
        try:
            yield b
        finally:
            b.close()


class Opened:
    """A page with everything it reported while loading."""

    def __init__(self, browser, path: Path, width: int = 1280, height: int = 900):
        self.problems: list[str] = []
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.page.set_default_timeout(ACTION_TIMEOUT_MS)     # goto, screenshot, locators
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.problems.append(f"exception: {e}"))
        self.page.on("request", self._request)
        self.page.goto(Path(path).resolve().as_uri(), wait_until="load")
        self.page.wait_for_timeout(200)      # late console messages

    def _console(self, msg) -> None:
        if msg.type in ("error", "warning", "assert"):
            self.problems.append(f"console.{msg.type}: {msg.text}")

    def _request(self, req) -> None:
        if not req.url.startswith(("file://", "data:", "about:")):
            self.problems.append(f"network request: {req.url}")

    def close(self) -> None:
        self.page.close()


# every <text> of every SVG: is its rendered box inside the SVG's box?
CLIPPED_PROBE = """() => {
  const out = [];
  let n = 0;
  for (const svg of document.querySelectorAll('svg')) {
    // a folded <details> table hides nothing here: plots are never folded
    const r = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('text')) {
      n += 1;
      const b = t.getBoundingClientRect();
      if (b.left < r.left - 0.5 || b.right > r.right + 0.5 ||
          b.top < r.top - 0.5 || b.bottom > r.bottom + 0.5)
        out.push({plot: svg.dataset.plot, text: t.textContent,
                  over: [r.left - b.left, b.right - r.right, r.top - b.top, b.bottom - r.bottom]
                        .map(x => Math.round(x * 10) / 10)});
    }
  }
  return {n_texts: n, clipped: out};
}"""

A11Y_PROBE = """() => {
  const ids = [...document.querySelectorAll('[id]')].map(e => e.id);
  return {
    duplicate_ids: ids.filter((x, i) => ids.indexOf(x) !== i),
    n_ids: ids.length,
    plots_without_title: [...document.querySelectorAll('svg.plot')].filter(
        s => !(s.firstElementChild && s.firstElementChild.tagName === 'title'
               && s.firstElementChild.textContent.trim())).length,
    plots_without_label: [...document.querySelectorAll('svg.plot')].filter(
        s => s.getAttribute('role') !== 'img'
             || !(s.getAttribute('aria-label') || '').trim()).length,
    broken_toc: [...document.querySelectorAll('nav.toc a')]
        .map(a => a.getAttribute('href').slice(1))
        .filter(id => !document.getElementById(id)),
  };
}"""


def screenshots(opened: Opened, name: str, tmp_path: Path, sections: str) -> list[Path]:
    """One PNG per element matching the CSS selector ``sections`` (and the header above
    the first), for review."""
    out_dir = Path(os.environ.get("FAIRNESS_SCREENSHOT_DIR") or tmp_path / "screenshots") / name
    out_dir.mkdir(parents=True, exist_ok=True)
    page = opened.page
    paths = []
    top = page.evaluate(f"() => document.querySelector({sections!r})"
                        ".getBoundingClientRect().top + window.scrollY")
    head = out_dir / "00-header.png"
    page.screenshot(path=str(head), clip={"x": 0, "y": 0, "width": 1280, "height": max(50, top)},
                    full_page=True)
    paths.append(head)
    found = page.locator(sections)
    for i in range(found.count()):
        sec = found.nth(i)
        p = out_dir / f"{i + 1:02d}-{sec.get_attribute('id')}.png"
        sec.screenshot(path=str(p))
        paths.append(p)
    return paths
