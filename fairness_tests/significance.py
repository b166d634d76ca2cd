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
McNemar's ``z = (b - c) / sqrt(b + c)``. Clustered items: the variance is multiplied
by the design effect (cluster-bootstrap variance / item-bootstrap variance).

Few clusters (a BBQ cell has 20 or 42 templates): when C clusters were resampled,
every test takes the variance times C / (C - 1) and refers z to Student t with C - 1
degrees of freedom (the usual small-sample correction of a cluster-robust test); with
items resampled the reference is the normal.

Power: the gate fails a cell when (harm) ``w_hat > m + z_{1-a} s`` or (non-inferiority)
``w_hat > m - z_{1-a} s``, at the per-cell level ``a = alpha / m_family`` (the first,
strictest step of Holm: a guarantee whatever the other cells do). With
``w_hat ~ N(w, s^2)`` the *minimal detectable worsening* at power ``1 - beta`` is
``m + (z_{1-a} + z_{1-beta}) s`` (harm) and ``m - (z_{1-a} - z_{1-beta}) s``
(non-inferiority; negative = the gate fails even an improvement that often). For
accuracy ``s`` depends on w through the discordance (Connor 1987):
``s0 = sqrt(deff (psi0 - m^2) / n)`` under H0 and ``s1 = sqrt(deff (psi_w - w^2) / n)``
under w, ``psi0 = max(psi_hat, m)`` and ``psi_w = max(psi_hat, |w|)`` with psi_hat the
observed discordance (b + c) / n; the power ``Phi((w - m -/+ z_{1-a} s0) / s1)`` is
solved for w on a grid of step 1e-5.
"""
from __future__ import annotations

import math
import numpy as np

from .distributions import reference, small_clusters

ALPHA = 0.05
POWER = 0.80
MODES = ("harm", "non_inferiority")


def holm(p_values) -> np.ndarray:
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


def _one_sided(z: float, mode: str, df: float | None = None) -> float:
    cdf, _ = reference(df)
    return cdf(-z) if mode == "harm" else cdf(z)


def normal_test(worsening: float, se: float, margin: float, mode: str,
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


def paired_rate_test(b: int, c: int, n: int, margin: float, mode: str,
                     deff: float = 1.0, n_clusters: float | None = None) -> float:
    """One-sided p-value of the score test of ``w = m`` for paired proportions
    (b: only the baseline right, c: only the candidate right, n pairs), variance
    times the design effect ``deff`` (NaN or < 0 -> 1) and, with ``n_clusters`` C, times
    C / (C - 1) against Student t with C - 1 degrees of freedom. At m = 0, deff = 1 and
    no clusters this is McNemar's test (normal form)."""
    _check_mode(mode)
    if n <= 0:
        return float("nan")
    deff = deff if (np.isfinite(deff) and deff > 0) else 1.0
    factor, df = small_clusters(n_clusters)
    psi = restricted_discordance(b, c, n, margin)
    var = factor * deff * (psi - margin * margin) / n
    d = (b - c) / n - margin
    if var <= 1e-15:
        return normal_test(d + margin, 0.0, margin, mode)
    return _one_sided(d / math.sqrt(var), mode, df)


def detectable_worsening(se: float, margin: float, alpha: float, mode: str,
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
                             mode: str, power: float = POWER, deff: float = 1.0,
                             n_clusters: float | None = None) -> float:
    """Smallest true accuracy drop the gate fails with probability ``power`` (paired
    items, observed discordance (b + c) / n, design effect ``deff``, t quantiles and
    the C / (C - 1) factor with ``n_clusters``); NaN when no drop up to 1 reaches that
    power."""
    _check_mode(mode)
    if n <= 0 or not np.isfinite(discordance):
        return float("nan")
    deff = deff if (np.isfinite(deff) and deff > 0) else 1.0
    factor, df = small_clusters(n_clusters)
    deff *= factor
    _, q = reference(df)
    za, zb = q(1.0 - alpha), q(power)
    s0 = math.sqrt(deff * max(max(discordance, margin) - margin * margin, 0.0) / n)
    w = np.linspace(-1.0, 1.0, 200001)
    s1 = np.sqrt(deff * np.maximum(np.maximum(discordance, np.abs(w)) - w * w, 0.0) / n)
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
