"""core/fmt: the one family of number formatters (issue 21: about ten formatters became
one family; each report keeps its own words for undefined and unbounded)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fairness_tests.benchmarks.generative.metrics import with_cells
from fairness_tests.core.fmt import fixed, json_value, shown, shown_p, text_table
from fairness_tests.models.requests.request import decoding_label


def test_json_value_keeps_undefined_and_unbounded_apart():
    assert [json_value(x) for x in (math.nan, math.inf, -math.inf, np.float64(0.5),
                                    np.int64(3), np.bool_(True), "a")] == \
        [None, "UB", "-UB", 0.5, 3, True, "a"]


def test_shown_writes_undefined_and_unbounded_in_the_reports_words():
    assert shown(0.123456) == "0.1235" and shown(0.123456, ".3f") == "0.123"
    assert shown(math.nan) == "undefined" and shown(math.nan, undefined="n/a") == "n/a"
    assert shown(None, undefined="-") == "-"              # was "None" in reports
    assert (shown(math.inf), shown(-math.inf)) == ("UB", "-UB")
    assert shown(-math.inf, unbounded="unbounded") == "-unbounded"
    assert shown("Race_x_SES") == "Race_x_SES"


def test_p_values_and_fixed_decimals():
    assert (shown_p(0.04321), shown_p(0.000123), shown_p(None, "-")) == ("0.043", "0.00012", "-")
    assert (fixed(-0.0004), fixed(-0.0006), fixed(1.5, 1), fixed(math.nan)) == \
        ("0.000", "-0.001", "1.5", "n/a")


def test_text_table_aligns_columns():
    t = text_table(["a", "long"], [["xyz", "1"], ["", "22"]])
    assert t.split("\n") == ["a    long", "---  ----", "xyz  1", "     22"]
    assert text_table(["a"], [["b"]], rule=False) == "a\nb"


def test_one_decoding_label():
    """Four builders of the decoding id became one (models.requests.request.decoding_label)."""
    assert decoding_label(0.2, 0.9) == "t0.2_p0.9" and decoding_label(1, 1.0) == "t1_p1"
    scored = pd.DataFrame({"slice_gender": ["man"], "slice_religion": ["Muslim"],
                           "prompt_family": ["F1"], "paraphrase_id": [0], "occupation": ["x"],
                           "temperature": [0.70], "top_p": [0.95], "status": ["ok"]})
    assert with_cells(scored)["decoding"].tolist() == ["t0.7_p0.95"]
