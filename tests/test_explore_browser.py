"""The run explorer in a real headless Chromium (Playwright, as the card's tests), opened
from a file:// URL with every network request recorded as a problem.

One real run: ``audit --explore`` replaying the committed recordings (BBQ with
``--limit 30`` items per cell; the generations of seed 1: 640), judged by the default rules without
the embedded model's declared expected failures, so that rules fail; and the gate's
two runs (tests/gate_testdata.py: n_flipped answers of Race_x_gender/disambig made
wrong) through ``gate --out``. Screenshots of each view go to
``$FAIRNESS_SCREENSHOT_DIR`` when set (docs/explore/ holds the committed ones).
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from browser import Opened, launch  # noqa: E402
from helpers import copy_store  # noqa: E402

from conftest import once  # noqa: E402
from fairness_tests.cli.main import main  # noqa: E402
from fairness_tests.core.paths import data_path  # noqa: E402

pytestmark = pytest.mark.browser
READY = "body[data-ready='1']"
#: the form controls without a label (an enclosing <label> or an aria-label)
UNLABELLED = """() => [...document.querySelectorAll('select, input, textarea')]
  .filter(e => !e.closest('label') && !(e.getAttribute('aria-label') || '').trim())
  .map(e => e.id || e.outerHTML.slice(0, 60))"""


@pytest.fixture(scope="module")
def browser():
    with launch() as b:
        yield b


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, recorded_store) -> Path:
    """``audit --explore`` of a small replayed run whose BBQ accuracy rules fail."""
    def build(d: Path) -> None:
        rules = d / "thresholds"
        rules.mkdir()
        shutil.copy(data_path("thresholds", "default.yaml"), rules / "default.yaml")
        store = copy_store(recorded_store, d / "s.sqlite")
        rc = main(["audit", "-q", "--benchmarks", "bbq", "generative", "--limit", "30",
                   "--gen-seeds", "1", "--n-boot", "200", "--thresholds", str(rules),
                   "--store", str(store), "--explore", "--out", str(d / "report")])
        assert rc == 1, rc

    return once(tmp_path_factory, "explore-small-run", {"v": 2}, build) / "report"


def _shot(page, name: str) -> None:
    where = os.environ.get("FAIRNESS_SCREENSHOT_DIR")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(Path(where) / f"{name}.png"))


def test_the_card_links_the_explorer(small_run):
    html = (small_run / "card" / "card.html").read_text()
    assert 'href="../explore/index.html"' in html
    assert (small_run / "explore" / "index.html").is_file()


def test_from_a_failing_rule_to_its_items_and_a_slice(browser, small_run):
    o = Opened(browser, small_run / "explore" / "index.html")
    try:
        p = o.page
        p.wait_for_selector(READY)
        assert p.evaluate("window.__explore.firstRender") > 0
        assert p.evaluate(UNLABELLED) == []
        p.select_option("#f-status", "fail")
        rows = p.locator("#vtable tbody tr")
        assert rows.count() >= 1
        _shot(p, "verdicts")
        # the first failing BBQ rule: its cell's items are the records of its cell
        row = p.locator("#vtable tbody tr", has_text="accuracy_floor_disambig").first
        cell = row.locator("td").nth(1).text_content()
        n_items = int(row.locator("td").nth(7).text_content())
        row.locator("button").click()
        assert p.locator("#cell-h").text_content().startswith("accuracy_floor_disambig")
        assert p.evaluate("document.activeElement.id") == "cell-h"     # focus moved
        assert p.locator("#icount").text_content().startswith(f"{n_items} of {n_items} answers")
        dataset, context = cell.split("/")
        # every shown row is of the cell: 30 items per dataset x context x polarity,
        # two polarities, one answer each (plus the rotations of the sampled items)
        assert n_items >= 60
        first = p.locator("#itable tbody tr").first
        assert dataset in first.text_content()
        # filter by a slice: the intersectional group of the item
        select = p.locator("#i-group")
        group = select.locator("option").nth(1).get_attribute("value")
        label = select.locator("option").nth(1).text_content()
        want = int(label.rsplit("(", 1)[1].rstrip(")"))
        select.select_option(group)
        assert p.locator("#icount").text_content().startswith(f"{want} of {n_items} answers")
        assert all(group in r for r in p.locator("#itable tbody tr").all_text_contents())
        assert p.evaluate("window.__explore.lastFilter") >= 0
        assert p.evaluate(UNLABELLED) == []            # the item filters too
        _shot(p, "cell")
        # the item's record as the run stores it, with the prompt the model saw
        p.locator("#itable tbody button").first.click()
        detail = p.locator("#idetail").text_content()
        assert "Answer with one letter (a, b or c)" in detail and "letter_p0" in detail
        # printable: the print view shows the cell, not the verdicts or the controls
        p.emulate_media(media="print")
        assert p.locator("#verdicts-view").is_hidden() and p.locator("#ifilters").is_hidden()
        assert p.locator("#itable").is_visible()
        p.emulate_media(media="screen")
        # keyboard: Escape goes back to the verdicts, focus on the rule's button
        p.keyboard.press("Escape")
        assert p.locator("#verdicts-view").is_visible()
        assert p.evaluate("document.activeElement.textContent") == "accuracy_floor_disambig"
        assert o.problems == []
    finally:
        o.close()


def test_a_generative_cell_filters_by_slice(browser, small_run):
    o = Opened(browser, small_run / "explore" / "index.html")
    try:
        p = o.page
        p.wait_for_selector(READY)
        p.select_option("#f-records", "generative")
        p.locator("#vtable tbody button").first.click()
        select = p.locator("#i-slice")
        assert select.locator("option").count() >= 3          # all + two slices at least
        select.select_option(index=1)
        slice_ = select.input_value()
        shown = p.locator("#itable tbody tr").all_text_contents()
        assert shown and all(slice_ in r for r in shown)
        assert o.problems == []
    finally:
        o.close()


@pytest.mark.slow
def test_two_runs_show_the_changed_answers_of_the_failing_gate_cell(browser, gate_run_dirs,
                                                                    tmp_path):
    out = tmp_path / "gate"
    assert main(["gate", str(gate_run_dirs["base"]), str(gate_run_dirs["cand"]),
                 "--n-boot", "200", "--out", str(out)]) == 1
    o = Opened(browser, out / "explore" / "index.html")
    try:
        p = o.page
        p.wait_for_selector(READY)
        p.locator("#tabs button[data-view=gate]").click()
        failing = p.locator("#gtable tbody tr", has_text="Race_x_gender/disambig") \
            .filter(has=p.locator("td.v-fail"))
        assert failing.count() >= 1
        _shot(p, "gate")
        acc = failing.filter(has_text="accuracy").first
        acc.locator("button").click()
        n = gate_run_dirs["n_flipped"]
        assert p.locator("#xcount").text_content() == f"{n} of {n} changed answers"
        classes = p.locator("#ctable tbody tr")
        assert classes.count() == 1
        assert classes.first.text_content().endswith(str(n))
        assert "stereotyped" in classes.first.text_content()
        assert p.locator("#ktable tbody tr").count() >= 1        # templates that moved
        _shot(p, "changes")
        p.locator("#xtable tbody button").first.click()
        both = p.locator("#xdetail").text_content()
        assert "baseline" in both and "candidate" in both
        assert o.problems == []
    finally:
        o.close()
