"""The pure parts of ``compare``: ranks from separations, two-sided p-values, the
report's number formatting and the two new SVG plot kinds (no run directory needed)."""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pandas as pd
import pytest

from fairness_tests.card import svg
from fairness_tests.compare.pairwise import PAIR_COLUMNS, ranking, two_sided
from fairness_tests.compare.report import _units
from fairness_tests.compare.tables import fmt, fmt_ci, fmt_count_pct
from fairness_tests.core.registry import default_clusters
from fairness_tests.pipeline.benchmark import families

NS = {"s": "http://www.w3.org/2000/svg"}


def _pair(a, b, va, vb, separated, metric="accuracy", better="higher"):
    row = dict.fromkeys(PAIR_COLUMNS, float("nan"))
    row.update(metric=metric, cell="X/ambig", model_a=a, model_b=b, value_a=va, value_b=vb,
               delta=vb - va, better=better, separated=separated, n=100, note="")
    return row


def test_rank_intervals_from_separations():
    # A < B and A < C separated; B and C not: B and C share rank 1 within [1, 2]
    pairs = pd.DataFrame([_pair("A", "B", 0.2, 0.8, True), _pair("A", "C", 0.2, 0.7, True),
                          _pair("B", "C", 0.8, 0.7, False)], columns=PAIR_COLUMNS)
    r = ranking(pairs).set_index("model")
    assert (r.loc["B", "rank"], r.loc["B", "rank_low"], r.loc["B", "rank_high"]) == (1, 1, 2)
    assert (r.loc["C", "rank"], r.loc["C", "rank_low"], r.loc["C", "rank_high"]) == (1, 1, 2)
    assert (r.loc["A", "rank"], r.loc["A", "rank_low"], r.loc["A", "rank_high"]) == (3, 3, 3)
    assert set(r["n_models"]) == {3}


def test_rank_direction_and_undefined_values():
    # lower is better: A (0.1) beats B (0.5), separated; C undefined is not ranked
    pairs = pd.DataFrame([_pair("A", "B", 0.1, 0.5, True, "sf", "lower"),
                          _pair("A", "C", 0.1, float("nan"), False, "sf", "lower"),
                          _pair("B", "C", 0.5, float("nan"), False, "sf", "lower")],
                         columns=PAIR_COLUMNS)
    r = ranking(pairs).set_index("model")
    assert (r.loc["A", "rank_low"], r.loc["A", "rank_high"]) == (1, 1)
    assert (r.loc["B", "rank_low"], r.loc["B", "rank_high"]) == (2, 2)
    assert math.isnan(r.loc["C", "rank"]) and set(r["n_models"]) == {2}


def test_two_sided_p():
    assert two_sided(0.01, 0.3) == pytest.approx(0.02)
    assert two_sided(0.99, -0.3) == pytest.approx(0.02)
    assert two_sided(1.0, 0.0) == 1.0          # identical, known without error
    assert two_sided(0.0, 0.5) == 0.0          # different, known without error
    assert two_sided(1.0, -0.5) == 0.0
    assert math.isnan(two_sided(float("nan"), 0.1))


def test_number_formatting():
    assert fmt(float("inf")) == "UB" and fmt(float("nan")) == "n/a" and fmt(-0.0001) == "0.000"
    assert fmt_ci(0.5, 0.25, 0.75) == "0.500 [0.250, 0.750]"
    assert fmt_ci(0.5, float("nan"), float("nan")) == "0.500"
    assert fmt_ci(float("inf"), 0.1, float("inf")) == "UB [0.100, UB]"
    assert fmt_count_pct(3.0, 12.5) == "3 (12.5%)"


def test_bars_ref_draws_bars_cis_and_the_reference_line():
    out = svg.bars_ref("t", [{"label": "a", "value": 0.02, "lo": 0.01, "hi": 0.03},
                             {"label": "b", "value": 0.2, "lo": 0.1, "hi": 0.3},
                             {"label": "c", "value": None, "lo": None, "hi": None}],
                       0.05, "5% audit line")
    root = ET.fromstring(out)
    bars = root.findall(".//s:rect[@class='bar']", NS)
    assert len(bars) == 2
    # over the line: red, under it: the accent colour
    assert [b.get("fill") for b in bars] == [svg.ACCENT, "#b3261e"]
    assert len(root.findall(".//s:line[@class='ci']", NS)) == 2
    ref = root.findall(".//s:line[@class='ref']", NS)
    assert len(ref) == 1
    # the domain is 0..0.3 with grid lines every 0.1: 0.05 lies halfway between the first two
    grid = sorted({float(g.get("x1")) for g in root.findall(".//s:line", NS)
                   if g.get("stroke") == svg.GRID})
    assert len(grid) == 4
    assert float(ref[0].get("x1")) == pytest.approx((grid[0] + grid[1]) / 2, abs=0.06)
    assert "n/a (undefined)" in out


def test_grouped_bars_one_bar_per_group_and_series():
    out = svg.grouped_bars("flagged", ["g1", "g2"], ["m1", "m2", "m3"],
                           [[1, 0, 2], [4, None, 3]])
    root = ET.fromstring(out)
    bars = root.findall(".//s:rect[@class='bar']", NS)
    assert len(bars) == 5                      # the None draws "n/a" instead
    heights = sorted(float(b.get("height")) for b in bars)
    # domain 0..4 over 160 px: 0, 1, 2, 3, 4 -> 0, 40, 80, 120, 160
    assert heights == pytest.approx([0, 40, 80, 120, 160])
    assert len(root.findall(".//s:text[@class='legend']", NS)) == 3


class _Ran:
    """A compared model whose runs hold the families named (what ``_units`` reads)."""

    def __init__(self, *names):
        self.names = names

    def run(self, family):
        return object() if family in self.names else None


def test_the_method_names_the_units_of_the_families_compared():
    """The method line names what was resampled for the families the models' runs hold,
    each in its family's own words (before: always "BBQ templates and generative
    prompts", even for two CrowS-Pairs runs)."""
    spec = {f.name: f for f in families()}
    clusters = default_clusters()
    got = _units([_Ran("crows_pairs"), _Ran("crows_pairs")], clusters)
    assert got == spec["crows_pairs"].unit_text(clusters["crows_pairs"])
    assert "BBQ" not in got and "generative" not in got
    both = _units([_Ran("bbq"), _Ran("generative")], {**clusters, "bbq": "item"})
    assert both == "BBQ items and " + spec["generative"].unit_text("prompt")
