"""Reference distributions for intervals and tests: the normal CDF, the Student t CDF
and quantile, and the small-sample correction for a cluster bootstrap.

Student t with ``df`` degrees of freedom: ``P(T <= t) = 1 - I_x(df/2, 1/2) / 2`` for
t > 0 with ``x = df / (df + t^2)`` (the regularized incomplete beta by its continued
fraction, modified Lentz); the quantile is ``scipy.stats.t.ppf`` (exact inverse, no
clamp: a bisection inside [-1000, 1000] returned -1000 for df = 1, p = 1e-4, where the
quantile is -3183.1).

Few clusters: a statistic resampled over C clusters has its plug-in bootstrap variance
taken times ``C / (C - 1)`` and is referred to Student t with ``C - 1`` degrees of
freedom (the usual small-sample correction of cluster-robust inference; Cameron &
Miller 2015). Items resampled: factor 1, normal reference.
"""
from __future__ import annotations

import functools
import math
from statistics import NormalDist
from typing import Callable

_N = NormalDist()


def normal_cdf(x: float) -> float:
    """Phi(x) by erfc: accurate in the far tails (NormalDist.cdf goes through erf and
    rounds every p below ~1e-17 to 0)."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def t_cdf(t: float, df: float) -> float:
    """Student t CDF with ``df`` degrees of freedom (see the module docstring)."""
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    if t * t == 0:          # t = 0, or so small that t^2 underflows
        return 0.5
    x, one_minus_x = df / (df + t * t), t * t / (df + t * t)   # 1 - x without cancellation
    a, b = df / 2.0, 0.5
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log(one_minus_x)) if x > 0 else 0.0
    ibeta = front * _betacf(a, b, x) / a if x < (a + 1) / (a + b + 2) else \
        1.0 - front * _betacf(b, a, one_minus_x) / b
    tail = 0.5 * ibeta
    return 1.0 - tail if t > 0 else tail


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student t with ``df`` degrees of freedom,
    ``scipy.stats.t.ppf`` (the inverse of the regularized incomplete beta; no bound on
    the result: df = 1, p = 1e-4 gives tan(pi (p - 1/2)) = -3183.1). Cached: a run asks
    for a few (p, df) pairs thousands of times."""
    # scipy.stats.t.ppf(p, df) is stdtrit(df, p) (loc 0, scale 1); scipy.special imports
    # in a fifth of scipy.stats' time
    from scipy.special import stdtrit  # noqa: PLC0415 (only here)
    return float(stdtrit(df, p))


def reference(df: float | None) -> tuple[Callable[[float], float], Callable[[float], float]]:
    """(cdf, quantile) of a test's reference distribution: normal (``df`` None or
    infinite), else Student t with ``df`` degrees of freedom."""
    if df is None or not math.isfinite(df):
        return normal_cdf, _N.inv_cdf
    return (lambda x: t_cdf(x, df)), (lambda p: t_quantile(p, df))


def small_clusters(n_clusters: float | None) -> tuple[float, float | None]:
    """(variance factor, degrees of freedom) for C resampled clusters: (C / (C - 1),
    C - 1); (1, None) when items were resampled (or C < 2)."""
    if n_clusters is None or not math.isfinite(n_clusters) or n_clusters < 2:
        return 1.0, None
    return n_clusters / (n_clusters - 1.0), n_clusters - 1.0


@functools.lru_cache(maxsize=4096)
def interval_expansion(n_clusters: float | None, level: float) -> float:
    """How much wider a cluster bootstrap's percentile interval is drawn about the
    point estimate: ``sqrt(C / (C - 1)) * t_{C-1}((1+level)/2) / z((1+level)/2)``
    (1 when items were resampled). C = 20, level 0.95: 1.026 * 2.093 / 1.960 = 1.096."""
    factor, df = small_clusters(n_clusters)
    if df is None:
        return 1.0
    p = 0.5 + level / 2.0
    return math.sqrt(factor) * t_quantile(p, df) / _N.inv_cdf(p)
