"""Issue 22, "a card a reviewer can print": the verdict tables open, plots draw the rules'
bounds and share one scale per unit across panels.

Expected values come from the hand-written test run (tests/card_testdata.py) by the
arithmetic written next to each assertion; positions are read back from the SVG's own
tick labels (a value's x is the linear interpolation between two ticks).
"""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from card_testdata import USER, make_run  # noqa: E402

from fairness_tests.card.fill import fill_card  # noqa: E402
from fairness_tests.card.render_html import render_html  # noqa: E402
from fairness_tests.card.render_md import render_markdown  # noqa: E402
from fairness_tests.rules.evaluate import VERDICT_COLUMNS  # noqa: E402

TICK = re.compile(r'<text x="([0-9.]+)" y="[0-9.]+" font-size="10" fill="#6b7785" '
                  r'text-anchor="middle">([^<]+)</text>')
BOUND = re.compile(r'<line class="bound" data-bound="([-0-9.e]+)" x1="([0-9.]+)" '
                   r'y1="([0-9.]+)" x2="[0-9.]+" y2="([0-9.]+)"')


def _svgs(html: str, kind: str) -> dict[str, str]:
    """The SVGs of one plot kind by their title."""
    out = {}
    for m in re.finditer(rf'<svg [^>]*data-plot="{kind}".*?</svg>', html, re.S):
        title = re.search(r"<title>([^<]*)</title>", m.group(0)).group(1)
        out[title] = m.group(0)
    return out


def _ticks(svg: str) -> list[tuple[float, str]]:
    return [(float(x), t) for x, t in TICK.findall(svg)]


def _x_of(svg: str, value: float) -> float:
    """Where ``value`` lies on the panel's axis, from its first and last tick."""
    ticks = _ticks(svg)
    (x0, t0), (x1, t1) = ticks[0], ticks[-1]
    return x0 + (value - float(t0)) / (float(t1) - float(t0)) * (x1 - x0)


@pytest.fixture(scope="module")
def html():
    return render_html(fill_card(make_run(), USER))


def test_rate_panels_under_rules_share_one_axis_and_draw_the_bound(html):
    panels = _svgs(html, "slice_rates")
    # stereotype (a worst-slice rule) and refusal (a refusal-gap rule) are the bounded
    # rates: values up to 0.23 + 0.03 = 0.26, bound 0.05 -> one axis 0..0.3, step 0.1
    # (the old panels: stereotype 0..0.3, refusal 0..0.06)
    for metric in ("stereotype", "refusal"):
        assert [t for _, t in _ticks(panels[metric])] == ["0", "0.1", "0.2", "0.3"], metric
    # the worst-slice bound 0.05 (max over slices): one line over every row, at 0.05
    lines = BOUND.findall(panels["stereotype"])
    assert len(lines) == 1 and lines[0][0] == "0.05"
    assert float(lines[0][1]) == pytest.approx(_x_of(panels["stereotype"], 0.05), abs=0.15)
    assert "\u2264 0.05</text>" in panels["stereotype"]
    # refusal_gap bounds max - min, not a value: not drawn, and the caption says so
    assert BOUND.findall(panels["refusal"]) == []
    cap = re.search(r'data-figure="slice_rates".*?<figcaption>([^<]*)</figcaption>', html,
                    re.S).group(1)
    assert "dashed: the bounds of worst_slice_stereotype_per_family;" in cap
    assert "refusal_gap (range over slice &lt;= 0.1)" in cap


def test_bbq_bounds_sit_on_the_rows_of_their_cells(html):
    panels = _svgs(html, "bbq")
    # accuracy_floor_disambig (CI low >= 0.5) on the two disambiguated rows only: rows 1
    # and 3 of ambig, disambig, ambig, disambig (row height 22 from the plot's top)
    acc = BOUND.findall(panels["accuracy"])
    assert [v for v, *_ in acc] == ["0.5", "0.5"]
    tops = sorted(float(y0) for _, _, y0, _ in acc)
    assert tops[1] - tops[0] == pytest.approx(2 * 22)
    assert "CI low \u2265 0.5</text>" in panels["accuracy"]
    # sdis_bound is abs: lines at -0.1 and +0.1 on its one cell (Race_x_gender/disambig)
    sdis = BOUND.findall(panels["s_dis"])
    assert sorted(float(v) for v, *_ in sdis) == [-0.1, 0.1]
    for v, x, _, _ in sdis:
        assert float(x) == pytest.approx(_x_of(panels["s_dis"], float(v)), abs=0.15)
    assert "CI high |x| \u2264 0.1</text>" in panels["s_dis"] and ">-0.1</text>" in panels["s_dis"]
    # df_bound on its one cell (Race_x_SES/ambig), the first row
    assert [v for v, *_ in BOUND.findall(panels["df"])] == ["1"]


def test_unbounded_rates_share_their_own_axis(html):
    panels = _svgs(html, "bbq")
    # acc_reinf, acc_counter, sf, invalid_rate: rates no rule bounds; the largest value
    # is acc_reinf + its CI, 0.62 + 0.08 = 0.70 -> 0..0.8 step 0.2 for all four
    # (the old sf panel: 0..0.02)
    want = ["0", "0.2", "0.4", "0.6", "0.8"]
    for metric in ("acc_reinf", "acc_counter", "sf", "invalid_rate"):
        assert [t for _, t in _ticks(panels[metric])] == want, metric


def test_heatmaps_share_one_colour_scale_and_outline_cells_over_the_bound(html):
    maps = _svgs(html, "heatmap")
    # largest slice x family value: woman_Muslim F2 = 0.23 * 1.6 = 0.368, for both maps
    # (the old refusal map ran to its own maximum 0.03)
    for title in ("stereotype rate: slice x prompt family", "refusal rate: slice x prompt family"):
        assert "colour: 0 (white) to 0.368 (dark red)" in maps[title]
    # cells above 0.05 = STEREO[s] * factor[f] > 0.05: man_Christian 0.08 (F2); man_Muslim
    # 0.11, 0.176, 0.088; woman_Christian 0.08, 0.128, 0.064; woman_Muslim 0.23, 0.368,
    # 0.184 -> 10
    stereo = maps["stereotype rate: slice x prompt family"]
    assert stereo.count('class="cell over"') == 10
    assert "outlined: above the bound 0.05 of worst_slice_stereotype_per_family" in stereo
    assert 'class="cell over"' not in maps["refusal rate: slice x prompt family"]


def test_histograms_share_the_count_axis_and_draw_the_floor_and_the_mean():
    run = make_run("bbq")
    extra = pd.DataFrame([{"rule": "mfaa_floor", "metric": "mfaa_mean", "cell": "Race_x_SES",
                           "value": 78.5, "ci_low": math.nan, "ci_high": math.nan,
                           "compared": "value", "op": ">=", "bound": 90.0, "status": "fail",
                           "rationale": "r", "why": "", "abs": False, "across": "",
                           "reduce": ""}], columns=VERDICT_COLUMNS)
    run.verdicts = pd.concat([run.verdicts, extra], ignore_index=True)
    html = render_html(fill_card(run, USER))
    hists = _svgs(html, "histogram")
    mfaa, gtc = hists["MFAA% per item (6 items)"], hists["GTC% per item (6 items)"]
    # MFAA [100, 100, 95, 85, 50, 25]: 3 items in the last bin; GTC [100, 0, 95, 10, 50,
    # 25]: 2 there. One count axis (0..3 for both), so GTC's bar is 2/3 of MFAA's
    # (the old histograms each ran to their own maximum: both bars full height)
    last = [float(re.findall(r'class="bar"[^>]*height="([0-9.]+)"', h)[-1]) for h in (mfaa, gtc)]
    assert last[1] == pytest.approx(last[0] * 2 / 3, rel=0.01)
    # the floor 90 (mfaa_floor) and the mean (455 / 6 = 75.8)
    assert "rule: mean per cell \u2265 90</text>" in mfaa and "mean 75.8</text>" in mfaa
    assert 'class="bound"' not in gtc and "mean 46.7</text>" in gtc      # 280 / 6


def _many_failures():
    """The test run plus 20 failing rules and 20 expected failures: 43 notable verdicts,
    45 rules (old: folded tables of 45 and 43 rows)."""
    run = make_run()
    rows = []
    for i in range(20):
        for status in ("fail", "expected_fail"):
            rows.append({"rule": f"extra_{status}_{i:02d}", "metric": "accuracy",
                         "cell": f"cell{i}", "value": 0.1, "ci_low": 0.05, "ci_high": 0.15,
                         "compared": "value", "op": ">=", "bound": 0.5, "status": status,
                         "rationale": "r", "why": "w", "abs": False, "across": "",
                         "reduce": ""})
    run.verdicts = pd.concat([run.verdicts, pd.DataFrame(rows, columns=VERDICT_COLUMNS)],
                             ignore_index=True)
    return run


def test_rules_and_failing_verdicts_are_never_folded():
    html = render_html(fill_card(_many_failures(), USER))
    folded = "".join(re.findall(r"<details>.*?</details>", html, re.S))
    shown = re.sub(r"<details>.*?</details>", "", html, flags=re.S)
    # 23 fail (3 + 20) and 21 expected_fail (1 + 20) verdict cells, and the rules whose
    # outcome they make (20 fail; df_bound + 20 expected_fail), all outside <details>
    assert shown.count('<td class="status st-fail">') == 23 + 20
    assert shown.count('<td class="status st-expected_fail">') == 21 + 21
    assert "st-fail" not in folded and "st-expected_fail" not in folded
    # every decision rule is listed open: 5 of the test run + 40
    rules = re.search(r'<h3 id="decision_rules">.*?</table>', shown, re.S).group(0)
    assert rules.count("<tr>") == 1 + 45
    md = render_markdown(fill_card(_many_failures(), USER))
    assert md.count("| **FAIL** |") == 23 + 20            # verdicts and rules, inline
