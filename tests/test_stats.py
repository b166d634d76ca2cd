"""The shared statistics helpers, checked against arithmetic done by hand."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fairness_tests.stats import (bootstrap, cell_id, json_value, mean_table, multiplicities,
                                  percentile_ci, rate_table, safe_ratio, wilson_ci)

Z = 1.959963984540054          # the 97.5% normal quantile
Z2 = Z * Z                     # 3.841458820694124


def test_wilson_by_hand():
    # k = 5, n = 10: p = 0.5, centre = 0.5, denominator 1 + z^2/10 = 1.3841458820694124,
    # half = z * sqrt(0.5 * 0.5 / 10 + z^2 / 400) / 1.38414588 = z * sqrt(0.025 + 0.009603647)
    #      = 1.95996398 * 0.18602054 / 1.38414588 = 0.364592 / 1.384146 = 0.263407
    lo, hi = wilson_ci(5, 10)
    half = Z * math.sqrt(0.025 + Z2 / 400) / (1 + Z2 / 10)
    assert half == pytest.approx(0.263407, abs=1e-6)
    assert (lo, hi) == pytest.approx((0.5 - half, 0.5 + half))


def test_wilson_at_the_edges_is_exact():
    # k = 0: upper = (z^2/20 + z * (z/20)) / (1 + z^2/10) = (z^2/10) / (1 + z^2/10) = 0.27753
    lo, hi = wilson_ci(0, 10)
    assert lo == 0.0                                   # exactly, not 1e-18
    assert hi == pytest.approx((Z2 / 10) / (1 + Z2 / 10))
    assert hi == pytest.approx(0.277533, abs=1e-6)
    lo, hi = wilson_ci(10, 10)
    assert hi == 1.0 and lo == pytest.approx(1 - 0.277533, abs=1e-6)
    assert all(math.isnan(x) for x in wilson_ci(0, 0))


def test_multiplicities_are_resamples_of_n_items():
    W = multiplicities(7, n_boot=50, seed=3)
    assert W.shape == (50, 7)
    assert (W.sum(axis=1) == 7).all() and (W >= 0).all()
    assert (W == multiplicities(7, n_boot=50, seed=3)).all()      # seeded
    assert not (W == multiplicities(7, n_boot=50, seed=4)).all()


def test_bootstrap_of_two_points():
    # items 0 and 1: a resample of 2 items has mean 0, 0.5 or 1 with probability
    # 1/4, 1/2, 1/4; the 2.5% and 97.5% percentiles of 2,000 resamples are 0 and 1.
    X = np.column_stack([[0.0, 1.0], [1.0, 1.0]])
    point, lo, hi = bootstrap(X, lambda s: safe_ratio(s[:, 0], s[:, 1]), n_boot=2000, seed=0)
    assert point == 0.5 and lo == 0.0 and hi == 1.0


def test_bootstrap_equals_a_loop_over_the_same_resamples():
    rng = np.random.default_rng(1)
    y, w = rng.integers(0, 2, 40).astype(float), np.ones(40)
    W = multiplicities(40, 300, seed=5)
    _, lo, hi = bootstrap(np.column_stack([y, w]), lambda s: s[:, 0] / s[:, 1], W=W)
    loop = [np.dot(W[b], y) / W[b].sum() for b in range(300)]
    assert (lo, hi) == pytest.approx(tuple(np.quantile(loop, [0.025, 0.975])))


def test_bootstrap_of_a_constant_and_of_nothing():
    point, lo, hi = bootstrap(np.ones((5, 2)), lambda s: s[:, 0] / s[:, 1], n_boot=100)
    assert (point, lo, hi) == (1.0, 1.0, 1.0)
    point, lo, hi = bootstrap(np.zeros((0, 2)), lambda s: s[:, 0], n_boot=100)
    assert all(math.isnan(x) for x in (point, lo, hi))


def test_percentile_ci_keeps_infinity_and_drops_undefined():
    assert percentile_ci(np.array([1.0, 2.0, np.inf, np.inf] * 10), 0.5)[1] == np.inf
    assert all(math.isnan(x) for x in percentile_ci(np.array([np.nan] * 6 + [1.0] * 4)))


def test_safe_ratio_is_undefined_not_zero():
    out = safe_ratio(np.array([1.0, 0.0]), np.array([2.0, 0.0]))
    assert out[0] == 0.5 and math.isnan(out[1])


def test_rate_table_by_hand():
    df = pd.DataFrame({"g": ["a", "a", "a", "b", "b"], "f": [1, 0, 1, 0, 0]})
    t = rate_table(df, ["g"], ["f"]).set_index("g")
    assert t.loc["a", "value"] == pytest.approx(2 / 3) and t.loc["a", "n"] == 3
    assert (t.loc["a", "ci_low"], t.loc["a", "ci_high"]) == pytest.approx(wilson_ci(2, 3))
    assert t.loc["b", "value"] == 0.0 and t.loc["b", "ci_low"] == 0.0


def test_mean_table_by_hand():
    df = pd.DataFrame({"g": ["a"] * 4, "x": [1.0, 2.0, 3.0, 6.0]})
    t = mean_table(df, ["g"], ["x"], n_boot=500)
    assert t["value"].iloc[0] == 3.0                       # (1 + 2 + 3 + 6) / 4
    assert 1.0 <= t["ci_low"].iloc[0] <= 3.0 <= t["ci_high"].iloc[0] <= 6.0


def test_json_value_and_cell_id():
    assert json_value(float("inf")) == "UB" and json_value(float("nan")) is None
    assert json_value(np.int64(3)) == 3 and json_value(np.float32(0.5)) == 0.5
    assert cell_id("Race_x_gender", "disambig", None, "") == "Race_x_gender/disambig"
