"""Holm, McNemar, the gate's margin tests and power, against hand arithmetic,
brute force and simulation."""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from fairness_tests.significance import (detectable_accuracy_drop, detectable_worsening, holm,
                                         mcnemar_p, normal_test, p_value_verdict,
                                         paired_rate_test, restricted_discordance)

N = NormalDist()


def test_holm_by_hand():
    # sorted: 0.005 x 4 = 0.02; 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04 -> max 0.06
    adj = holm([0.01, 0.04, 0.03, 0.005])
    assert adj == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # NaN is not in the family: m = 2 here
    adj = holm([0.02, float("nan"), 0.03])
    assert adj[0] == pytest.approx(0.04) and math.isnan(adj[1]) and adj[2] == pytest.approx(0.04)
    assert holm([0.6, 0.9]) == pytest.approx([1.0, 1.0])          # capped at 1


def step_down(p, alpha):
    """Holm's procedure as stated: reject in order while p_(i) <= alpha / (m - i + 1)."""
    order = np.argsort(p)
    rejected = np.zeros(len(p), bool)
    for i, j in enumerate(order):
        if p[j] > alpha / (len(p) - i):
            break
        rejected[j] = True
    return rejected


def test_holm_adjusted_p_is_the_level_at_which_step_down_rejects():
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = rng.random(rng.integers(1, 8)) ** 3
        adj = holm(p)
        for alpha in (0.001, 0.01, 0.05, 0.1, 0.3):
            assert ((adj <= alpha) == step_down(p, alpha)).all()


def test_mcnemar_exact_by_hand():
    assert mcnemar_p(0, 5) == pytest.approx(0.0625)          # 2 * 0.5**5
    assert mcnemar_p(1, 4) == pytest.approx(2 * 6 / 32)     # 2 * (1 + 5) / 2**5
    assert mcnemar_p(3, 3) == 1.0 and mcnemar_p(0, 0) == 1.0


def test_restricted_discordance_maximises_the_likelihood():
    # brute force over q = P(01) on a fine grid, with P(10) = q + m
    for b, c, n, m in [(10, 2, 100, 0.05), (3, 7, 50, 0.02), (0, 0, 40, 0.1), (5, 5, 30, 0.0)]:
        q = np.linspace(1e-9, (1 - m) / 2 - 1e-9, 400001)
        with np.errstate(divide="ignore"):
            ll = b * np.log(q + m) + c * np.log(q) + (n - b - c) * np.log(1 - 2 * q - m)
        ll = np.where(np.isnan(ll), -np.inf, ll)
        q_best = q[np.argmax(ll)]
        assert restricted_discordance(b, c, n, m) == pytest.approx(2 * q_best + m, abs=1e-5)


def test_paired_rate_test_at_zero_margin_is_mcnemar():
    # b = 10, c = 2: McNemar z = (10 - 2) / sqrt(12) = 2.3094; harm p = 1 - Phi(z)
    z = 8 / math.sqrt(12)
    assert paired_rate_test(10, 2, 200, 0.0, "harm") == pytest.approx(1 - N.cdf(z))
    assert paired_rate_test(10, 2, 200, 0.0, "non_inferiority") == pytest.approx(N.cdf(z))
    # design effect 2: z / sqrt(2)
    assert paired_rate_test(10, 2, 200, 0.0, "harm", deff=2.0) == pytest.approx(
        1 - N.cdf(z / math.sqrt(2)))
    # identical answers: no evidence of harm; with a margin, evidence of no harm
    assert paired_rate_test(0, 0, 400, 0.0, "harm") == 1.0
    # b = c = 0, m = 0.02: psi~ = m (q = 0), variance (0.02 - 0.02**2) / 400,
    # z = -0.02 / sqrt(0.0196 / 400) = -2.857, p = Phi(z) = 0.00214
    assert paired_rate_test(0, 0, 400, 0.02, "non_inferiority") == pytest.approx(
        N.cdf(-0.02 / math.sqrt(0.0196 / 400)))
    with pytest.raises(ValueError):
        paired_rate_test(1, 1, 10, 0.0, "strict")


def test_normal_test_by_hand():
    # w = 0.05, se = 0.01, m = 0.02: z = 3, harm p = 1 - Phi(3) = 0.0013499
    assert normal_test(0.05, 0.01, 0.02, "harm") == pytest.approx(0.0013499, abs=1e-7)
    assert normal_test(0.05, 0.01, 0.02, "non_inferiority") == pytest.approx(1 - 0.0013499)
    assert normal_test(0.03, 0.0, 0.02, "harm") == 0.0
    assert normal_test(0.01, 0.0, 0.02, "harm") == 1.0
    assert math.isnan(normal_test(float("nan"), 0.01, 0.02, "harm"))


def test_detectable_worsening_by_hand():
    # harm: 0.02 + (z_0.95 + z_0.80) * 0.01 = 0.02 + (1.644854 + 0.841621) * 0.01
    assert detectable_worsening(0.01, 0.02, 0.05, "harm") == pytest.approx(0.0448648, abs=1e-6)
    # non-inferiority: 0.02 - (1.644854 - 0.841621) * 0.01
    assert detectable_worsening(0.01, 0.02, 0.05, "non_inferiority") == pytest.approx(
        0.0119677, abs=1e-6)


def simulated_fail_rate(w, psi, n, m, alpha, mode, sims=4000, seed=0):
    """Share of simulated paired samples (discordant counts from the multinomial) in
    which the gate fails the cell."""
    rng = np.random.default_rng(seed)
    psi_w = max(psi, abs(w))
    p10, p01 = (psi_w + w) / 2, (psi_w - w) / 2
    counts = rng.multinomial(n, [p10, p01, 1 - p10 - p01], size=sims)
    p = np.array([paired_rate_test(int(b), int(c), n, m, mode) for b, c, _ in counts])
    return float(np.mean(p < alpha)) if mode == "harm" else float(np.mean(p >= alpha))


@pytest.mark.parametrize("mode", ["harm", "non_inferiority"])
def test_detectable_accuracy_drop_has_the_stated_power(mode):
    n, psi, m, alpha = 400, 0.12, 0.02, 0.05
    w = detectable_accuracy_drop(n, psi, m, alpha, mode)
    assert 0 < w < 0.2
    # simulated: the gate fails about 80% of samples at that drop (4000 samples:
    # standard error 0.6 points; the normal approximation adds a little)
    assert simulated_fail_rate(w, psi, n, m, alpha, mode) == pytest.approx(0.80, abs=0.035)
    # harm: a design effect of 2 needs a larger drop, a larger sample a smaller one;
    # non-inferiority the other way round (more noise -> fails even smaller drops)
    noisier = detectable_accuracy_drop(n, psi, m, alpha, mode, deff=2.0)
    larger = detectable_accuracy_drop(4 * n, psi, m, alpha, mode)
    if mode == "harm":
        assert noisier > w > larger > m
    else:
        assert noisier < w < larger < m


def test_p_value_verdict():
    assert p_value_verdict(True, 0.001, 0.05) == "pass"
    assert p_value_verdict(False, 0.001, 0.05) == "fail"
    assert p_value_verdict(False, 0.2, 0.05) == "pass"
    assert p_value_verdict(False, float("nan"), 0.05) == "not_evaluable"


def test_tiny_p_values_stay_positive():
    # z = 12: 1 - Phi(12) = 1.78e-33, not 0 (the gate's Holm step multiplies it)
    p = normal_test(0.14, 0.01, 0.02, "harm")
    assert 0 < p == pytest.approx(1.7764821120776e-33, rel=1e-6)


def test_student_t_reference_by_closed_forms():
    from fairness_tests.distributions import t_cdf as _t_cdf
    # df = 1 (Cauchy): 1/2 + atan(t) / pi; df = 2: 1/2 + t / (2 sqrt(2 + t^2))
    for t in (-3.0, -0.5, 0.0, 0.7, 4.0):
        assert _t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)
        assert _t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12)
    assert _t_cdf(2.093024, 19) == pytest.approx(0.975, abs=1e-6)   # table value
    assert _t_cdf(1e6, 5) == pytest.approx(1.0)


def test_student_t_quantiles_against_table_values():
    from fairness_tests.distributions import interval_expansion, t_quantile
    # printed t tables: t_{0.975} for df 1, 2, 19, 41; t_{0.95} for df 19
    for df, p, t in ((1, 0.975, 12.7062), (2, 0.975, 4.3027), (19, 0.975, 2.0930),
                     (41, 0.975, 2.0195), (19, 0.95, 1.7291)):
        assert t_quantile(p, df) == pytest.approx(t, abs=1e-4)
    assert t_quantile(0.5, 7) == pytest.approx(0.0, abs=1e-12)
    # C = 20 clusters, 95%: sqrt(20/19) * 2.0930 / 1.95996 = 1.0956
    assert interval_expansion(20, 0.95) == pytest.approx(
        math.sqrt(20 / 19) * t_quantile(0.975, 19) / 1.959963984540054, rel=1e-12)
    assert 1.095 < interval_expansion(20, 0.95) < 1.097
    assert interval_expansion(None, 0.95) == 1.0 == interval_expansion(1, 0.95)


def test_few_clusters_widen_the_test():
    # 20 clusters: variance x 20/19 and t with 19 df: the same z gives a larger p
    z_p = normal_test(0.05, 0.01, 0.02, "harm")
    t_p = normal_test(0.05, 0.01, 0.02, "harm", n_clusters=20)
    from fairness_tests.distributions import t_cdf as _t_cdf
    assert t_p == pytest.approx(1 - _t_cdf(3 / math.sqrt(20 / 19), 19), rel=1e-9)
    assert t_p > z_p
    assert detectable_worsening(0.01, 0.02, 0.05, "harm", n_clusters=20) > \
        detectable_worsening(0.01, 0.02, 0.05, "harm")
    assert paired_rate_test(10, 2, 200, 0.0, "harm", n_clusters=20) > \
        paired_rate_test(10, 2, 200, 0.0, "harm")
