"""The HTML card in a real headless Chromium, driven by Playwright.

Playwright drives Debian's Chromium (``executable_path``; no browser download). The
page is opened from a file:// URL; every console message, uncaught exception and
network request is collected; then the rendered DOM is read: the sections, the
plots, every SVG ``<text>`` element's bounding box against its SVG's (no label may
be clipped: the old BBQ panels cut "Race_x_SES/ambig/neg" to "ace_x_SES/ambig/neg"),
unique ids, and a ``<title>``/``aria-label`` on every plot. A screenshot of each
section is written for review (to ``$FAIRNESS_SCREENSHOT_DIR`` when set).

The full-size check renders the committed card of the embedded model
(``docs/cards/embedded-gemma-3-270m/card.yaml``) with the current renderer, so its
real labels are measured.

Needs ``playwright`` (pip) and the Debian package ``chromium``. Without them the
tests skip, unless FAIRNESS_REQUIRE_BROWSER=1 (set in CI), where they fail.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from browser import A11Y_PROBE, CLIPPED_PROBE, Opened, launch, screenshots  # noqa: E402
from card_testdata import USER, make_run  # noqa: E402

from fairness_tests.card import write_cards  # noqa: E402
from fairness_tests.card.files import render_card_files  # noqa: E402

pytestmark = pytest.mark.browser

EIGHT = ["identification", "intended_use", "fairness_scope", "protected_attributes",
         "evaluation_protocol", "metrics", "mitigations", "governance"]


@pytest.fixture(scope="module")
def browser():
    with launch() as b:
        yield b


DOM_PROBE = """() => ({
  sections: [...document.querySelectorAll('section.card-section')].map(s => s.id),
  plots: [...document.querySelectorAll('svg.plot')].map(s => s.dataset.plot),
  ci_bars: document.querySelectorAll('svg.plot line.ci').length,
  heat_cells: document.querySelectorAll('svg[data-plot=heatmap] rect.cell').length,
  bars: document.querySelectorAll('svg[data-plot=histogram] rect.bar').length,
  fail_cells: document.querySelectorAll('td.st-fail').length,
  missing: [...document.querySelectorAll('[data-missing]')].map(e => e.dataset.missing),
  scripts: document.scripts.length,
  h1: document.querySelector('h1').textContent,
  plot_width: Math.max(0, ...[...document.querySelectorAll('svg.plot')].map(
      s => s.getBoundingClientRect().width)),
})"""

def test_full_card_renders_without_console_errors(browser, tmp_path):
    written = write_cards(make_run(), tmp_path / "card", USER)
    opened = Opened(browser, written.paths["html"])
    try:
        dom = opened.page.evaluate(DOM_PROBE)
        assert opened.problems == []
        assert dom["sections"][:8] == EIGHT
        assert dom["scripts"] == 0
        assert dom["h1"] == "Fairness Card — gemma-3-270m"
        kinds = dom["plots"]
        # per-slice rates: one panel per rate metric in the test run (stereotype, refusal,
        # pilot_harm) = 3; BBQ: accuracy, s_amb, s_dis, acc_reinf, acc_counter, sf, df,
        # invalid_rate = 8 panels; heatmaps: stereotype and refusal (pilot_harm has no
        # slice x family rows) = 2; histograms: MFAA and GTC = 2
        assert kinds.count("slice_rates") == 3
        assert kinds.count("bbq") == 8
        assert kinds.count("heatmap") == 2
        assert kinds.count("histogram") == 2
        # heatmap cells: 4 slices x 4 families x 2 metrics = 32; histogram bars 10 per plot
        assert dom["heat_cells"] == 32
        assert dom["bars"] == 20
        # CI bars: slice panels 3 metrics x 4 slices = 12; BBQ 20 rows all with a CI = 20
        assert dom["ci_bars"] == 32
        # three failing verdict cells (F1, F2, F3 of the stereotype rule)
        assert dom["fail_cells"] == 3
        assert dom["missing"] == []
        assert dom["plot_width"] <= 1280
        clip = opened.page.evaluate(CLIPPED_PROBE)
        assert clip["n_texts"] > 100 and clip["clipped"] == []
        a11y = opened.page.evaluate(A11Y_PROBE)
        assert a11y == {"duplicate_ids": [], "n_ids": a11y["n_ids"], "plots_without_title": 0,
                        "plots_without_label": 0, "broken_toc": []}
        shots = screenshots(opened, "test-card", tmp_path, "section.card-section")
        assert len(shots) == 1 + len(dom["sections"])
        assert all(p.stat().st_size > 2_000 for p in shots)
    finally:
        opened.close()


def test_committed_card_has_no_clipped_label_and_unique_ids(browser, tmp_path,
                                                            committed_card):
    """The real card: long BBQ cell labels (Race_x_gender/disambig/nonneg), 22 plots."""
    card = committed_card()
    paths = render_card_files(card, tmp_path / "card", kinds=("html",))
    opened = Opened(browser, paths["html"])
    try:
        assert opened.problems == []
        clip = opened.page.evaluate(CLIPPED_PROBE)
        assert clip["clipped"] == [], clip["clipped"][:5]
        labels = opened.page.evaluate("() => [...document.querySelectorAll("
                                      "'svg[data-plot=bbq] text')].map(t => t.textContent)")
        assert "Race_x_SES/ambig/neg" in labels and "Race_x_gender/disambig/nonneg" in labels
        a11y = opened.page.evaluate(A11Y_PROBE)
        assert a11y["duplicate_ids"] == [] and a11y["broken_toc"] == []
        assert a11y["plots_without_title"] == 0 and a11y["plots_without_label"] == 0
        shots = screenshots(opened, "embedded-gemma-3-270m", tmp_path,
                            "section.card-section")
        assert len(shots) >= 10
    finally:
        opened.close()


def test_incomplete_bbq_only_card_shows_missing_fields(browser, tmp_path):
    written = write_cards(make_run("bbq"), tmp_path / "card")
    opened = Opened(browser, written.paths["html"])
    try:
        dom = opened.page.evaluate(DOM_PROBE)
        assert opened.problems == []
        assert dom["sections"][:8] == EIGHT and dom["sections"][8] == "missing_fields"
        assert "intended_use.in_scope" in dom["missing"]
        assert "governance.owner" in dom["missing"]
        assert "heatmap" not in dom["plots"] and "slice_rates" not in dom["plots"]
        assert dom["plots"].count("histogram") == 2
        assert opened.page.evaluate(CLIPPED_PROBE)["clipped"] == []
    finally:
        opened.close()


def test_probes_detect_console_errors_network_and_clipping(browser, tmp_path):
    """Control: the same checks catch a broken SVG, an external resource, a label
    drawn past the SVG's left edge, and a duplicated id."""
    written = write_cards(make_run("generative"), tmp_path / "card", USER)
    html = written.paths["html"].read_text(encoding="utf-8")
    broken = html.replace("</main>", '<svg class="plot" data-plot="x" width="200" height="40">'
                                      '<path d="M0,0 Lx"/><text x="-20" y="20">ace_x_SES/ambig/neg'
                                      '</text></svg><p id="metrics">again</p>'
                                      '<img src="http://127.0.0.1:9/x.png" alt=""></main>')
    bad = tmp_path / "broken.html"
    bad.write_text(broken, encoding="utf-8")
    opened = Opened(browser, bad)
    try:
        problems = opened.problems
        assert any("path" in p and "attribute d" in p for p in problems), problems
        assert any("127.0.0.1:9" in p for p in problems), problems
        clipped = opened.page.evaluate(CLIPPED_PROBE)["clipped"]
        assert [c["text"] for c in clipped] == ["ace_x_SES/ambig/neg"]
        assert opened.page.evaluate(A11Y_PROBE)["duplicate_ids"] == ["metrics"]
    finally:
        opened.close()
