"""Holm, McNemar, the gate's margin tests and power, against hand arithmetic,
brute force and simulation."""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from fairness_tests.stats.distributions import interval_expansion, t_cdf, t_quantile
from fairness_tests.stats.significance import (
    cluster_detectable_drop,
    cluster_paired_rate_test,
    cluster_spread,
    cr2_standard_error,
    detectable_accuracy_drop,
    detectable_worsening,
    effective_clusters,
    holm,
    mcnemar_p,
    normal_test,
    p_value_verdict,
    paired_rate_test,
    restricted_discordance,
)

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
    # harm: more discordance (noise) needs a larger drop, a larger sample a smaller one;
    # non-inferiority the other way round (more noise -> fails even smaller drops)
    noisier = detectable_accuracy_drop(n, 2 * psi, m, alpha, mode)
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
    # df = 1 (Cauchy): 1/2 + atan(t) / pi; df = 2: 1/2 + t / (2 sqrt(2 + t^2))
    for t in (-3.0, -0.5, 0.0, 0.7, 4.0):
        assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)
        assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12)
    assert t_cdf(2.093024, 19) == pytest.approx(0.975, abs=1e-6)   # table value
    assert t_cdf(1e6, 5) == pytest.approx(1.0)


def test_student_t_quantiles_against_table_values():
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


def test_student_t_quantiles_in_the_far_tails_by_closed_forms():
    # regression: a bisection inside [-1000, 1000] clamped df = 1, p = 1e-4 to -1000
    for p in (1e-4, 1e-6, 0.01, 0.3, 0.5, 0.975, 1 - 1e-4, 1 - 1e-7):
        # df = 1 (Cauchy): t = tan(pi (p - 1/2)); df = 2: t = (2p - 1) / sqrt(2 p (1 - p))
        assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9,
                                                 abs=1e-12)
        assert t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)),
                                                 rel=1e-9, abs=1e-12)
    assert t_quantile(1e-4, 1) == pytest.approx(-3183.0988, abs=1e-4)


def test_two_cluster_power_uses_the_unclamped_quantile():
    # C = 2 clusters: variance x 2, t with 1 df; at the per-cell level 1e-4 the harm
    # test needs t_1(1 - 1e-4) = tan(pi (0.5 - 1e-4)) = 3183.1 standard errors
    se, m, a = 0.01, 0.02, 1e-4
    q = lambda p: math.tan(math.pi * (p - 0.5))            # noqa: E731 (t, 1 df)
    expected = m + (q(1 - a) + q(0.8)) * se * math.sqrt(2)
    assert detectable_worsening(se, m, a, "harm", n_clusters=2) == pytest.approx(expected,
                                                                               rel=1e-9)
    assert expected > 45                                      # the clamp gave 14.2


def test_few_clusters_widen_the_test():
    # 20 clusters: variance x 20/19 and t with 19 df: the same z gives a larger p
    z_p = normal_test(0.05, 0.01, 0.02, "harm")
    t_p = normal_test(0.05, 0.01, 0.02, "harm", n_clusters=20)
    assert t_p == pytest.approx(1 - t_cdf(3 / math.sqrt(20 / 19), 19), rel=1e-9)
    assert t_p > z_p
    assert detectable_worsening(0.01, 0.02, 0.05, "harm", n_clusters=20) > \
        detectable_worsening(0.01, 0.02, 0.05, "harm")



def test_clustered_accuracy_tests_by_hand():
    # balances b_t - c_t = (3, -1, 2) over 10, 10, 20 items (N = 40), m = 0.05.
    d, n = [3, -1, 2], [10, 10, 20]
    # non-inferiority, cluster score: deviations d_t - m n_t = (2.5, -1.5, 1.0);
    # T = 2 / sqrt(6.25 + 2.25 + 1) = 0.648886; t with 2 df: F(t) = 1/2 + t / (2 sqrt(2 + t^2))
    T = 2 / math.sqrt(9.5)
    assert cluster_paired_rate_test(d, n, 0.05, "non_inferiority") == pytest.approx(
        0.5 + T / (2 * math.sqrt(2 + T * T)), rel=1e-9)
    # harm, CR2 Wald: w_hat = 0.1, residuals (2, -2, 0), h = (1/4, 1/4, 1/2):
    # se^2 = (4 / 0.75 + 4 / 0.75) / 1600 = 1 / 150; T = 0.05 / sqrt(1/150) = 0.612372.
    # Bell-McCaffrey: tr(AS) = 1 / N = 0.025; tr(ASAS) = 2 (7.5/1200)^2 + (10/800)^2
    # + 2 (2.5/1200)^2 + 4 (5/1200)(5/800) = 3.4722e-4; nu = 0.025^2 / 3.4722e-4 = 1.8
    se, nu = cr2_standard_error(d, n)
    assert se == pytest.approx(math.sqrt(1 / 150), rel=1e-12)
    assert nu == pytest.approx(1.8, rel=1e-9)
    assert cluster_paired_rate_test(d, n, 0.05, "harm") == pytest.approx(
        1 - t_cdf(0.05 / math.sqrt(1 / 150), 1.8), rel=1e-9)
    # every cluster exactly at the margin: no evidence either way
    assert cluster_paired_rate_test([1, 2], [20, 40], 0.05, "harm") == 1.0
    assert cluster_paired_rate_test([1, 2], [20, 40], 0.05, "non_inferiority") == 1.0
    # a drop known without error (every item of every template flips): harm p = 0
    assert cluster_paired_rate_test([20, 40, 10], [20, 40, 10], 0.02, "harm") == 0.0
    assert math.isnan(cluster_paired_rate_test([1], [20], 0.05, "harm"))


def test_bell_mccaffrey_degrees_of_freedom_for_equal_clusters():
    # C equal clusters: h = 1/C, the CR2 variance is CR1's and nu = C - 1
    for C in (3, 7, 20):
        assert cr2_standard_error(np.arange(C, dtype=float), [5] * C)[1] == pytest.approx(
            C - 1, rel=1e-9)


def test_cluster_score_test_at_zero_margin_is_the_clustered_mcnemar():
    # m = 0: T^2 = (sum d_t)^2 / sum d_t^2 (Durkalski et al. 2003); one item per cluster
    # (d_t in {-1, 0, 1}): T = (b - c) / sqrt(b + c), McNemar's z, with t on n - 1 df
    d = [4, -2, 5, 0, 1]
    T = 8 / math.sqrt(16 + 4 + 25 + 0 + 1)
    assert cluster_paired_rate_test(d, [30] * 5, 0.0, "non_inferiority") == pytest.approx(
        t_cdf(T, 4), rel=1e-9)
    single = [1] * 10 + [-1] * 2 + [0] * 188                # b = 10, c = 2, n = 200
    assert cluster_paired_rate_test(single, [1] * 200, 0.0, "non_inferiority") == \
        pytest.approx(t_cdf(8 / math.sqrt(12), 199), rel=1e-9)


def test_effective_clusters():
    assert effective_clusters([10, 10, 10, 10]) == pytest.approx(4.0)
    # (10 + 30)^2 / (100 + 900) = 1.6
    assert effective_clusters([10, 30]) == pytest.approx(1.6)


@pytest.mark.parametrize("mode", ["harm", "non_inferiority"])
def test_cluster_detectable_drop_has_the_stated_power(mode):
    # 20 clusters of unequal size, per-cluster balance d_t ~ N(w n_t, sd_t^2): the
    # gate's cluster score test, simulated independently of the function's own draws,
    # fails about 80% of samples at the detectable drop
    n_t = np.array([200, 40, 40, 48, 40, 200, 200, 72, 40, 40, 48, 72, 160, 72, 48, 40,
                    160, 160, 40, 40], dtype=float)
    sd_t = np.sqrt((0.05 * n_t) ** 2 + 0.3 * n_t)
    m = 0.02
    for alpha in (0.05, 0.005):
        w = cluster_detectable_drop(n_t, sd_t, 0.0, m, alpha, mode)
        assert (w > m) if mode == "harm" else (w < m)
        d = w * n_t + sd_t * np.random.default_rng(7).standard_normal((4000, 20))
        p = np.array([cluster_paired_rate_test(x, n_t, m, mode) for x in d])
        fail = np.mean(p < alpha) if mode == "harm" else np.mean(p >= alpha)
        assert fail == pytest.approx(0.80, abs=0.025)
    # more spread: harm needs a larger drop, non-inferiority fails smaller ones
    noisier = cluster_detectable_drop(n_t, 2 * sd_t, 0.0, m, 0.05, mode)
    base = cluster_detectable_drop(n_t, sd_t, 0.0, m, 0.05, mode)
    assert (noisier > base) if mode == "harm" else (noisier < base)
    # runs that agree on every item still have a power figure: a drop needs discordant
    # items, each cluster varies at least as its independent items would
    agree = cluster_detectable_drop(n_t, np.zeros(20), 0.0, m, 0.05, mode)
    assert np.isfinite(agree) and ((agree > m) if mode == "harm" else (agree < m))


def test_cluster_spread_sums_to_the_cluster_robust_variance():
    # balances (3, -1, 2) over (10, 10, 20): w_hat = 4 / 40 = 0.1, residuals (2, -2, 0),
    # CR1 variance x N^2 = 3/2 x (4 + 4 + 0) = 12
    s = cluster_spread([3, -1, 2], [10, 10, 20])
    assert (s ** 2).sum() == pytest.approx(12.0)
    assert s[2] == 0.0


def test_a_cell_too_concentrated_cannot_pass_non_inferiority():
    # one template holds nearly every item (C_eff = 1.02): the cluster score statistic
    # stays near 1 in size however large the improvement, below the t quantile at the
    # per-cell level 0.001: non-inferiority fails whatever the candidate does
    sizes = np.array([1000.0, 5.0, 5.0])
    assert effective_clusters(sizes) < 1.1
    spread = np.sqrt(0.3 * sizes)
    assert cluster_detectable_drop(sizes, spread, 0.3, 0.02, 0.001, "non_inferiority") == -1.0
