"""Registry of the metric tables a run produces: their grouping columns and the
metric names each holds. Threshold files are validated against it on load, so a
misspelt metric or table is an error before any model is called. Every name here is
produced by some protocol on the committed recordings (a test checks it), so a rule
that validates is evaluable.

Metric names come from the modules that compute them; ``register_table`` lets a
plugin or a user extension add a table of its own.
"""
from __future__ import annotations

from fairness_tests.metrics.consistency import METRICS as _CONSISTENCY
from fairness_tests.metrics.generative import METRICS as _GENERATIVE

GENERATIVE_METRICS = frozenset({*_GENERATIVE, "error"})
BBQ_METRICS = frozenset({
    "accuracy", "s_dis", "s_amb", "sf", "df", "df_smoothed", "df_eb", "acc_reinf", "acc_counter",
    "acc_reinf_minus_counter", "invalid_rate", "position_bias", "position_share_a",
    "position_share_b", "position_share_c",
})
CONSISTENCY_METRICS = frozenset(_CONSISTENCY)
SLICE_VIEWS = {
    "generative_by_slice": ("slice",),
    "generative_by_slice_family": ("family", "slice"),
    "generative_by_slice_decoding": ("decoding", "slice"),
    "generative_by_slice_occupation": ("occupation", "slice"),
    "generative_by_slice_family_decoding": ("family", "decoding", "slice"),
    "generative_cells": ("cell_kind", "cell", "slice"),
}

# table name -> (grouping columns a rule's scope/across may name, metric names)
TABLES: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    "bbq": (("dataset", "context", "polarity"), BBQ_METRICS),
    "bbq_groups": (("dataset", "context", "group"), frozenset({"fav_rate", "invalid_rate"})),
    "consistency": (("dataset", "context", "polarity"), CONSISTENCY_METRICS),
    **{name: (cols, GENERATIVE_METRICS) for name, cols in SLICE_VIEWS.items()},
    "generative_summary": (("scope", "family", "slice"),
                           frozenset({f"worst_slice_{m}" for m in _GENERATIVE}
                                     | {f"disparity_{m}" for m in _GENERATIVE}
                                     | {"refusal_gap"})),
    "counterfactual": (("swap", "decoding", "context"),
                       frozenset({"share_philippe_manager", "share_elena_manager",
                                  "share_refused", "share_ambiguous", "follows_swap",
                                  "same_verdict", "follows_swap_decided"})),
}


def register_table(name: str, columns: tuple[str, ...], metrics: set[str] | frozenset[str]) -> None:
    """Add (or extend) a table in the registry."""
    if name in TABLES:
        cols, known = TABLES[name]
        TABLES[name] = (tuple(dict.fromkeys((*cols, *columns))), known | frozenset(metrics))
    else:
        TABLES[name] = (tuple(columns), frozenset(metrics))


def table_columns(name: str) -> tuple[str, ...]:
    return TABLES[name][0]


def table_metrics(name: str) -> frozenset[str]:
    return TABLES[name][1]
