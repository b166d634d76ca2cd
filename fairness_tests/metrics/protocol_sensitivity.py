"""Protocol sensitivity: does a decision rule's verdict depend on the protocol cell?

Input: a cell-statistics table (e.g. :func:`fairness_tests.metrics.generative.cell_statistics`)
with columns ``cell_kind, cell, statistic, metric, value, ci_low, ci_high, n`` - one
row per protocol cell (``overall``; each prompt family; each decoding regime) and
statistic (``worst_slice``, ``disparity``, ``refusal_gap``).

A :class:`Rule` passes a cell when ``compared op bound`` holds, ``compared`` being the
cell's value, ci_low or ci_high (e.g. "flag if the worst-slice stereotype rate exceeds
0.05" = ``worst_slice stereotype value <= 0.05``). NaN -> ``not_evaluable``.

A rule is *protocol-dependent* when its evaluable cells (families, decoding regimes,
overall) do not all agree; the disagreeing cells are those whose status differs from
the overall verdict.

Spread decomposition (:func:`spread_decomposition`) of the slice x cell value matrix
``R[s, c]`` (S slices, C cells of one kind), grand mean ``m``, cell means ``m_c``::

    SS_total = sum_sc (R_sc - m)^2 = SS_cells + SS_within
    SS_cells = S * sum_c (m_c - m)^2         (spread across protocol cells)
    SS_within = sum_sc (R_sc - m_c)^2        (spread across slices within a cell)

The larger share dominates. Ranges are reported too: max_c m_c - min_c m_c, and the
mean over cells of max_s R_sc - min_s R_sc.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..run import VERDICT_COLUMNS
from ..stats import cell_id

OPS = {"<=": operator.le, ">=": operator.ge}
COMPARED = ("value", "ci_low", "ci_high")
STATISTICS = ("worst_slice", "disparity", "refusal_gap")


@dataclass(frozen=True)
class Rule:
    name: str
    metric: str
    bound: float
    statistic: str = "worst_slice"
    op: str = "<="
    compared: str = "value"
    rationale: str = ""


def rules_from_list(items: Iterable[dict[str, Any]], path: Any = None) -> list[Rule]:
    """Rules from a list of mappings (a YAML/JSON data file); errors name the key."""
    out = []
    for i, d in enumerate(items):
        key = f"rules[{i}]"
        if not isinstance(d, dict):
            raise ConfigError("must be a mapping", path=path, key=key)
        for k in ("name", "metric", "bound"):
            if k not in d:
                raise ConfigError(f"missing {k!r}", path=path, key=key)
        unknown = set(d) - {"name", "metric", "bound", "statistic", "op", "compared",
                            "rationale"}
        if unknown:
            raise ConfigError(f"unknown key(s) {sorted(unknown)}", path=path, key=key)
        r = Rule(**d)
        if r.op not in OPS:
            raise ConfigError(f"op must be one of {list(OPS)}", path=path, key=f"{key}.op")
        if r.compared not in COMPARED:
            raise ConfigError(f"compared must be one of {COMPARED}", path=path,
                              key=f"{key}.compared")
        if r.statistic not in STATISTICS:
            raise ConfigError(f"statistic must be one of {STATISTICS}", path=path,
                              key=f"{key}.statistic")
        if not isinstance(r.bound, (int, float)) or isinstance(r.bound, bool):
            raise ConfigError("bound must be a number", path=path, key=f"{key}.bound")
        out.append(r)
    return out


def from_thresholds(rules: Iterable[Any]) -> list[Rule]:
    """The generative threshold rules (``fairness_tests.rules.thresholds.Rule`` with
    ``table: generative_by_slice*`` and ``across: slice``) as protocol-sensitivity
    rules: ``reduce: max`` -> statistic ``worst_slice``, ``reduce: range`` ->
    ``disparity`` (``refusal_gap`` for the refusal metric). Rules that differ only in
    the table they read (overall / per family / per decoding) become one rule, since
    the protocol-sensitivity analysis evaluates every cell kind anyway."""
    out: dict[tuple, Rule] = {}
    for r in rules:
        if not str(r.table).startswith("generative_by_slice") or r.across != "slice":
            continue
        if r.reduce == "max":
            statistic = "worst_slice"
        elif r.reduce == "range":
            statistic = "refusal_gap" if r.metric == "refusal" else "disparity"
        else:
            continue
        key = (statistic, r.metric, r.op, float(r.bound), r.compare)
        if key not in out:
            name = r.id
            for suffix in ("_per_family", "_per_decoding", "_per_occupation"):
                name = name.replace(suffix, "")
            out[key] = Rule(name=name, metric=r.metric, bound=float(r.bound),
                            statistic=statistic, op=r.op, compared=r.compare,
                            rationale=r.rationale)
    return list(out.values())


def cell_verdicts(stats: pd.DataFrame, rule: Rule) -> pd.DataFrame:
    """Verdict table (``run.VERDICT_COLUMNS`` + ``cell_kind``): one row per cell."""
    t = stats[(stats["statistic"] == rule.statistic) & (stats["metric"] == rule.metric)]
    rows = []
    for r in t.itertuples(index=False):
        x = float(getattr(r, rule.compared))
        if np.isnan(x):
            status, why = "not_evaluable", f"{rule.compared} undefined"
        else:
            ok = OPS[rule.op](x, rule.bound)
            status = "pass" if ok else "fail"
            who = f" (slice {r.slice})" if getattr(r, "slice", "") else ""
            why = f"{rule.statistic} {rule.metric} {rule.compared} {x:.4g}{who} " \
                  f"{'' if ok else 'not '}{rule.op} {rule.bound:g}"
        rows.append({"rule": rule.name, "metric": rule.metric,
                     "cell": cell_id(r.cell_kind if r.cell_kind != "overall" else None, r.cell),
                     "value": r.value, "ci_low": r.ci_low, "ci_high": r.ci_high,
                     "compared": rule.compared, "op": rule.op, "bound": rule.bound,
                     "status": status, "rationale": rule.rationale, "why": why,
                     "cell_kind": r.cell_kind})
    return pd.DataFrame(rows, columns=[*VERDICT_COLUMNS, "cell_kind"])


def evaluate(stats: pd.DataFrame, rules: Iterable[Rule]) -> pd.DataFrame:
    parts = [cell_verdicts(stats, r) for r in rules]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=[*VERDICT_COLUMNS, "cell_kind"])


def protocol_dependence(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per rule: overall status, counts, ``protocol_dependent`` (evaluable cells
    disagree) and ``disagreeing`` (cells whose status differs from overall; if overall
    is not evaluable, the cells with the minority status)."""
    rows = []
    for rule, g in verdicts.groupby("rule", sort=False):
        ev = g[g["status"].isin(["pass", "fail"])]
        overall = g.loc[g["cell_kind"] == "overall", "status"]
        overall = overall.iloc[0] if len(overall) else "not_evaluable"
        statuses = set(ev["status"])
        dependent = len(statuses) > 1
        if overall in ("pass", "fail"):
            dis = ev[ev["status"] != overall]
        elif dependent:
            minority = ev["status"].value_counts().idxmin()
            dis = ev[ev["status"] == minority]
        else:
            dis = ev.iloc[0:0]
        rows.append({"rule": rule, "overall": overall,
                     "n_pass": int((ev["status"] == "pass").sum()),
                     "n_fail": int((ev["status"] == "fail").sum()),
                     "n_not_evaluable": int((g["status"] == "not_evaluable").sum()),
                     "protocol_dependent": dependent,
                     "disagreeing": ";".join(f"{c}={s}" for c, s in zip(dis["cell"], dis["status"]))})
    return pd.DataFrame(rows, columns=["rule", "overall", "n_pass", "n_fail", "n_not_evaluable",
                                       "protocol_dependent", "disagreeing"])


def spread_decomposition(slice_values: pd.DataFrame, cell_col: str,
                         slice_col: str = "slice") -> dict[str, Any]:
    """Decompose the slice x cell matrix of ``value`` (one metric, one cell kind; see the
    module docstring). Cells or slices with a NaN are dropped (complete matrix only)."""
    R = slice_values.pivot_table(index=slice_col, columns=cell_col, values="value",
                                 aggfunc="first", dropna=False)
    R = R.dropna(axis=0, how="any").dropna(axis=1, how="any")
    S, C = R.shape
    if S < 2 or C < 2:
        return {"n_slices": S, "n_cells": C, "ss_total": np.nan, "ss_cells": np.nan,
                "ss_within": np.nan, "share_cells": np.nan, "share_within": np.nan,
                "cell_range": np.nan, "mean_slice_range": np.nan, "dominant": "undefined"}
    M = R.to_numpy(dtype=float)
    m = M.mean()
    mc = M.mean(axis=0)
    ss_cells = float(S * ((mc - m) ** 2).sum())
    ss_within = float(((M - mc[None, :]) ** 2).sum())
    total = ss_cells + ss_within
    share = ss_cells / total if total > 0 else np.nan
    dominant = ("undefined" if total == 0 else
                "protocol_cells" if ss_cells > ss_within else
                "slices_within_cell" if ss_within > ss_cells else "tie")
    return {"n_slices": S, "n_cells": C, "ss_total": total, "ss_cells": ss_cells,
            "ss_within": ss_within, "share_cells": share,
            "share_within": (1 - share) if total > 0 else np.nan,
            "cell_range": float(mc.max() - mc.min()),
            "mean_slice_range": float((M.max(axis=0) - M.min(axis=0)).mean()),
            "dominant": dominant}
