"""Statistical helpers shared by every metric: one bootstrap, one Wilson interval,
one "rate per cell" helper and the one metric-table shape.

Metric table shape (every metric function returns it)::

    <grouping columns...>, metric, value, ci_low, ci_high, n, note

``value`` is a float; ``NaN`` means *undefined* and ``note`` then says why
(e.g. "no non-unknown answer"). ``inf`` is kept as ``inf`` (unbounded, e.g. DF);
JSON output writes it as ``"UB"`` (see :func:`json_value`).

Bootstrap
---------
:func:`bootstrap` is a vectorised percentile bootstrap over *items*. Every
statistic we need is a function of weighted column sums of a per-item matrix
``X`` (n_items x k): a resample is a vector of multiplicities ``w`` (how often
each item was drawn), and the statistic sees ``w @ X`` (a length-k vector of
sums).  All ``B`` resamples are computed at once as ``W @ X`` with ``W`` the
(B x n) multiplicity matrix, so there is no Python loop over resamples.

Wilson
------
:func:`wilson_ci` gives the Wilson score interval for k successes in n trials:
``(p + z^2/2n -/+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)``.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

DEFAULT_N_BOOT = 2000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.95

METRIC_COLUMNS = ["metric", "value", "ci_low", "ci_high", "n", "note"]


def multiplicities(n: int, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED) -> np.ndarray:
    """(n_boot x n) matrix: how many times each of n items is drawn in each resample
    (sampling n items with replacement). Deterministic for a given seed, so it is
    computed once per (n, n_boot, seed) and shared (read-only): every metric of a cell
    is then bootstrapped over the same resamples, as a paired analysis needs."""
    return _multiplicities(int(n), int(n_boot), int(seed))


@functools.lru_cache(maxsize=8)
def _multiplicities(n: int, n_boot: int, seed: int) -> np.ndarray:
    if n <= 0:
        W = np.zeros((n_boot, 0), dtype=np.float64)
    else:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, n, size=(n_boot, n))
        flat = (idx + (np.arange(n_boot)[:, None] * n)).ravel()
        W = np.bincount(flat, minlength=n_boot * n).reshape(n_boot, n).astype(np.float64)
    W.flags.writeable = False
    return W


def bootstrap(
    X: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
    W: np.ndarray | None = None,
) -> tuple[float, float, float]:
    """Point estimate and percentile CI of ``statistic`` over item resamples.

    ``X``: (n_items, k) per-item values. ``statistic``: maps an (m, k) array of
    column sums (one row per resample) to m values; it must be vectorised and may
    return NaN (undefined) or inf. The point estimate is ``statistic`` on the full
    sample. The CI is the (1-level)/2 and (1+level)/2 percentiles of the finite
    resample values; if fewer than half the resamples are defined the CI is NaN.
    ``W`` may be passed to reuse one multiplicity matrix for several statistics of
    the same items (paired comparisons need this).
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    n = X.shape[0]
    point = float(statistic(X.sum(axis=0)[None, :])[0]) if n else float("nan")
    if n == 0:
        return point, float("nan"), float("nan")
    if W is None:
        W = multiplicities(n, n_boot, seed)
    values = np.asarray(statistic(W @ X), dtype=np.float64)
    return (point, *percentile_ci(values, level))


def percentile_ci(values: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """Percentile interval of resample values; infinities are kept (they sort to the
    ends), NaNs (undefined resamples) are dropped; NaN if most resamples are undefined."""
    values = np.asarray(values, dtype=np.float64)
    defined = values[~np.isnan(values)]
    if defined.size == 0 or defined.size < 0.5 * values.size:
        return float("nan"), float("nan")
    alpha = (1.0 - level) / 2.0
    with np.errstate(invalid="ignore"):
        q = np.quantile(defined, [alpha, 1.0 - alpha])
    if np.isnan(q).any():  # interpolating between two equal infinities gives NaN
        q = np.where(np.isnan(q), np.quantile(defined, [alpha, 1.0 - alpha], method="nearest"), q)
    lo, hi = q
    return float(lo), float(hi)


def safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den elementwise, NaN where den == 0 (undefined, never 0)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def wilson_ci(k: float, n: float, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """Wilson score interval for a proportion k/n; (NaN, NaN) when n == 0."""
    if n <= 0:
        return float("nan"), float("nan")
    z = _z(level)
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at k = 0 (k = n) the bound is 0 (1) exactly; float rounding would leave ~1e-18
    lo = 0.0 if k <= 0 else max(0.0, centre - half)
    hi = 1.0 if k >= n else min(1.0, centre + half)
    return lo, hi


def _z(level: float) -> float:
    # inverse normal CDF via the error function (no scipy dependency)
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2.0)


def rate_table(
    df: pd.DataFrame,
    by: Sequence[str],
    flags: Iterable[str],
    method: str = "wilson",
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    """Rate of each 0/1 column in ``flags`` per cell of ``by``, with a CI, in the
    metric-table shape. ``method``: "wilson" (default). NaN flags are excluded from
    both numerator and denominator of that flag."""
    rows = []
    flags = list(flags)
    grouped = df.groupby(list(by), sort=True, dropna=False) if by else [((), df)]
    for key, g in grouped:
        key = key if isinstance(key, tuple) else (key,)
        for flag in flags:
            col = g[flag].dropna().astype(float)
            n, k = len(col), float(col.sum())
            if method != "wilson":
                raise ValueError(f"unknown rate CI method {method!r}")
            lo, hi = wilson_ci(k, n, level)
            rows.append(
                (*key, flag, k / n if n else float("nan"), lo, hi, n, "" if n else "no rows")
            )
    return pd.DataFrame(rows, columns=[*by, *METRIC_COLUMNS])


def mean_table(df: pd.DataFrame, by: Sequence[str], columns: Iterable[str],
               n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
               level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Mean of each numeric column per cell of ``by`` with a bootstrap CI
    (metric-table shape)."""
    rows = []
    columns = list(columns)
    grouped = df.groupby(list(by), sort=True, dropna=False) if by else [((), df)]
    for key, g in grouped:
        key = key if isinstance(key, tuple) else (key,)
        for c in columns:
            x = g[c].dropna().to_numpy(dtype=np.float64)
            if x.size == 0:
                rows.append((*key, c, float("nan"), float("nan"), float("nan"), 0, "no rows"))
                continue
            X = np.column_stack([x, np.ones_like(x)])
            v, lo, hi = bootstrap(X, lambda s: safe_ratio(s[:, 0], s[:, 1]), n_boot, seed, level)
            rows.append((*key, c, v, lo, hi, int(x.size), ""))
    return pd.DataFrame(rows, columns=[*by, *METRIC_COLUMNS])


def metric_row(metric: str, value: float, ci: tuple[float, float] = (float("nan"), float("nan")),
               n: int = 0, note: str = "", **cell) -> dict:
    """One row of a metric table as a dict (cell columns first)."""
    return {**cell, "metric": metric, "value": value, "ci_low": ci[0], "ci_high": ci[1],
            "n": n, "note": note}


def cell_id(*parts: object) -> str:
    """Readable cell id for test ids and snapshot keys: ``Race_x_gender/disambig``."""
    return "/".join(str(p) for p in parts if p is not None and str(p) != "")


def json_value(x: object) -> object:
    """JSON-safe scalar: inf -> "UB", NaN -> None, numpy scalars -> Python."""
    if isinstance(x, (np.floating, float)):
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "UB" if x > 0 else "-UB"
        return float(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x
