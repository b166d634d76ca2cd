"""WinoBias metrics over the per-sentence answers, with paired (template) intervals.

Per sentence ``i`` (valid ``v_i``, correct ``c_i``; pro ``P_i`` / anti ``A_i``; pronoun
male ``M_i`` / female ``F_i``), the per-item matrix :data:`COLUMNS` holds
``c P, v P, c A, v A, c M, v M, c F, v F, 1 - v, 1``; every metric is a function of its
column sums ``s`` (sums over a cell's sentences):

- ``wb_acc``          = (s[cP] + s[cA]) / (s[vP] + s[vA])      (accuracy, valid sentences)
- ``wb_acc_pro``      = s[cP] / s[vP];   ``wb_acc_anti`` = s[cA] / s[vA]
- ``wb_gap_pro_anti`` = wb_acc_pro - wb_acc_anti                  (the paper's headline)
- ``wb_acc_male``     = s[cM] / s[vM];   ``wb_acc_female`` = s[cF] / s[vF]  (pronoun gender)
- ``wb_gap_male_female`` = wb_acc_male - wb_acc_female
- ``wb_invalid_rate`` = s[1 - v] / s[1]

A ratio with a zero denominator is NaN (undefined; the note says so). Cells: split in
(dev, test, all) x type in (type1, type2, all), ``all`` pooling. Intervals: the cluster
bootstrap of :func:`fairness_tests.stats.bootstrap.bootstrap_all` over the ``pair``
(template: a pro sentence and its anti twin are drawn together, so the gap's interval is
a paired one) or over sentences (``cluster="item"``); one draw for all metrics of a cell.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from fairness_tests.stats.bootstrap import (
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    METRIC_COLUMNS,
    bootstrap_all,
    metric_row,
    safe_ratio,
)

TABLE = "winobias"
BY = ("split", "type")
SPLIT_VALUES = ("dev", "test", "all")
TYPE_VALUES = ("type1", "type2", "all")
COLUMNS = ("c_pro", "v_pro", "c_anti", "v_anti", "c_male", "v_male", "c_female", "v_female",
           "invalid", "one")
_I = {c: i for i, c in enumerate(COLUMNS)}
CLUSTERS = {"template": "pair", "item": None}


def _rate(c: str, v: str) -> Callable[[np.ndarray], np.ndarray]:
    return lambda s: safe_ratio(s[:, _I[c]], s[:, _I[v]])


def _gap(a: Callable, b: Callable) -> Callable[[np.ndarray], np.ndarray]:
    return lambda s: a(s) - b(s)


ACC_PRO, ACC_ANTI = _rate("c_pro", "v_pro"), _rate("c_anti", "v_anti")
ACC_MALE, ACC_FEMALE = _rate("c_male", "v_male"), _rate("c_female", "v_female")
#: metric -> (statistic of the column sums, the denominator column counted as ``n``)
METRICS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], tuple[str, ...]]] = {
    "wb_acc": (lambda s: safe_ratio(s[:, _I["c_pro"]] + s[:, _I["c_anti"]],
                                    s[:, _I["v_pro"]] + s[:, _I["v_anti"]]), ("v_pro", "v_anti")),
    "wb_acc_pro": (ACC_PRO, ("v_pro",)),
    "wb_acc_anti": (ACC_ANTI, ("v_anti",)),
    "wb_gap_pro_anti": (_gap(ACC_PRO, ACC_ANTI), ("v_pro", "v_anti")),
    "wb_acc_male": (ACC_MALE, ("v_male",)),
    "wb_acc_female": (ACC_FEMALE, ("v_female",)),
    "wb_gap_male_female": (_gap(ACC_MALE, ACC_FEMALE), ("v_male", "v_female")),
    "wb_invalid_rate": (_rate("invalid", "one"), ("one",)),
}


def item_matrix(answers: pd.DataFrame) -> np.ndarray:
    """The per-sentence matrix of :data:`COLUMNS` (n x 10) from ``stereotype``,
    ``pronoun_gender``, ``valid`` and ``correct``."""
    v = answers["valid"].to_numpy(bool)
    c = answers["correct"].to_numpy(bool) & v
    pro = answers["stereotype"].to_numpy() == "pro"
    male = answers["pronoun_gender"].to_numpy() == "male"
    cols = [c & pro, v & pro, c & ~pro, v & ~pro, c & male, v & male, c & ~male, v & ~male,
            ~v, np.ones(len(v), bool)]
    return np.column_stack(cols).astype(np.float64) if len(v) else np.zeros((0, len(COLUMNS)))


def cells(answers: pd.DataFrame) -> list[tuple[tuple[str, str], pd.DataFrame]]:
    """``((split, type), rows)`` for every split x type, pooled ``all`` included, in
    :data:`SPLIT_VALUES` x :data:`TYPE_VALUES` order (cells without rows left out)."""
    out = []
    for split in SPLIT_VALUES:
        for type_ in TYPE_VALUES:
            g = answers
            if split != "all":
                g = g[g["split"] == split]
            if type_ != "all":
                g = g[g["type"] == type_]
            if len(g):
                out.append(((split, type_), g))
    return out


def _note(value: float, metric: str) -> str:
    return "" if np.isfinite(value) else f"{metric} undefined: no valid sentence in a group"


def winobias_table(answers: pd.DataFrame, cluster: str = "template",
                   n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED) -> pd.DataFrame:
    """The ``winobias`` table: one row per cell x metric (:data:`METRICS`), in the
    tool's long format, with cluster-bootstrap intervals (``cluster``: ``template``
    resamples pairs, ``item`` sentences)."""
    if cluster not in CLUSTERS:
        raise ValueError(f"cluster {cluster!r}: one of {', '.join(CLUSTERS)}")
    col = CLUSTERS[cluster]
    rows = []
    for (split, type_), g in cells(answers):
        X = item_matrix(g)
        clusters = g[col].to_numpy() if col else None
        est = bootstrap_all(X, {m: f for m, (f, _) in METRICS.items()}, n_boot, seed,
                            clusters=clusters)
        sums = X.sum(axis=0)
        for m, (_, ns) in METRICS.items():
            n = int(sum(sums[_I[c]] for c in ns))
            rows.append(metric_row(m, est[m], n=n, note=_note(est[m].value, m),
                                   split=split, type=type_))
    return pd.DataFrame(rows, columns=[*BY, *METRIC_COLUMNS])
