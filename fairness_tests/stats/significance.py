"""Tests and error rates of decisions: Holm's procedure, McNemar, the gate's one-sided
tests against a margin, and the smallest worsening a test detects with given power.

Notation: ``w`` is the *worsening* of a paired difference (candidate minus baseline,
signed so that positive = worse: ``acc_b - acc_c`` for accuracy, ``|s|_c - |s|_b``
for a bias score), ``m >= 0`` the margin, ``alpha`` the family-wise level.

Gate modes (one-sided tests at the boundary ``w = m``):

- ``harm``: H0 ``w <= m`` (no worsening beyond the margin). The cell *fails* when H0
  is rejected: a regression with statistical support. p = P(Z >= z).
- ``non_inferiority``: H0 ``w >= m`` (worse by the margin or more). The cell *passes*
  only when H0 is rejected: "shown to be no worse than the margin". p = P(Z <= z).

with ``z = (w_hat - m) / se``. With few items ``non_inferiority`` fails by design
(nothing can be shown) and ``harm`` passes by design (nothing can be proven).

Holm (1979): with the m defined p-values sorted ``p_(1) <= ... <= p_(m)``, the
adjusted ``p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``; rejecting every
hypothesis with ``p~ < alpha`` controls the family-wise error rate at alpha for any
dependence between the tests.

Paired proportions (accuracy): b = items only the baseline got right, c = items only
the candidate got right, n pairs, ``w_hat = (b - c) / n``. The score test of
``w = m`` (Nam 1997; Tango 1998) uses the variance ``(psi~ - m^2) / n`` at the
restricted maximum-likelihood discordance ``psi~ = 2 q + m`` with q the positive
root of ``2n q^2 - (b + c - m (2n - b + c)) q - c m (1 - m) = 0``; at ``m = 0`` it is
McNemar's ``z = (b - c) / sqrt(b + c)``.

Clustered paired proportions (templates resampled): with ``d_t = b_t - c_t`` the
discordance balance of cluster t, ``n_t`` its items, ``N = sum n_t``, ``h_t = n_t / N``,
``w_hat = sum d_t / N``, each mode uses the test whose error at the margin stays at or
below alpha with few, unequal clusters (``bench/bench_calibration.py``):

- ``harm``: the cluster-robust Wald test with the CR2 variance and Bell-McCaffrey
  degrees of freedom (Bell & McCaffrey 2002; Imbens & Kolesar 2016):
  ``T = (w_hat - m) / se``, ``se^2 = sum_t (d_t - w_hat n_t)^2 / (1 - h_t) / N^2``,
  Student t with ``nu = tr(AS)^2 / tr(ASAS)``, ``S = diag(n) - n n' / N``,
  ``A = diag(1 / (N^2 (1 - h)))`` (20 Race_x_SES-sized templates: nu = 12.4).
- ``non_inferiority``: the cluster score test, the variance estimated at the null one
  cluster at a time, ``T = sum_t (d_t - m n_t) / sqrt(sum_t (d_t - m n_t)^2)``, Student
  t with C - 1 degrees of freedom (at m = 0 the clustered McNemar statistic of
  Obuchowski 1998 and Durkalski et al. 2003). A Wald test passes too many candidates
  that are exactly at the margin (5.9% with CR2 and Bell-McCaffrey, 6.6% with CR1):
  when the sampled templates happen to hold the small drops, both the drop and its
  variance come out small. The score form is what non-inferiority tests of
  proportions use for the same reason (Tango 1998). Its price: ``|T| <= sqrt(C)``, and
  a cell concentrated in a few templates may not reach its share of the family's
  level; its detectable worsening then says the cell fails whatever the candidate
  does.

Both replaced "the score test times the bootstrap design effect", whose error at the
margin was 5.5% (harm) and 6.9% (non-inferiority) on 20 clustered templates.

Few clusters (a BBQ cell has 20 or 42 templates): when C clusters were resampled,
every bootstrap z test takes the variance times C / (C - 1) and refers z to Student t
with C - 1 degrees of freedom (the usual small-sample correction of a cluster-robust
test; the cluster score test needs no factor, see above); with items resampled the
reference is the normal.

Power, clustered accuracy: computed by simulating the mode's test itself on the cell's
clusters (:func:`cluster_detectable_drop`: balances ``d_t ~ N(w n_t, spread_t^2)`` with
each cluster's observed spread, at least that of independent items at the drop). A
cell whose items sit in a few templates may reach no power at its share of the family:
non-inferiority then fails whatever the candidate does (-1).

Power: the gate fails a cell when (harm) ``w_hat > m + z_{1-a} s`` or (non-inferiority)
``w_hat > m - z_{1-a} s``, at the per-cell level ``a = alpha / m_family`` (the first,
strictest step of Holm: a guarantee whatever the other cells do). With
``w_hat ~ N(w, s^2)`` the *minimal detectable worsening* at power ``1 - beta`` is
``m + (z_{1-a} + z_{1-beta}) s`` (harm) and ``m - (z_{1-a} - z_{1-beta}) s``
(non-inferiority; negative = the gate fails even an improvement that often). For
accuracy ``s`` depends on w through the discordance (Connor 1987):
``s0 = sqrt((psi0 - m^2) / n)`` under H0 and ``s1 = sqrt((psi_w - w^2) / n)``
under w, ``psi0 = max(psi_hat, m)`` and ``psi_w = max(psi_hat, |w|)`` with psi_hat the
observed discordance (b + c) / n; the power ``Phi((w - m -/+ z_{1-a} s0) / s1)`` is
solved for w on a grid of step 1e-5.
"""
from __future__ import annotations

import math
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import ArrayLike

from fairness_tests.stats.distributions import reference, small_clusters

ALPHA = 0.05
POWER = 0.80
#: the gate's question: is the candidate worse (harm), or not worse by more than the margin
GateMode = Literal["harm", "non_inferiority"]
MODES: tuple[GateMode, ...] = get_args(GateMode)


def holm(p_values: ArrayLike) -> np.ndarray:
    """Holm-adjusted p-values (same order); NaN p-values are not in the family and
    stay NaN."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    m = idx.size
    if m == 0:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value for b and c discordant pairs:
    ``min(1, 2 P(Binomial(b + c, 1/2) <= min(b, c)))``."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2)
            for i in range(k + 1)]
    return min(1.0, 2.0 * sum(math.exp(x) for x in logs))


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"gate mode must be one of {MODES}, got {mode!r}")


def _one_sided(z: float, mode: GateMode, df: float | None = None) -> float:
    cdf, _ = reference(df)
    return cdf(-z) if mode == "harm" else cdf(z)


def normal_test(worsening: float, se: float, margin: float, mode: GateMode,
                n_clusters: float | None = None) -> float:
    """One-sided p-value of the gate's null for ``mode`` with z = (w_hat - m) / se
    (se from the paired bootstrap; with ``n_clusters`` C the variance is taken times
    C / (C - 1) and z referred to Student t with C - 1 degrees of freedom). se = 0: the
    difference is known exactly, p = 0 when it lies on the alternative's side, else 1.
    NaN when undefined."""
    _check_mode(mode)
    if not (np.isfinite(worsening) and np.isfinite(se)):
        return float("nan")
    d = worsening - margin
    if se == 0:
        beyond = d > 0 if mode == "harm" else d < 0
        return 0.0 if beyond else 1.0
    factor, df = small_clusters(n_clusters)
    return _one_sided(d / (se * math.sqrt(factor)), mode, df)


def restricted_discordance(b: int, c: int, n: int, margin: float) -> float:
    """psi~: the maximum-likelihood discordance P(10) + P(01) under
    P(10) - P(01) = margin (see the module docstring)."""
    B = b + c - margin * (2 * n - b + c)
    q = (B + math.sqrt(B * B + 8.0 * n * c * margin * (1.0 - margin))) / (4.0 * n)
    return 2.0 * q + margin


def paired_rate_test(b: int, c: int, n: int, margin: float, mode: GateMode) -> float:
    """One-sided p-value of the score test of ``w = m`` for paired proportions
    (b: only the baseline right, c: only the candidate right, n pairs; items
    independent, the normal reference). At m = 0 this is McNemar's test (normal form).
    Clustered items: :func:`cluster_paired_rate_test`."""
    _check_mode(mode)
    if n <= 0:
        return float("nan")
    psi = restricted_discordance(b, c, n, margin)
    var = (psi - margin * margin) / n
    d = (b - c) / n - margin
    if var <= 1e-15:
        return normal_test(d + margin, 0.0, margin, mode)
    return _one_sided(d / math.sqrt(var), mode)


def cr2_standard_error(balance: ArrayLike, items: ArrayLike) -> tuple[Any, float]:
    """(se of ``w_hat``, Bell-McCaffrey degrees of freedom) of the CR2 cluster-robust
    variance for a ratio of cluster sums (module docstring); ``balance`` may carry
    leading axes (one se per row; the degrees of freedom depend on ``items`` only).
    NaN with < 2 clusters or one cluster holding every item."""
    d = np.asarray(balance, dtype=float)
    n = np.asarray(items, dtype=float)
    C, N = n.size, n.sum()
    if C < 2 or N <= 0 or (n >= N).any():
        return np.full(d.shape[:-1], np.nan)[()], float("nan")
    h = n / N
    r = d - (d.sum(axis=-1) / N)[..., None] * n
    se = np.sqrt((r * r / (1.0 - h)).sum(axis=-1)) / N
    AS = (1.0 / (N * N * (1.0 - h)))[:, None] * (np.diag(n) - np.outer(n, n) / N)
    return se[()], float(np.trace(AS) ** 2 / np.trace(AS @ AS))


def cluster_statistic(balance: ArrayLike, items: ArrayLike, margin: float,
                      mode: GateMode) -> tuple[Any, float]:
    """(T, degrees of freedom) of the mode's clustered test of ``w = m`` (module
    docstring): ``harm`` the CR2 Wald statistic, ``non_inferiority`` the cluster score
    statistic; ``balance`` may carry leading axes (one T per row). Where the variance is
    zero, harm's T is +/-inf beyond/short of the margin (NaN at it), the score's NaN."""
    d = np.asarray(balance, dtype=float)
    n = np.asarray(items, dtype=float)
    if mode == "harm":
        se, nu = cr2_standard_error(d, n)
        w = d.sum(axis=-1) / n.sum()
        with np.errstate(divide="ignore", invalid="ignore"):     # se 0: known exactly
            return np.where(se > 1e-15, (w - margin) / se, np.sign(w - margin) * np.inf)[()], nu
    r = d - margin * n
    ss = (r * r).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ss > 1e-15, r.sum(axis=-1) / np.sqrt(ss), np.nan)[()], n.size - 1.0


def cluster_paired_rate_test(balance: ArrayLike, items: ArrayLike, margin: float,
                             mode: GateMode) -> float:
    """One-sided p-value of ``w = m`` for clustered paired proportions
    (``balance[t] = b_t - c_t``, ``items[t] = n_t``): ``harm`` by the CR2 Wald test with
    Bell-McCaffrey degrees of freedom, ``non_inferiority`` by the cluster score test
    (:func:`cluster_statistic`). A zero variance: harm knows the difference exactly (p =
    0 beyond the margin, else 1), non-inferiority has no evidence (p = 1). NaN with
    fewer than 2 clusters."""
    _check_mode(mode)
    d = np.asarray(balance, dtype=float)
    n = np.asarray(items, dtype=float)
    if d.size < 2 or n.sum() <= 0:
        return float("nan")
    T, df = cluster_statistic(d, n, margin, mode)
    if not np.isfinite(df):
        return float("nan")
    if not np.isfinite(T):
        return normal_test(float(d.sum() / n.sum()), 0.0, margin, mode) if mode == "harm" \
            else 1.0
    return _one_sided(float(T), mode, df)


def effective_clusters(items: ArrayLike) -> float:
    """Kish's effective number of clusters ``N^2 / sum n_t^2`` (C for equal sizes)."""
    n = np.asarray(items, dtype=float)
    return float(n.sum() ** 2 / (n @ n)) if n.size else float("nan")


def cluster_detectable_drop(items: ArrayLike, spread: ArrayLike, discordance: float,
                            margin: float, alpha: float, mode: GateMode,
                            power: float = POWER, sims: int = 4000, seed: int = 0) -> float:
    """Smallest true accuracy drop w the mode's clustered test (CR2 Wald for harm, the
    cluster score test for non-inferiority) fails with probability ``power`` at the
    per-cell level ``alpha``, by simulating that test: cluster balances
    ``d_t ~ N(w n_t, sd_t^2)`` with ``sd_t`` the cluster's observed spread
    (:func:`cluster_spread`) but at least what independent items give at that drop,
    ``sqrt(n_t (psi_w - w^2))``, ``psi_w = max(discordance, |w|)`` (a drop of w needs
    discordant items; Connor 1987); ``sims`` seeded draws, the same at every w,
    bisection to 1e-5. NaN when no drop up to 1 reaches that power (harm, a cell too
    concentrated in a few clusters); -1 when non-inferiority fails whatever the
    candidate does."""
    _check_mode(mode)
    n = np.asarray(items, dtype=float)
    observed = np.asarray(spread, dtype=float)
    if n.size < 2 or not np.isfinite(observed).all() or not np.isfinite(discordance):
        return float("nan")
    _, df = cluster_statistic(np.zeros_like(n), n, margin, mode)
    crit = reference(df)[1](1.0 - alpha)
    Z = np.random.default_rng(seed).standard_normal((sims, n.size))

    def fail_rate(w: float) -> float:
        floor = np.sqrt(n * max(max(discordance, abs(w)) - w * w, 0.0))
        T, _ = cluster_statistic(w * n + Z * np.maximum(observed, floor), n, margin, mode)
        T = np.nan_to_num(T, nan=0.0)         # exactly at the margin: no evidence
        return float(np.mean(T > crit)) if mode == "harm" else float(np.mean(T >= -crit))

    lo, hi = -1.0, 1.0
    if fail_rate(lo) >= power:
        return -1.0
    if fail_rate(hi) < power:
        return float("nan")
    while hi - lo > 1e-5:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if fail_rate(mid) >= power else (mid, hi)
    return hi


def cluster_spread(balance: ArrayLike, items: ArrayLike) -> np.ndarray:
    """Each cluster's observed spread ``|d_t - w_hat n_t| sqrt(C / (C - 1))`` (their
    squares sum to the cluster-robust CR1 variance of ``w_hat`` times N^2)."""
    d = np.asarray(balance, dtype=float)
    n = np.asarray(items, dtype=float)
    C = d.size
    w = d.sum() / n.sum()
    return np.abs(d - w * n) * math.sqrt(C / (C - 1.0)) if C >= 2 else np.full(C, np.nan)


def detectable_worsening(se: float, margin: float, alpha: float, mode: GateMode,
                         power: float = POWER, n_clusters: float | None = None) -> float:
    """Smallest true worsening the gate fails with probability ``power`` at the
    per-cell level ``alpha``, for w_hat ~ N(w, se^2) (t quantiles and the C / (C - 1)
    factor with ``n_clusters``)."""
    _check_mode(mode)
    if not np.isfinite(se):
        return float("nan")
    factor, df = small_clusters(n_clusters)
    _, q = reference(df)
    se = se * math.sqrt(factor)
    za, zb = q(1.0 - alpha), q(power)
    return margin + (za + zb) * se if mode == "harm" else margin - (za - zb) * se


def detectable_accuracy_drop(n: int, discordance: float, margin: float, alpha: float,
                             mode: GateMode, power: float = POWER) -> float:
    """Smallest true accuracy drop the score test fails with probability ``power``
    (independent paired items, observed discordance (b + c) / n, normal quantiles); NaN
    when no drop up to 1 reaches that power. Clustered items:
    :func:`cluster_detectable_drop`."""
    _check_mode(mode)
    if n <= 0 or not np.isfinite(discordance):
        return float("nan")
    _, q = reference(None)
    za, zb = q(1.0 - alpha), q(power)
    s0 = math.sqrt(max(max(discordance, margin) - margin * margin, 0.0) / n)
    w = np.linspace(-1.0, 1.0, 200001)
    s1 = np.sqrt(np.maximum(np.maximum(discordance, np.abs(w)) - w * w, 0.0) / n)
    threshold = margin + za * s0 if mode == "harm" else margin - za * s0
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(s1 > 0, (w - threshold) / s1, np.where(w > threshold, np.inf, -np.inf))
    ok = z >= zb
    if mode == "harm":
        ok &= w >= margin
    if not ok.any():
        return float("nan")
    return float(w[np.argmax(ok)])


def p_value_verdict(holds: bool, p_value: float, alpha: float) -> str:
    """A rule with ``compare: p_value``: ``holds`` = the value satisfies the bound.
    Pass when it holds; when it does not, fail only if the permutation test rejects
    "no difference between groups" (p_value < alpha), else pass: the excess is within
    what group labels assigned at random produce. NaN p-value -> "not_evaluable"."""
    if holds:
        return "pass"
    if p_value is None or not np.isfinite(p_value):
        return "not_evaluable"
    return "fail" if p_value < alpha else "pass"
