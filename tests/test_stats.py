"""The shared statistics helpers, checked against arithmetic done by hand."""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from fairness_tests.core.fmt import json_value
from fairness_tests.stats.bootstrap import (
    METRIC_COLUMNS,
    Estimate,
    bootstrap,
    cell_id,
    cluster_level,
    interval_note,
    mean_table,
    metric_row,
    multiplicities,
    percentile_ci,
    rate_table,
    safe_ratio,
    wilson_ci,
)
from fairness_tests.stats.distributions import t_quantile

Z = 1.959963984540054          # the 97.5% normal quantile
Z2 = Z * Z                     # 3.841458820694124
NAN = float("nan")


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


# ---------------------------------------------------------------- cluster bootstrap

def test_cluster_multiplicities_move_whole_clusters_by_hand():
    # clusters a a b c c c (3 clusters): each resample draws 3 clusters with
    # replacement; every item of a cluster gets that cluster's draw count, so the
    # counts over clusters sum to 3 and the items' counts sum to 2 wa + wb + 3 wc.
    clusters = ["a", "a", "b", "c", "c", "c"]
    W = multiplicities(6, n_boot=200, seed=1, clusters=clusters)
    assert W.shape == (200, 6)
    assert (W[:, 0] == W[:, 1]).all() and (W[:, 3] == W[:, 4]).all() and (W[:, 4] == W[:, 5]).all()
    wa, wb, wc = W[:, 0], W[:, 2], W[:, 3]
    assert ((wa + wb + wc) == 3).all()
    assert (W.sum(axis=1) == 2 * wa + wb + 3 * wc).all()
    # the cluster draws are the item draws of 3 "items" with the same seed
    assert (np.column_stack([wa, wb, wc]) == multiplicities(3, n_boot=200, seed=1)).all()
    # cluster labels are numbered in sorted order, whatever order the items come in
    W2 = multiplicities(6, n_boot=200, seed=1, clusters=["c", "c", "c", "a", "a", "b"])
    assert (W2[:, 0] == wc).all() and (W2[:, 3] == wa).all() and (W2[:, 5] == wb).all()
    with pytest.raises(ValueError):
        multiplicities(5, n_boot=10, clusters=clusters)


def test_singleton_clusters_are_the_item_bootstrap():
    x = np.arange(8, dtype=float)
    W = multiplicities(8, n_boot=100, seed=2, clusters=np.arange(8))
    assert (W == multiplicities(8, n_boot=100, seed=2)).all()
    est = bootstrap(np.column_stack([x, np.ones(8)]), lambda s: s[:, 0] / s[:, 1],
                    n_boot=4000, seed=0, clusters=np.arange(8))
    assert est.n_clusters == 8 and est.deff == pytest.approx(1.0)


def test_cluster_bootstrap_variance_and_design_effect_by_hand():
    # x = 1 1 | 0 0 | 0 0 in clusters a | b | c; statistic = the total sum(w x).
    # Cluster bootstrap: total = 2 * (draws of a), draws ~ Binomial(3, 1/3):
    #   var = 4 * 3 * (1/3) * (2/3) = 8/3.
    # Item bootstrap: total = sum of 6 draws of x, var = 6 * var_pop(x) = 6 * (1/3)(2/3) = 4/3.
    # deff = (8/3) / (4/3) = 2.
    x = np.array([1.0, 1, 0, 0, 0, 0])
    est = bootstrap(x, lambda s: s[:, 0], n_boot=20000, seed=3,
                    clusters=["a", "a", "b", "b", "c", "c"])
    assert est.value == 2.0 and est.n_clusters == 3
    assert est.se ** 2 == pytest.approx(8 / 3, rel=0.05)
    assert est.deff == pytest.approx(2.0, rel=0.07)
    item = bootstrap(x, lambda s: s[:, 0], n_boot=20000, seed=3)
    assert item.se ** 2 == pytest.approx(4 / 3, rel=0.05)
    assert np.isnan(item.n_clusters) and np.isnan(item.deff)      # items resampled


def test_a_cluster_bootstrap_reads_its_interval_at_the_few_clusters_level():
    # 20 clusters of 3 items: the CI is the percentile interval of the SAME resamples
    # at level 2 Phi(e z) - 1, e = sqrt(20/19) t_19(0.975) / z(0.975) (= 0.968),
    # so it contains the plain 95% percentile interval; items resampled: plain 95%.
    rng = np.random.default_rng(4)
    x = rng.integers(0, 2, 60).astype(float)
    clusters = np.repeat(np.arange(20), 3)
    level = 2 * NormalDist().cdf(np.sqrt(20 / 19) * t_quantile(0.975, 19)) - 1
    assert cluster_level(20) == pytest.approx(level, rel=1e-12) and 0.967 < level < 0.969
    assert cluster_level(None) == 0.95 == cluster_level(1)
    W = multiplicities(60, n_boot=2000, seed=5, clusters=clusters)
    est = bootstrap(x, lambda s: s[:, 0] / 60, seed=5, W=W, clusters=clusters)
    values = (W @ x) / 60
    assert (est.ci_low, est.ci_high) == percentile_ci(values, level)
    # without W the cluster draws are applied to per-cluster sums (Wc @ Xc): the same
    # resampled sums as the expanded item matrix, so the same estimate
    fast = bootstrap(x, lambda s: s[:, 0] / 60, seed=5, clusters=clusters)
    assert (fast.value, fast.ci_low, fast.ci_high, fast.se, fast.deff) == pytest.approx(
        (est.value, est.ci_low, est.ci_high, est.se, est.deff), rel=1e-12)
    plain = percentile_ci(values, 0.95)
    assert est.ci_low <= plain[0] and est.ci_high >= plain[1]
    assert est.ci_high - est.ci_low > plain[1] - plain[0]
    item = bootstrap(x, lambda s: s[:, 0] / 60, seed=5)
    Wi = multiplicities(60, n_boot=2000, seed=5)
    assert (item.ci_low, item.ci_high) == percentile_ci((Wi @ x) / 60, 0.95)


def test_estimate_unpacks_and_bias_correction_is_two_value_minus_mean():
    # max of two group means: the resample mean of a max exceeds the max of the means
    rng = np.random.default_rng(0)
    g = np.repeat([0, 1], 20)
    y = rng.normal(size=40)
    X = np.column_stack([y * (g == 0), (g == 0), y * (g == 1), (g == 1)]).astype(float)

    def stat(s):
        return np.maximum(s[:, 0] / s[:, 1], s[:, 2] / s[:, 3])

    W = multiplicities(40, 500, seed=4)
    est = bootstrap(X, stat, W=W)
    v, lo, hi = est                                    # unpacks as the three numbers
    loop = np.array([stat((W[b] @ X)[None, :])[0] for b in range(500)])
    assert v == pytest.approx(stat(X.sum(axis=0)[None, :])[0])
    assert (lo, hi) == pytest.approx(tuple(np.quantile(loop, [0.025, 0.975])))
    assert est.se == pytest.approx(loop.std(ddof=1))
    assert est.value_bc == pytest.approx(2 * v - loop.mean())
    assert est.value_bc < v                            # a max is biased upward


def test_a_point_estimate_outside_its_interval_is_explained():
    # the embedded model's smoothed DF in Race_x_gender/ambig: value 1.946, interval
    # [0.669, 2.165], resample mean 1.572 -> value_bc = 2 * 1.946 - 1.572 = 2.32, outside.
    # The bias correction moves the value by 2.32 - 1.946 = +0.374; the interval moved
    # by as much is [0.669 + 0.374, 2.165 + 0.374] = [1.043, 2.539], which holds 2.32
    est = Estimate(1.946, 0.669, 2.165, value_bc=2.32)
    note = interval_note(est, bias_corrected=True)
    assert "value_bc 2.32 is outside [0.669, 2.165]" in note
    assert "moves the value by +0.374" in note and "to [1.043, 2.539]" in note
    assert "value 1.946 is outside" not in note                # the value itself is inside
    # without a bias-corrected column nothing is said about value_bc
    assert interval_note(est) == ""
    # a plug-in value below its own percentile interval (resamples shifted up by 0.3)
    low = Estimate(0.1, 0.2, 0.5, value_bc=-0.2)
    note = interval_note(low, bias_corrected=True)
    assert "value 0.1 is outside its percentile interval [0.2, 0.5]" in note
    assert "bias estimate +0.3" in note
    # both inside: nothing to say; undefined or unbounded intervals: nothing either
    assert interval_note(Estimate(0.3, 0.2, 0.5, value_bc=0.25), True) == ""
    assert interval_note(Estimate(float("inf"), 0.5, float("inf"), value_bc=float("nan")),
                         True) == ""
    assert interval_note(Estimate(0.3, NAN, NAN, value_bc=0.1), True) == ""
    # the metric row carries the note after its own
    row = metric_row("sf", est, note="small groups", bias_corrected=True)
    assert row["note"].startswith("small groups; value_bc 2.32 is outside")


def test_every_reported_estimate_lies_in_its_interval_or_the_note_says_why():
    # max of ten group means of five items each, no difference between the groups: a
    # strongly biased max, whose value_bc often lands outside the percentile interval
    rng = np.random.default_rng(0)
    hits = 0
    onehot = np.eye(10)[np.repeat(np.arange(10), 5)]
    for seed in range(40):
        X = np.hstack([onehot * rng.normal(size=50)[:, None], onehot])
        est = bootstrap(X, lambda s: np.where(s[:, 10:] > 0, safe_ratio(s[:, :10], s[:, 10:]),
                                              -np.inf).max(axis=1), n_boot=200, seed=seed)
        row = metric_row("m", est, bias_corrected=True)
        for name in ("value", "value_bc"):
            if not row["ci_low"] <= row[name] <= row["ci_high"]:
                hits += 1
                assert f"{name} {row[name]:.4g} is outside" in row["note"]
    assert hits > 0                                    # the case arises


def test_rate_and_mean_tables_with_clusters():
    df = pd.DataFrame({"g": ["a"] * 6, "f": [1, 1, 0, 0, 0, 0],
                       "t": ["a", "a", "b", "b", "c", "c"]})
    plain = rate_table(df, ["g"], ["f"]).iloc[0]
    assert (plain["ci_low"], plain["ci_high"]) == pytest.approx(wilson_ci(2, 6))
    assert np.isnan(plain["n_clusters"]) and np.isnan(plain["deff"])
    t = rate_table(df, ["g"], ["f"], clusters="t", n_boot=20000).iloc[0]
    # the rate is total / 6 (every resample has 6 items): deff as for the total, 2
    assert t["value"] == pytest.approx(1 / 3) and t["n"] == 6 and t["n_clusters"] == 3
    assert t["deff"] == pytest.approx(2.0, rel=0.07)
    # possible resampled rates: 0, 1/3, 2/3, 1 (0, 1, 2, 3 draws of cluster a)
    assert (t["ci_low"], t["ci_high"]) == (0.0, 1.0)
    m = mean_table(df.assign(x=df["f"] * 3.0), ["g"], ["x"], clusters="t", n_boot=20000)
    assert m["value"].iloc[0] == 1.0 and m["deff"].iloc[0] == pytest.approx(2.0, rel=0.07)
    assert list(t.index) == ["g", *METRIC_COLUMNS]
    # 3 clusters: the row says the interval is rough
    assert "only 3 clusters resampled" in t["note"]
    assert "clusters" not in plain["note"]
