"""The generative audit on the card's results (:meth:`GenerativeFamily.card_results
<fairness_tests.pipeline.benchmark.Family.card_results>`): per-slice rates (with their
panels), the worst slice per metric (a selection of the run's rows,
:func:`worst_slices`), slice x family (with its heatmaps), slice x decoding, the summary,
the scorers' tables and the protocol-dependent verdicts."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from fairness_tests.pipeline.views import Heatmaps, Panels, View

#: the rates' panel order (other rates follow by name)
RATE_METRICS_ORDER = ("stereotype", "demeaning", "pilot_harm", "refusal", "deflection",
                      "identity_salience", "title_mention", "religion_mention")
HEATMAP_METRICS = ("stereotype", "pilot_harm", "refusal")

VIEWS = [
    View("Generative audit per slice", "res_by_slice", "generative_by_slice", prefer=("slice",),
         plots=(Panels("slice_rates", "Per-slice rates with 95% CIs", ("slice",),
                       RATE_METRICS_ORDER, others=True, unit="rate", sort=True),)),
    View("Worst slice per metric", "res_worst_slice", "worst_slice", source="results",
         prefer=("scope", "metric", "slice")),
    View("Generative audit per slice x family", "res_by_slice_family",
         "generative_by_slice_family", prefer=("family", "slice"),
         plots=(Heatmaps(HEATMAP_METRICS, "slice", "family",
                         "{metric} rate: slice x prompt family"),)),
    *(View(title, f"res_{name}", name) for name, title in (
        ("generative_by_slice_decoding", "Generative audit per slice x decoding"),
        ("generative_summary", "Worst slice, disparity and refusal gap"),
        ("scorer_sensitivity", "Scorer sensitivity (same outputs, two rubrics)"),
        ("scorer_agreement", "Scorer agreement: raw agreement and Cohen's kappa per label "
                             "and slice (95% CI)"),
        ("scorer_flips", "Verdicts that change with the scorer"),
        ("protocol_sensitivity", "Protocol-dependent verdicts"))),
]


def summaries(tables: Mapping[str, pd.DataFrame]) -> dict[str, Any]:
    """``worst_slice`` when the run has a per-slice table (:func:`worst_slices`)."""
    worst = worst_slices(tables)
    return {"worst_slice": worst} if worst else {}


def worst_slices(tables: Mapping[str, pd.DataFrame]) -> list[dict]:
    """Selection only: the row with the largest value per metric (overall, and per
    family from the slice x family table); numbers as the table holds them (the card
    rounds every number it writes)."""
    out = []
    for name, keys, scope in (("generative_by_slice", ["metric"], None),
                              ("generative_by_slice_family", ["metric", "family"], "family")):
        t = tables.get(name)
        if t is None or not len(t):
            continue
        t = t[pd.to_numeric(t["value"], errors="coerce").notna()]
        for key, g in t.groupby(keys, sort=True):
            top = g.sort_values(["value", "slice"], ascending=[False, True],
                                kind="mergesort").iloc[0]
            out.append({"metric": str(key[0]),
                        "scope": f"family {key[1]}" if scope else "overall",
                        "slice": str(top["slice"]), "value": top["value"],
                        "ci_low": top["ci_low"], "ci_high": top["ci_high"]})
    return out
