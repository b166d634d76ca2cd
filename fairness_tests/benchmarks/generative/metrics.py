"""Generative audit metrics: pure functions of a scored records table.

Input: the scorer's output (:func:`fairness_tests.scoring.lexical.score`): one row
per generation with ``prompt_family, occupation, slice_gender, slice_religion,
temperature, top_p, status`` and the score columns (NaN on error rows).

Definitions (g = a slice ``<gender>_<religion>``; "ok rows" = status != "error"):

- rate metric m (0/1 per row): ``P(m | g) = sum_ok m / n_ok(g)``, Wilson 95% CI
  (``stats.rate_table``)
- mean metric (positive_professional, caution, word_len): mean over ok rows, percentile
  bootstrap 95% CI (``stats.mean_table``)
- ``error`` = n_error(g) / n(g) over ALL rows (failed generations are an outcome,
  never dropped), Wilson CI
- worst slice of m = argmax_g value(m, g) (ties: first slice in sorted order)
- disparity of m = max_g value(m, g) - min_g value(m, g); CI by the one bootstrap
  (``stats.bootstrap``, the statistic recomputed from per-slice sums)
- refusal gap = max over slice pairs |P(refusal|g) - P(refusal|g')|, which equals the
  disparity of refusal (max - min)

Resampling (``cluster``): ``"prompt"`` (default) resamples whole prompts (family x
paraphrase x occupation x slice: one prompt text, asked over decodings and seeds, whose
generations are not independent), so every CI is a cluster bootstrap with
``n_clusters`` and ``deff``; ``"row"`` treats generations as independent (Wilson
intervals for rates, a row bootstrap for means).

Max-type statistics (worst slice, disparity, refusal gap) carry the bootstrap
bias-corrected estimate ``value_bc`` and the permutation p-value ``p_value`` of "no
difference between slices" (:mod:`fairness_tests.stats.permutation`): the slice labels of
whole prompts permuted within their frame (family x paraphrase x occupation), or of
rows with ``cluster="row"``.
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np
import pandas as pd

from fairness_tests.benchmarks.generative.schema import (
    GENERATIVE_CLUSTERS,
    GENERATIVE_MEAN_METRICS,
    GENERATIVE_METRICS,
    GENERATIVE_RATE_METRICS,
    VIEWS,
    GenerativeCluster,
)
from fairness_tests.core.errors import ConfigError
from fairness_tests.models.requests.request import decoding_label
from fairness_tests.stats.bootstrap import (
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    METRIC_COLUMNS,
    bootstrap_all,
    mean_table,
    metric_row,
    rate_table,
    safe_ratio,
)
from fairness_tests.stats.permutation import DEFAULT_N_PERM, permutation_tests

CLUSTERS = GENERATIVE_CLUSTERS

RATE_METRICS = GENERATIVE_RATE_METRICS
MEAN_METRICS = GENERATIVE_MEAN_METRICS
METRICS = GENERATIVE_METRICS


def with_cells(scored: pd.DataFrame) -> pd.DataFrame:
    """Add the cell columns ``slice`` (man_Muslim), ``family`` (F1) and ``decoding``
    (t0.2_p0.9) used for grouping, and the sampling units: ``frame`` (family x
    paraphrase x occupation: the prompt before the slice is filled in) and ``prompt``
    (frame x slice: one prompt text, asked over decodings and seeds; the cluster of
    the generative bootstrap)."""
    df = scored.copy()
    df["slice"] = df["slice_gender"].astype(str) + "_" + df["slice_religion"].astype(str)
    df["family"] = df["prompt_family"].astype(str)
    df["frame"] = (df["family"] + "|" + df["paraphrase_id"].astype(str) + "|"
                   + df["occupation"].astype(str))
    df["prompt"] = df["frame"] + "|" + df["slice"]
    df["decoding"] = [decoding_label(t, p)
                      for t, p in zip(df["temperature"], df["top_p"], strict=True)]
    df["is_error"] = (df["status"] == "error").astype(float)
    return df


def _check_cluster(cluster: GenerativeCluster) -> str | None:
    """The cluster column for ``cluster`` ("prompt" -> "prompt", "row" -> None)."""
    if cluster not in CLUSTERS:
        raise ConfigError(f"generative cluster must be one of {', '.join(CLUSTERS)}, "
                          f"got {cluster!r}")
    return "prompt" if cluster == "prompt" else None


def slice_table(scored: pd.DataFrame, by: Sequence[str] = (), n_boot: int = DEFAULT_N_BOOT,
                seed: int = DEFAULT_SEED, cluster: GenerativeCluster = "prompt") -> pd.DataFrame:
    """Metric table grouped by ``[*by, "slice"]``: every metric + ``error``."""
    cl = _check_cluster(cluster)
    df = scored if "prompt" in scored else with_cells(scored)
    keys = [*by, "slice"]
    ok = df[df["status"] != "error"]
    kw: dict[str, Any] = dict(clusters=cl, n_boot=n_boot, seed=seed)
    parts = [
        rate_table(ok, keys, RATE_METRICS, **kw),
        mean_table(ok, keys, MEAN_METRICS, **kw),
        rate_table(df, keys, ["is_error"], **kw).replace({"metric": {"is_error": "error"}}),
    ]
    out = pd.concat([p for p in parts if len(p)], ignore_index=True)
    # cells with only error rows have no ok-row table entries: add NaN rows, noted
    full = df[keys].drop_duplicates()
    have = out.loc[out["metric"] != "error", keys].drop_duplicates()
    missing = (full.merge(have, how="left", indicator=True).query("_merge == 'left_only'")
               if len(have) else full)
    if len(missing):
        extra = [{**dict(zip(keys, r, strict=True)), "metric": m, "value": np.nan, "ci_low": np.nan,
                  "ci_high": np.nan, "n": 0, "note": "no ok rows"}
                 for r in missing[keys].itertuples(index=False) for m in METRICS]
        out = pd.concat([out, pd.DataFrame(extra)], ignore_index=True)
    order = {m: i for i, m in enumerate([*METRICS, "error"])}
    out = out.sort_values(keys + ["metric"], key=lambda s: s.map(order) if s.name == "metric"
                          else s, kind="stable").reset_index(drop=True)
    return out[[*keys, *METRIC_COLUMNS]]


def all_tables(scored: pd.DataFrame, n_boot: int = DEFAULT_N_BOOT,
               seed: int = DEFAULT_SEED, cluster: GenerativeCluster = "prompt"
               ) -> dict[str, pd.DataFrame]:
    """Every view of :data:`~fairness_tests.metrics.schema.VIEWS` (per slice, slice x
    family, ...), by table name."""
    df = with_cells(scored)
    return {name: slice_table(df, by, n_boot, seed, cluster) for name, by in VIEWS.items()}


def worst_slice(table: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Per ``[*by, metric]``: the slice with the largest value, its value and CI.
    Columns: ``*by, metric, slice, value, ci_low, ci_high, n``. Undefined (all NaN) ->
    slice "" and NaN."""
    rows = []
    keys = [*by, "metric"]
    t = table.sort_values([*by, "slice"], kind="stable")
    for key, g in t.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        vals = g["value"].to_numpy(dtype=float)
        if np.all(np.isnan(vals)):
            rows.append((*key, "", np.nan, np.nan, np.nan, 0))
            continue
        r = g.iloc[int(np.nanargmax(vals))]
        rows.append((*key, r["slice"], r["value"], r["ci_low"], r["ci_high"], r["n"]))
    return pd.DataFrame(rows, columns=[*keys, "slice", "value", "ci_low", "ci_high", "n"])


def _slice_stat(k: int, reduce: str):
    """Statistic of sums laid out [y@s1 .. y@sk, n@s1 .. n@sk]: max over the slices with
    rows of the per-slice rates (``reduce="max"``) or max - min (``"range"``; NaN with
    fewer than two slices)."""
    def f(sums: np.ndarray) -> np.ndarray:
        rates = safe_ratio(sums[:, :k], sums[:, k:2 * k])
        defined = (~np.isnan(rates)).sum(axis=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            hi = np.nanmax(rates, axis=1)
            out = hi if reduce == "max" else hi - np.nanmin(rates, axis=1)
        out[defined < (1 if reduce == "max" else 2)] = np.nan
        return out
    return f


def max_over_slices(scored: pd.DataFrame, by: Sequence[str] = (),
                    metrics: Sequence[str] = METRICS, reduce: str = "range",
                    n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
                    cluster: GenerativeCluster = "prompt",
                    n_perm: int = DEFAULT_N_PERM) -> pd.DataFrame:
    """Metric table ``[*by, metric, ...]`` of a max-type statistic over the slices of each
    cell of ``by`` (ok rows): ``reduce="range"`` = max - min (disparity), ``"max"`` =
    the worst slice's value. Bootstrap CI (one multiplicity matrix per cell, shared by
    all metrics; prompts or rows resampled), ``value_bc`` and the permutation
    ``p_value`` (see the module docstring). ``n`` = ok rows in the cell."""
    cl = _check_cluster(cluster)
    df = scored if "prompt" in scored else with_cells(scored)
    ok = df[df["status"] != "error"]
    rows = []
    grouped = ok.groupby(list(by), sort=True) if by else [((), ok)]
    for key, g in grouped:
        key = key if isinstance(key, tuple) else (key,)
        slices = sorted(g["slice"].unique())
        clusters = g[cl].to_numpy() if cl else None
        k = len(slices)
        ests, perms = _cell_max_stats(g, slices, list(metrics), reduce, clusters,
                                      g["frame"].to_numpy() if cl else None,
                                      n_boot, seed, n_perm)
        note = "" if k >= (1 if reduce == "max" else 2) else "fewer than two slices"
        for m in metrics:
            rows.append(metric_row(m, ests[m], n=len(g), note=note, p_value=perms[m].p_value,
                                   bias_corrected=True, **dict(zip(by, key, strict=True))))
    return pd.DataFrame(rows, columns=[*by, *METRIC_COLUMNS])


def _cell_max_stats(g: pd.DataFrame, slices: list, metrics: list[str], reduce: str,
                    clusters: np.ndarray | None, strata: np.ndarray | None, n_boot: int,
                    seed: int, n_perm: int) -> tuple[dict, dict]:
    """(bootstrap estimates, permutation results) by metric of one cell: every metric
    rides on the same draws. The bootstrap resamples ``X = [member * y_1 .. member * y_M,
    member * w_1 .. member * w_M]`` once (``member``: the rows' slice indicators; ``w_j``:
    1 where metric j is scored), the permutation test permutes the slice labels of
    ``[y_1 .. y_M, w_1 .. w_M]`` once; metric j's statistic reads its own columns, which
    is the one-metric computation (column sums do not mix columns). A NaN score (a label
    a scorer does not give, an unjudged row) is left out of that metric's numerator and
    denominator, as in the rate tables; when no metric has one, the count columns are
    one shared ``member`` block."""
    k, M = len(slices), len(metrics)
    member = np.column_stack([(g["slice"] == s).to_numpy(dtype=float) for s in slices])
    raw = [g[m].to_numpy(dtype=float) for m in metrics]
    has_nan = any(np.isnan(y).any() for y in raw)
    ws = [(~np.isnan(y)).astype(float) for y in raw] if has_nan else [np.ones(len(g))]
    ys = [np.where(np.isnan(y), 0.0, y) for y in raw]
    count = [M + (j if has_nan else 0) for j in range(M)]      # metric j's count block
    stat = _slice_stat(k, reduce)
    X = np.column_stack([*(member * y[:, None] for y in ys), *(member * w[:, None] for w in ws)])
    boot = {m: (lambda s, j=j: stat(np.hstack([s[:, j * k:(j + 1) * k],
                                                s[:, count[j] * k:(count[j] + 1) * k]])))
            for j, m in enumerate(metrics)}
    perm = {m: (lambda S, j=j: stat(np.hstack([S[:, :, j], S[:, :, count[j]]])))
            for j, m in enumerate(metrics)}
    ests = bootstrap_all(X, boot, n_boot, seed, clusters=clusters)
    tests = permutation_tests(np.column_stack([*ys, *ws]), g["slice"].to_numpy(),
                              perm, strata=strata, units=clusters, n_perm=n_perm, seed=seed)
    return ests, tests


def disparity(scored: pd.DataFrame, by: Sequence[str] = (), metrics: Sequence[str] = METRICS,
              n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
              cluster: GenerativeCluster = "prompt") -> pd.DataFrame:
    """max - min across slices per cell of ``by`` (:func:`max_over_slices`)."""
    return max_over_slices(scored, by, metrics, "range", n_boot, seed, cluster)


def refusal_gap(scored: pd.DataFrame, by: Sequence[str] = (), n_boot: int = DEFAULT_N_BOOT,
                seed: int = DEFAULT_SEED, cluster: GenerativeCluster = "prompt") -> pd.DataFrame:
    """max over slice pairs |P(refusal|g) - P(refusal|g')| (= max - min), with CI;
    metric name ``refusal_gap``."""
    t = disparity(scored, by, ["refusal"], n_boot, seed, cluster)
    t["metric"] = "refusal_gap"
    return t


def error_counts(scored: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """``[*by, "slice", n, n_ok, n_error]``: rows per cell by status."""
    df = scored if "slice" in scored else with_cells(scored)
    keys = [*by, "slice"]
    g = df.groupby(keys, sort=True)
    out = g.size().rename("n").to_frame()
    out["n_error"] = g["is_error"].sum().astype(int)
    out["n_ok"] = out["n"] - out["n_error"]
    return out.reset_index()


# ---------------------------------------------------------------- scorer sensitivity

def rubric_deltas(table_a: pd.DataFrame, table_b: pd.DataFrame,
                  names: tuple[str, str] = ("published", "strict")) -> pd.DataFrame:
    """Join two metric tables of the same outputs scored by two rubrics on their cell
    columns + metric: ``value_<a>, value_<b>, delta = value_<b> - value_<a>``."""
    a, b = names
    cells = [c for c in table_a.columns if c not in METRIC_COLUMNS] + ["metric"]
    m = table_a[cells + ["value"]].merge(table_b[cells + ["value"]], on=cells, how="outer",
                                         suffixes=(f"_{a}", f"_{b}"))
    m["delta"] = m[f"value_{b}"] - m[f"value_{a}"]
    return m
