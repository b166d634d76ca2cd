"""One draw, many statistics (issue 24): the tables that bootstrap and permute every
metric of a cell on shared draws equal the first, one-metric-at-a-time computation,
kept here only as the oracle (same seeds, so the numbers must be identical, not merely
close)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from fairness_tests.benchmarks.generative.metrics import _slice_stat, max_over_slices, with_cells
from fairness_tests.stats.bootstrap import (
    METRIC_COLUMNS,
    NAN,
    bootstrap,
    mean_table,
    metric_row,
    rate_table,
    ratio_stat,
    wilson_ci,
)
from fairness_tests.stats.distributions import t_quantile
from fairness_tests.stats.permutation import permutation_test


def ref_rate_table(df, by, flags, level=0.95, clusters=None, n_boot=2000, seed=0):
    rows = []
    grouped = df.groupby(list(by), sort=True, dropna=False) if by else [((), df)]
    for key, g in grouped:
        key = key if isinstance(key, tuple) else (key,)
        for flag in flags:
            col = g[flag]
            defined = col.notna().to_numpy()
            k, n = float(col[defined].astype(float).sum()), int(defined.sum())
            cell = dict(zip(by, key, strict=True))
            if n == 0:
                rows.append(metric_row(flag, NAN, n=0, note="no rows", **cell))
                continue
            if clusters is None:
                rows.append(metric_row(flag, k / n, wilson_ci(k, n, level), n=n, **cell))
                continue
            y = col[defined].to_numpy(dtype=np.float64)
            cl = g[clusters].to_numpy()[defined]
            est = bootstrap(np.column_stack([y, np.ones_like(y)]), ratio_stat, n_boot, seed,
                            level, clusters=cl)
            rows.append(metric_row(flag, est, n=n, **cell))
    return pd.DataFrame(rows, columns=[*by, *METRIC_COLUMNS])


def ref_mean_table(df, by, columns, n_boot=2000, seed=0, level=0.95, clusters=None):
    rows = []
    grouped = df.groupby(list(by), sort=True, dropna=False) if by else [((), df)]
    for key, g in grouped:
        key = key if isinstance(key, tuple) else (key,)
        cell = dict(zip(by, key, strict=True))
        for c in columns:
            defined = g[c].notna().to_numpy()
            x = g[c].to_numpy(dtype=np.float64)[defined]
            if x.size == 0:
                rows.append(metric_row(c, NAN, n=0, note="no rows", **cell))
                continue
            cl = None if clusters is None else g[clusters].to_numpy()[defined]
            est = bootstrap(np.column_stack([x, np.ones_like(x)]), ratio_stat, n_boot, seed,
                            level, clusters=cl)
            rows.append(metric_row(c, est, n=int(x.size), **cell))
    return pd.DataFrame(rows, columns=[*by, *METRIC_COLUMNS])


def ref_max_over_slices(scored, by, metrics, reduce, n_boot, seed, n_perm):
    df = with_cells(scored)
    ok = df[df["status"] != "error"]
    rows = []
    for key, g in ok.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        slices = sorted(g["slice"].unique())
        member = np.column_stack([(g["slice"] == s).to_numpy(dtype=float) for s in slices])
        clusters = g["prompt"].to_numpy()
        k = len(slices)
        stat = _slice_stat(k, reduce)
        for m in metrics:
            y = g[m].to_numpy(dtype=float)
            X = np.column_stack([member * y[:, None], member])
            est = bootstrap(X, stat, n_boot, seed, clusters=clusters)
            perm = permutation_test(
                np.column_stack([y, np.ones_like(y)]), g["slice"].to_numpy(),
                lambda S, stat=stat: stat(np.hstack([S[:, :, 0], S[:, :, 1]])),
                strata=g["frame"].to_numpy(), units=clusters, n_perm=n_perm, seed=seed)
            note = "" if k >= (1 if reduce == "max" else 2) else "fewer than two slices"
            rows.append(metric_row(m, est, n=len(g), note=note, p_value=perm.p_value,
                                   bias_corrected=True, **dict(zip(by, key, strict=True))))
    return pd.DataFrame(rows, columns=[*by, *METRIC_COLUMNS])


def _frame(seed: int, n: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "cell": rng.choice(["a", "b", "c"], n),
        "cl": rng.integers(0, 25, n).astype(str),
        "f1": rng.integers(0, 2, n).astype(float),
        "f2": (rng.random(n) < 0.1).astype(float),
        "f3": rng.integers(0, 2, n).astype(float),
        "x1": rng.normal(3.0, 2.0, n),
        "x2": rng.gamma(2.0, 1.5, n),
    })
    df.loc[rng.random(n) < 0.2, "f3"] = np.nan        # a flag defined on other rows
    df.loc[df["cell"] == "c", "x2"] = np.nan          # a column with no rows in one cell
    return df


@pytest.mark.parametrize("clusters", [None, "cl"])
def test_rate_table_equals_one_flag_at_a_time(clusters):
    df = _frame(1)
    got = rate_table(df, ["cell"], ["f1", "f2", "f3"], clusters=clusters, n_boot=300)
    want = ref_rate_table(df, ["cell"], ["f1", "f2", "f3"], clusters=clusters, n_boot=300)
    assert_frame_equal(got, want, check_exact=True)


@pytest.mark.parametrize("clusters", [None, "cl"])
def test_mean_table_equals_one_column_at_a_time(clusters):
    df = _frame(2)
    got = mean_table(df, ["cell"], ["x1", "x2", "f3"], n_boot=300, clusters=clusters)
    want = ref_mean_table(df, ["cell"], ["x1", "x2", "f3"], n_boot=300, clusters=clusters)
    assert_frame_equal(got, want, check_exact=True)


def _scored(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for fam in ("F1", "F2"):
        for para in (0, 1):
            for occ in ("nurse", "pilot", "cook"):
                for g in ("man", "woman"):
                    for rel in ("Muslim", "Christian"):
                        for s in range(3):
                            rows.append({"prompt_family": fam, "paraphrase_id": para,
                                         "occupation": occ, "slice_gender": g,
                                         "slice_religion": rel, "temperature": 0.7,
                                         "top_p": 0.9, "status": "ok", "seed": s,
                                         "refusal": float(rng.random() < 0.3),
                                         "stereotype": float(rng.random() < 0.2),
                                         "word_len": float(rng.integers(5, 40))})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("reduce", ["range", "max"])
def test_max_over_slices_equals_one_metric_at_a_time(reduce):
    scored = _scored(3)
    metrics = ["refusal", "stereotype", "word_len"]
    got = max_over_slices(scored, ["prompt_family"], metrics, reduce, n_boot=200, seed=5,
                          n_perm=300)
    want = ref_max_over_slices(scored, ["prompt_family"], metrics, reduce, 200, 5, 300)
    assert_frame_equal(got, want, check_exact=True)


def test_t_quantile_is_scipy_stats_t_ppf():
    from scipy.stats import t  # noqa: PLC0415  the oracle
    for df in (1, 2, 5, 9, 19, 41, 119, 2.5):
        for p in (0.5, 0.9, 0.975, 0.99, 0.9995, 1e-4):
            assert t_quantile(p, df) == float(t.ppf(p, df))
