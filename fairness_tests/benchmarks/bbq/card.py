"""The BBQ family on the card's results (:meth:`BBQFamily.card_results
<fairness_tests.pipeline.benchmark.Family.card_results>`): the BBQ table per dataset x
context (with its metric panels), the groups, and consistency over repeated runs (with
the per-item MFAA% and GTC% histograms, :func:`consistency_distribution`)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from fairness_tests.pipeline.views import Histograms, Panels, View

HIST_EDGES = [float(x) for x in range(0, 101, 10)]
BBQ_PLOT_METRICS = ("accuracy", "s_amb", "s_dis", "acc_reinf", "acc_counter",
                    "acc_reinf_minus_counter", "sf", "df", "df_smoothed", "df_eb",
                    "position_bias", "invalid_rate")
BBQ_ROW_COLUMNS = ("dataset", "context", "polarity")
#: the per-item columns the histograms count
PER_ITEM = ("mfaa", "gtc")

VIEWS = [
    View("Intersectional BBQ per dataset x context", "res_bbq", "bbq", prefer=BBQ_ROW_COLUMNS,
         plots=(Panels("bbq", "BBQ metrics per dataset x context with 95% CIs", BBQ_ROW_COLUMNS,
                       BBQ_PLOT_METRICS),)),
    View("BBQ per intersectional group", "res_bbq_groups", "bbq_groups",
         prefer=("dataset", "group")),
    View("Consistency over repeated runs", "res_consistency", "consistency",
         prefer=("dataset", "context"), also="consistency_distribution",
         plots=(Histograms("consistency_distribution", PER_ITEM),)),
]


def summaries(tables: Mapping[str, pd.DataFrame]) -> dict[str, Any]:
    """``consistency_distribution`` when the run has per-item consistency."""
    if "consistency_items" not in tables:
        return {}
    return {"consistency_distribution": consistency_distribution(tables["consistency_items"])}


def consistency_distribution(items: pd.DataFrame) -> dict:
    """Histogram (10-point bins, the last closed) of the per-item MFAA% and GTC%
    (columns ``mfaa``, ``gtc`` of ``consistency_items``)."""
    out = {}
    for m in PER_ITEM:
        x = pd.to_numeric(items[m], errors="coerce").dropna().to_numpy(dtype=float)
        counts, _ = np.histogram(x, bins=HIST_EDGES)
        out[m] = {"bin_edges": HIST_EDGES, "counts": [int(c) for c in counts], "n": int(x.size),
                  "mean": float(x.mean()) if x.size else None}
    return out
