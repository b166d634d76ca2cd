"""Rendering: deterministic bytes, the eight sections, escaping, self-contained HTML."""
from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from card_testdata import USER, make_run  # noqa: E402

from fairness_tests.card.fill import fill_card  # noqa: E402
from fairness_tests.card.files import write_cards  # noqa: E402
from fairness_tests.card.render_html import render_html  # noqa: E402
from fairness_tests.card.render_md import render_markdown  # noqa: E402
from fairness_tests.card.schema import load_card  # noqa: E402
from fairness_tests.card.svg import dot_ci, heatmap, histogram  # noqa: E402
from fairness_tests.run import RunResult  # noqa: E402

SECTIONS = ["1. Model and system identification", "2. Intended use and out-of-scope uses",
            "3. Fairness scope and harm model", "4. Protected attributes and intersectional slices",
            "5. Evaluation protocol", "6. Metrics and decision rules",
            "7. Mitigations and trade-offs", "8. Governance and monitoring"]


def test_same_run_gives_byte_identical_files(tmp_path):
    a = write_cards(make_run(), tmp_path / "a", USER)
    b = write_cards(make_run(), tmp_path / "b", USER)
    for kind in ("yaml", "md", "html"):
        assert a.paths[kind].read_bytes() == b.paths[kind].read_bytes(), kind


def test_saved_and_reloaded_run_gives_the_same_card(tmp_path):
    run = make_run()
    run.save(tmp_path / "run")
    a = write_cards(run, tmp_path / "a", USER)
    b = write_cards(RunResult.load(tmp_path / "run"), tmp_path / "b", USER)
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
