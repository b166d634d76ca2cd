"""Spread decomposition of a slice x protocol-cell value matrix: is the spread of a
metric across protocol cells (families, decoding regimes) or across slices within a
cell? (Verdicts per protocol cell come from the one rule engine:
:mod:`fairness_tests.rules.protocol`.)

Spread decomposition (:func:`spread_decomposition`) of the slice x cell value matrix
``R[s, c]`` (S slices, C cells of one kind), grand mean ``m``, cell means ``m_c``::

    SS_total = sum_sc (R_sc - m)^2 = SS_cells + SS_within
    SS_cells = S * sum_c (m_c - m)^2         (spread across protocol cells)
    SS_within = sum_sc (R_sc - m_c)^2        (spread across slices within a cell)

The larger share dominates. Ranges are reported too: max_c m_c - min_c m_c, and the
mean over cells of max_s R_sc - min_s R_sc.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


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
