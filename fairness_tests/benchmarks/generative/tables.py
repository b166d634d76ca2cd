"""THE generative table builder: scored generations -> every generative metric table.

The audit, ``fairness-tests generative score`` and the pytest plugin all call
:func:`generative_tables`, so every entry point gives the same numbers. Tables:

- ``generative_by_slice`` and its views ``generative_by_slice_<family|decoding|
  occupation|family_decoding>``: every metric per slice (x view column), Wilson or
  bootstrap CIs (:func:`fairness_tests.benchmarks.generative.metrics.slice_table`);
- ``generative_summary``: worst slice, disparity (max - min over slices, bootstrap CI)
  and refusal gap, overall and per family;
- ``generative_cells``: the per-slice metrics inside every PROTOCOL cell, with the cell
  as grouping columns ``cell_kind, cell`` (``overall/all``, ``family/F1``,
  ``decoding/t0.7_p0.9``). The decision rules are evaluated on it per protocol cell by
  the one rule engine (:mod:`fairness_tests.rules.protocol`);
- ``generative_seed_cells``: the same per seed, when several seeds were run. Seeds are
  a sampling dimension, not a protocol choice: they are reported as a spread, never
  counted as protocol cells;
- with a second rubric: ``scorer_sensitivity`` (per-slice deltas) and
  ``generative_cells_<rubric>`` (the protocol cells under that rubric, for verdicts that
  flip with the scorer).

Decoding cells are labelled ``t<temperature>_p<top_p>`` everywhere (one grouping).
"""
from __future__ import annotations

from typing import Callable, Sequence

import pandas as pd

from fairness_tests.benchmarks.generative import metrics as G
from fairness_tests.benchmarks.generative.schema import GenerativeCluster
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT, DEFAULT_SEED, METRIC_COLUMNS

PROTOCOL_KINDS: tuple[tuple[str, list[str]], ...] = (
    ("overall", []), ("family", ["family"]), ("decoding", ["decoding"]))
SUMMARY_COLUMNS = ["scope", "family", "slice", *METRIC_COLUMNS]


SliceTables = Callable[[Sequence[str]], pd.DataFrame]


def slice_tables(scored: pd.DataFrame, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
                 cluster: GenerativeCluster = "prompt") -> SliceTables:
    """``by -> G.slice_table(scored, by, ...)``, each grouping computed once (the per-slice
    view, the summary's worst slice and the protocol cells group by the same columns;
    a slice table is a pure function of its arguments). Returns a copy each time."""
    memo: dict[tuple[str, ...], pd.DataFrame] = {}

    def get(by: Sequence[str]) -> pd.DataFrame:
        key = tuple(by)
        if key not in memo:
            memo[key] = G.slice_table(scored, list(by), n_boot, seed, cluster)
        return memo[key].copy()
    return get


def generative_summary(scored: pd.DataFrame, n_boot: int = DEFAULT_N_BOOT,
                       seed: int = DEFAULT_SEED, cluster: GenerativeCluster = "prompt",
                       tables: SliceTables | None = None) -> pd.DataFrame:
    """Worst slice (overall and per family), disparity and refusal gap as one metric
    table: ``scope, family, slice, metric, value, ci_low, ci_high, n, ...`` with metric
    ``worst_slice_<m>``, ``disparity_<m>`` or ``refusal_gap``. Every row is a max-type
    statistic: its CI is the bootstrap of the maximum (or max - min) itself, beside the
    bias-corrected value and the permutation p-value of "no difference between slices"
    (:func:`fairness_tests.benchmarks.generative.metrics.max_over_slices`); ``slice`` names the
    worst slice. ``tables``: the run's :func:`slice_tables` (computed here if None)."""
    tables = tables or slice_tables(scored, n_boot, seed, cluster)
    parts = []
    for scope, by in (("overall", []), ("family", ["family"])):
        t = tables(by)
        w = G.worst_slice(t[t["metric"].isin(G.METRICS)], by)[[*by, "metric", "slice"]]
        w = w.merge(G.max_over_slices(scored, by, G.METRICS, "max", n_boot, seed, cluster),
                    on=[*by, "metric"], how="left")
        w["metric"] = "worst_slice_" + w["metric"]
        d = G.disparity(scored, by, G.METRICS, n_boot, seed, cluster)
        d["metric"] = "disparity_" + d["metric"]
        d["slice"] = ""
        g = G.refusal_gap(scored, by, n_boot, seed, cluster)
        g["slice"] = ""
        for part in (w, d, g):
            part["scope"] = scope
            if not by:
                part["family"] = ""
            parts.append(part[SUMMARY_COLUMNS])
    return pd.concat(parts, ignore_index=True)


def _cells(scored: pd.DataFrame, kinds, n_boot: int, seed: int,
           cluster: GenerativeCluster, tables: SliceTables | None = None) -> pd.DataFrame:
    tables = tables or slice_tables(scored, n_boot, seed, cluster)
    parts = []
    for kind, by in kinds:
        t = tables(by)
        cell = t[by[0]].astype(str) if by else "all"
        t = t.drop(columns=by).assign(cell_kind=kind, cell=cell)
        parts.append(t[["cell_kind", "cell", "slice", *METRIC_COLUMNS]])
    return pd.concat(parts, ignore_index=True)


def protocol_cells(scored: pd.DataFrame, n_boot: int = DEFAULT_N_BOOT,
                   seed: int = DEFAULT_SEED, cluster: GenerativeCluster = "prompt",
                   tables: SliceTables | None = None) -> pd.DataFrame:
    """Per-slice metrics in every protocol cell (overall, each family, each decoding)."""
    return _cells(scored, PROTOCOL_KINDS, n_boot, seed, cluster, tables)


def seed_cells(scored: pd.DataFrame, n_boot: int = DEFAULT_N_BOOT,
               seed: int = DEFAULT_SEED, cluster: GenerativeCluster = "prompt") -> pd.DataFrame:
    """Per-slice metrics per generation seed (cell_kind ``seed``); empty for one seed."""
    if "seed" not in scored or scored["seed"].nunique() < 2:
        return pd.DataFrame(columns=["cell_kind", "cell", "slice", *METRIC_COLUMNS])
    df = scored.assign(seed=scored["seed"].astype(int).astype(str))
    return _cells(df, (("seed", ["seed"]),), n_boot, seed, cluster)


def generative_tables(scored: pd.DataFrame, *, n_boot: int = DEFAULT_N_BOOT,
                      seed: int = DEFAULT_SEED, rubric: str = "published",
                      compare: tuple[str, pd.DataFrame] | None = None,
                      cluster: GenerativeCluster = "prompt") -> dict[str, pd.DataFrame]:
    """Every generative metric table (see the module docstring).

    ``scored``: the scorer's output (:func:`fairness_tests.scoring.lexical.score`), one
    row per generation, scored by the rubric named ``rubric``; ``compare``: ``(rubric name,
    the same generations scored by that rubric)`` for scorer sensitivity; ``cluster``:
    "prompt" (resample prompts, the default) or "row"."""
    df = G.with_cells(scored)
    tables = slice_tables(df, n_boot=n_boot, seed=seed, cluster=cluster)
    out = {name: tables(by) for name, by in G.VIEWS.items()}
    out["generative_summary"] = generative_summary(
        df, n_boot=n_boot, seed=seed, cluster=cluster, tables=tables)
    out["generative_cells"] = protocol_cells(
        df, n_boot=n_boot, seed=seed, cluster=cluster, tables=tables)
    seeds = seed_cells(df, n_boot=n_boot, seed=seed, cluster=cluster)
    if len(seeds):
        out["generative_seed_cells"] = seeds
    if compare is not None:
        name, other = compare
        ob = G.with_cells(other)
        other_tables = slice_tables(ob, n_boot=n_boot, seed=seed, cluster=cluster)
        ta = out["generative_by_slice"]
        tb = other_tables(())
        out["scorer_sensitivity"] = G.rubric_deltas(
            ta[ta["metric"].isin(G.METRICS)], tb[tb["metric"].isin(G.METRICS)],
            (rubric, name))
        out[f"generative_cells_{name}"] = protocol_cells(
            ob, n_boot=n_boot, seed=seed, cluster=cluster, tables=other_tables)
    return out
