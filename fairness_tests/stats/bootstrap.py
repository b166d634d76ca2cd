"""Statistical helpers shared by every metric: one bootstrap (items or clusters
resampled), one Wilson interval, one "rate per cell" helper and the one metric-table
shape.

Metric table shape (every metric function returns it)::

    <grouping columns...>, metric, value, ci_low, ci_high, n, n_clusters, deff,
    value_bc, p_value, note

``value`` is a float; ``NaN`` means *undefined* and ``note`` then says why
(e.g. "no non-unknown answer"). ``inf`` is kept as ``inf`` (unbounded, e.g. DF);
JSON output writes it as ``"UB"`` (see :func:`fairness_tests.core.fmt.json_value`).
``n_clusters`` and ``deff`` describe a cluster bootstrap (NaN when items were resampled
or no bootstrap was made); ``value_bc`` is the bootstrap bias-corrected estimate and
``p_value`` the permutation p-value of "no difference between groups" (both only for
max-type metrics, NaN elsewhere).

Bootstrap
---------
:func:`bootstrap` is a vectorised percentile bootstrap. Every statistic we need is
a function of weighted column sums of a per-item matrix ``X`` (n_items x k): a
resample is a vector of multiplicities ``w`` (how often each item was drawn), and
the statistic sees ``w @ X`` (a length-k vector of sums). All ``B`` resamples are
computed at once as ``W @ X`` with ``W`` the (B x n) multiplicity matrix, so there
is no Python loop over resamples.

Cluster bootstrap: with ``clusters`` (one cluster code per item: a BBQ template, a
generative prompt) a resample draws C whole clusters with replacement out of the C
clusters, and an item's multiplicity is the number of times its cluster was drawn
(``W = Wc[:, cluster_of_item]``). Items of one cluster move together, so the
interval carries the between-cluster variance that an item bootstrap drops.
The design effect ``deff = var(cluster resamples) / var(item resamples)`` of the
same statistic says how much wider the truth is than the item bootstrap claims.

Few clusters (a BBQ cell has 20 or 42 templates): the percentile interval of a cluster
bootstrap over C clusters is too narrow (its variance is the plug-in one, C - 1 over C
of the unbiased, and its quantiles are normal-like where t with C - 1 degrees of
freedom applies). The reported interval is therefore read at a wider percentile
level, the one whose normal quantile is ``e`` times the nominal one:
``e = sqrt(C / (C - 1)) * t_{C-1}((1+level)/2) / z((1+level)/2)``, level ``2 Phi(e z) - 1``
(C = 20: e = 1.096, the 1.6% and 98.4% percentiles for a 95% interval; C = 42: e =
1.043; :func:`cluster_level`). Percentiles keep the interval inside what the
statistic can take (a rate stays in [0, 1]) and keep its asymmetry; the correction is
the one the gate's tests make. ``bench/bench_calibration.py`` shows its coverage.

Bias correction (for max-type metrics, whose plug-in estimate is biased upward):
``value_bc = 2 * value - mean(resample values)`` (the bootstrap bias estimate
``mean - value`` subtracted; not clipped, so it can fall below a metric's floor).

Wilson
------
:func:`wilson_ci` gives the Wilson score interval for k successes in n trials:
``(p + z^2/2n -/+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)``; it assumes
independent rows, so :func:`rate_table` uses the cluster bootstrap instead when
clusters are given.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from fairness_tests.stats.distributions import interval_expansion, normal_cdf

DEFAULT_N_BOOT = 2000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.95

MIN_CLUSTERS = 10        # fewer resampled clusters than this: the row's note says so
METRIC_COLUMNS = ["metric", "value", "ci_low", "ci_high", "n", "n_clusters", "deff", "value_bc",
                  "p_value", "note"]
NAN = float("nan")


def cluster_codes(clusters: Sequence | np.ndarray) -> tuple[np.ndarray, int]:
    """(codes 0..C-1 per item, C): the clusters numbered in sorted order of their
    labels (any hashable, sortable labels: ints, strings, tuples joined beforehand)."""
    arr = np.asarray(clusters)
    if arr.dtype.kind in "iub":
        uniq, codes = np.unique(arr, return_inverse=True)
        return codes.astype(np.int64).ravel(), len(uniq)
    codes, uniq = pd.factorize(arr.astype(object), sort=True)
    if (codes < 0).any():
        raise ValueError("cluster labels must not be missing (NaN/None)")
    return codes.astype(np.int64), len(uniq)


def multiplicities(n: int, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
                   clusters: Sequence | np.ndarray | None = None) -> np.ndarray:
    """(n_boot x n) matrix: how many times each of n items is drawn in each resample.

    Without ``clusters``: n items drawn with replacement. With ``clusters`` (one code
    per item): C clusters drawn with replacement out of C, each item counted as often
    as its cluster was drawn. Deterministic for a given seed, so it is computed once
    per (n, n_boot, seed[, clusters]) and shared (read-only): every metric of a cell
    is then bootstrapped over the same resamples, as a paired analysis needs."""
    if clusters is None:
        return _multiplicities(int(n), int(n_boot), int(seed))
    codes, n_clusters = cluster_codes(clusters)
    if len(codes) != n:
        raise ValueError(f"{len(codes)} cluster codes for {n} items")
    return _cluster_multiplicities(codes.tobytes(), n_clusters, int(n_boot), int(seed))


@functools.lru_cache(maxsize=8)
def _multiplicities(n: int, n_boot: int, seed: int) -> np.ndarray:
    if n <= 0:
        W = np.zeros((n_boot, 0), dtype=np.float64)
    else:
        rng = np.random.default_rng(seed)
        flat = rng.integers(0, n, size=(n_boot, n))
        flat += np.arange(n_boot)[:, None] * n      # in place: one (B x n) array less
        W = np.bincount(flat.ravel(), minlength=n_boot * n).astype(np.float64).reshape(n_boot, n)
    W.flags.writeable = False
    return W


@functools.lru_cache(maxsize=8)
def _cluster_multiplicities(codes: bytes, n_clusters: int, n_boot: int, seed: int) -> np.ndarray:
    c = np.frombuffer(codes, dtype=np.int64)
    W = np.ascontiguousarray(_multiplicities(n_clusters, n_boot, seed)[:, c])
    W.flags.writeable = False
    return W


@dataclass(frozen=True)
class Estimate:
    """A bootstrap estimate. Unpacks as ``value, ci_low, ci_high`` (the three numbers
    every metric row carries); the other fields describe the resampling.

    ``se``: standard deviation of the defined resample values; ``value_bc``: the
    bias-corrected estimate ``2 value - mean(resamples)``; ``n_clusters``: clusters
    resampled (NaN: items resampled); ``deff``: var(cluster resamples) /
    var(item resamples) (NaN: items resampled, or both variances 0)."""
    value: float
    ci_low: float
    ci_high: float
    se: float = NAN
    value_bc: float = NAN
    n_clusters: float = NAN
    deff: float = NAN

    def __iter__(self) -> Iterator[float]:
        return iter((self.value, self.ci_low, self.ci_high))


def bootstrap(
    X: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
    W: np.ndarray | None = None,
    clusters: Sequence | np.ndarray | None = None,
) -> Estimate:
    """Point estimate and percentile CI of ``statistic`` over item (or cluster) resamples.

    ``X``: (n_items, k) per-item values. ``statistic``: maps an (m, k) array of
    column sums (one row per resample) to m values; it must be vectorised and may
    return NaN (undefined) or inf. The point estimate is ``statistic`` on the full
    sample. The CI is the (1-level)/2 and (1+level)/2 percentiles of the finite
    resample values; if fewer than half the resamples are defined the CI is NaN, and
    so it is with a single cluster (every resample repeats it: no interval).
    ``clusters``: one cluster code per item -> cluster bootstrap, with the design
    effect against the item bootstrap of the same statistic. ``W`` may be passed to
    reuse one multiplicity matrix (built with the same ``clusters``) for several
    statistics of the same items (paired comparisons need this).
    """
    return bootstrap_all(X, {"": statistic}, n_boot, seed, level, W, clusters)[""]


def bootstrap_all(
    X: np.ndarray,
    statistics: Mapping[str, Callable[[np.ndarray], np.ndarray]],
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
    W: np.ndarray | None = None,
    clusters: Sequence | np.ndarray | None = None,
) -> dict[str, Estimate]:
    """:func:`bootstrap` of several statistics of the same per-item matrix: the
    resampled sums ``W @ X`` (and the item-bootstrap sums of the design effect) are
    computed once for all of them.

    A cluster bootstrap without a given ``W`` never expands the cluster draws to
    items: ``W @ X = Wc @ Xc`` with ``Wc`` the (B x C) cluster draw counts and ``Xc``
    the per-cluster column sums of X (C x k), C/n of the work."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    n = X.shape[0]
    if n == 0:
        return {k: Estimate(NAN, NAN, NAN) for k in statistics}
    total = X.sum(axis=0)[None, :]
    item_sums = n_clusters = None
    ci_level = level
    if clusters is not None:
        codes, C = cluster_codes(clusters)
        if len(codes) != n:
            raise ValueError(f"{len(codes)} cluster codes for {n} items")
        n_boot = W.shape[0] if W is not None else n_boot
        if W is None:
            Xc = np.zeros((C, X.shape[1]))
            np.add.at(Xc, codes, X)
            sums = _multiplicities(C, int(n_boot), int(seed)) @ Xc
        else:
            sums = W @ X
        n_clusters = float(C)
        item_sums = multiplicities(n, n_boot, seed) @ X
        ci_level = cluster_level(n_clusters, level)
    else:
        if W is None:
            W = multiplicities(n, n_boot, seed)
        sums = W @ X
    out = {}
    for name, statistic in statistics.items():
        point = float(statistic(total)[0])
        values = np.asarray(statistic(sums), dtype=np.float64)
        lo, hi = percentile_ci(values, ci_level)
        if n_clusters is not None and n_clusters < 2:
            lo = hi = NAN           # every resample is the one cluster: no interval
        se, mean = _spread(values)
        deff = NAN
        if item_sums is not None:
            item_se, _ = _spread(np.asarray(statistic(item_sums), dtype=np.float64))
            deff = design_effect(se, item_se)
        bc = 2.0 * point - mean if np.isfinite(point) and np.isfinite(mean) else NAN
        out[name] = Estimate(point, lo, hi, se, bc,
                             NAN if n_clusters is None else n_clusters, deff)
    return out


def cluster_level(n_clusters: float | None, level: float = DEFAULT_LEVEL) -> float:
    """The percentile level a cluster bootstrap over C clusters reads its interval at,
    so that the interval is as wide as the few-clusters correction asks:
    ``2 Phi(e z) - 1`` with ``z = z((1+level)/2)`` and ``e`` of
    :func:`fairness_tests.stats.distributions.interval_expansion` (C = 20, 95%: 0.968).
    ``level`` itself when items were resampled."""
    e = interval_expansion(n_clusters, level)
    return level if e == 1.0 else 2.0 * normal_cdf(e * _z(level)) - 1.0


def _spread(values: np.ndarray) -> tuple[float, float]:
    """(standard deviation, mean) of the finite resample values; NaN when most
    resamples are undefined or infinite (as :func:`percentile_ci`)."""
    finite = values[np.isfinite(values)]
    if finite.size < 2 or finite.size < 0.5 * values.size:
        return NAN, NAN
    return float(finite.std(ddof=1)), float(finite.mean())


def design_effect(cluster_se: float, item_se: float) -> float:
    """var(cluster bootstrap) / var(item bootstrap); 1 when both are 0 (a constant),
    NaN when undefined."""
    if not (np.isfinite(cluster_se) and np.isfinite(item_se)):
        return NAN
    if item_se == 0:
        return 1.0 if cluster_se == 0 else NAN
    return float((cluster_se / item_se) ** 2)


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

    return NormalDist().inv_cdf(0.5 + level / 2.0)


def rate_table(
    df: pd.DataFrame,
    by: Sequence[str],
    flags: Iterable[str],
    level: float = DEFAULT_LEVEL,
    clusters: str | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Rate of each 0/1 column in ``flags`` per cell of ``by``, with a CI, in the
    metric-table shape. Rows independent (``clusters`` None): the Wilson interval.
    ``clusters`` = the name of a cluster column: the cluster bootstrap of the ratio
    (rows of one cluster resampled together), with ``n_clusters`` and ``deff``.
    NaN flags are excluded from both numerator and denominator of that flag."""
    rows = []
    flags = list(flags)
    grouped = df.groupby(list(by), sort=True, dropna=False) if by else [((), df)]
    for key, g in grouped:
        key = key if isinstance(key, tuple) else (key,)
        cell: dict[str, Any] = dict(zip(by, key, strict=True))
        ests = (_column_means(g, flags, clusters, n_boot, seed, level)
                if clusters is not None else {})
        for flag in flags:
            col = g[flag]
            defined = col.notna().to_numpy()
            k, n = float(col[defined].astype(float).sum()), int(defined.sum())
            if n == 0:
                rows.append(metric_row(flag, NAN, n=0, note="no rows", **cell))
            elif clusters is None:
                rows.append(metric_row(flag, k / n, wilson_ci(k, n, level), n=n, **cell))
            else:
                rows.append(metric_row(flag, ests[flag], n=n, **cell))
    return pd.DataFrame(rows, columns=[*by, *METRIC_COLUMNS])


def _column_means(g: pd.DataFrame, columns: Sequence[str], clusters: str | None,
                  n_boot: int, seed: int, level: float) -> dict[str, Estimate]:
    """Bootstrap estimate of the mean of each column of ``g`` over its defined (non-NaN)
    rows (a rate for a 0/1 column), by column. Columns defined on the same rows share
    one resampling pass: one matrix ``X = [x_1 .. x_F, 1]`` whose resampled column sums
    (``W @ X``) serve every ratio ``sum x_j / sum 1`` (:func:`bootstrap_all`), which
    equals bootstrapping each ``[x_j, 1]`` on its own (same draws, same sums)."""
    masks: dict[bytes, list[str]] = {}
    defined = {c: g[c].notna().to_numpy() for c in columns}
    for c in columns:
        if defined[c].any():
            masks.setdefault(defined[c].tobytes(), []).append(c)
    cl_all = None if clusters is None else g[clusters].to_numpy()
    out: dict[str, Estimate] = {}
    for cols in masks.values():
        mask = defined[cols[0]]
        X = np.column_stack([*(g[c].to_numpy(dtype=np.float64)[mask] for c in cols),
                             np.ones(int(mask.sum()))])
        stats = {c: _ratio_of(j, len(cols)) for j, c in enumerate(cols)}
        cl = None if cl_all is None else cl_all[mask]
        out.update(bootstrap_all(X, stats, n_boot, seed, level, clusters=cl))
    return out


def _ratio_of(j: int, d: int) -> Callable[[np.ndarray], np.ndarray]:
    """The statistic ``s[:, j] / s[:, d]`` of resampled column sums (NaN when 0)."""
    return lambda s: safe_ratio(s[:, j], s[:, d])


def ratio_stat(s: np.ndarray) -> np.ndarray:
    """s[:, 0] / s[:, 1] (a rate or a mean from column sums; NaN when s[:, 1] = 0)."""
    return safe_ratio(s[:, 0], s[:, 1])


def mean_table(df: pd.DataFrame, by: Sequence[str], columns: Iterable[str],
               n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
               level: float = DEFAULT_LEVEL, clusters: str | None = None) -> pd.DataFrame:
    """Mean of each numeric column per cell of ``by`` with a bootstrap CI
    (metric-table shape); rows resampled, or whole clusters of the column
    ``clusters``."""
    rows = []
    columns = list(columns)
    grouped = df.groupby(list(by), sort=True, dropna=False) if by else [((), df)]
    for key, g in grouped:
        key = key if isinstance(key, tuple) else (key,)
        cell: dict[str, Any] = dict(zip(by, key, strict=True))
        ests = _column_means(g, columns, clusters, n_boot, seed, level)
        for c in columns:
            if c not in ests:
                rows.append(metric_row(c, NAN, n=0, note="no rows", **cell))
                continue
            rows.append(metric_row(c, ests[c], n=int(g[c].notna().sum()), **cell))
    return pd.DataFrame(rows, columns=[*by, *METRIC_COLUMNS])


def metric_row(metric: str, value: "float | Estimate",
               ci: tuple[float, float] = (NAN, NAN), n: int = 0, note: str = "",
               p_value: float = NAN, bias_corrected: bool = False, **cell: Any) -> dict:
    """One row of a metric table as a dict (cell columns first). ``value`` is a number
    (with ``ci``) or an :class:`Estimate`, whose ``n_clusters`` and ``deff`` fill those
    columns; ``bias_corrected``: also fill ``value_bc`` (max-type metrics only)."""
    est = value if isinstance(value, Estimate) else Estimate(float(value), *ci)
    return {**cell, "metric": metric, "value": est.value, "ci_low": est.ci_low,
            "ci_high": est.ci_high, "n": n, "n_clusters": est.n_clusters, "deff": est.deff,
            "value_bc": est.value_bc if bias_corrected else NAN, "p_value": p_value,
            "note": with_cluster_note(note, est, bias_corrected)}


def with_cluster_note(note: str, est: Estimate, bias_corrected: bool = False) -> str:
    """``note`` plus a warning when the interval rests on fewer than
    :data:`MIN_CLUSTERS` resampled clusters, and :func:`interval_note`."""
    parts = [note]
    if np.isfinite(est.n_clusters) and est.n_clusters < 2:
        parts.append("a single cluster: no interval (the run is too small for one; "
                     "resampling one cluster repeats it)")
    elif np.isfinite(est.n_clusters) and est.n_clusters < MIN_CLUSTERS:
        parts.append(f"only {int(est.n_clusters)} clusters resampled: a rough interval")
    parts.append(interval_note(est, bias_corrected))
    return "; ".join(x for x in parts if x)


def _outside(x: float, lo: float, hi: float) -> bool:
    """x lies outside [lo, hi] by more than rounding (False when any is NaN)."""
    if any(math.isnan(v) for v in (x, lo, hi)):
        return False
    tol = 1e-9 * max(1.0, abs(x)) if math.isfinite(x) else 0.0
    return x < lo - tol or x > hi + tol


def interval_note(est: Estimate, bias_corrected: bool = False) -> str:
    """Why a reported point estimate lies outside the reported interval ("" when none
    does). The interval is the percentile interval of the resamples of the plug-in
    ``value``; the resamples' mean is ``m = 2 value - value_bc``. The plug-in value
    falls outside it when the resamples are shifted from it (bias ``m - value``);
    ``value_bc = value - (m - value)`` is the value moved by minus that bias, and the
    interval moved by the same amount, ``[ci_low + value_bc - value, ci_high + value_bc -
    value]``, is quoted (it holds ``value_bc`` whenever the interval holds ``value``)."""
    v, lo, hi, bc = est.value, est.ci_low, est.ci_high, est.value_bc
    out = []
    finite_bc = bias_corrected and math.isfinite(bc) and math.isfinite(v)
    if _outside(v, lo, hi):
        bias = f" (bias estimate {v - bc:+.4g})" if finite_bc else ""
        out.append(f"value {v:.4g} is outside its percentile interval [{lo:.4g}, {hi:.4g}]: "
                   f"the resamples are shifted from it{bias}")
    if finite_bc and _outside(bc, lo, hi):
        shift = bc - v
        out.append(f"value_bc {bc:.4g} is outside [{lo:.4g}, {hi:.4g}], the interval of the "
                   f"plug-in value: the bias correction moves the value by {shift:+.4g}, and "
                   f"the interval by as much to [{lo + shift:.4g}, {hi + shift:.4g}]")
    return "; ".join(out)


def cell_id(*parts: object) -> str:
    """Readable cell id for test ids and snapshot keys: ``Race_x_gender/disambig``."""
    return "/".join(str(p) for p in parts if p is not None and str(p) != "")
