"""Registry of the metric tables a run produces: their grouping columns and the
metric names each may hold. Threshold files are validated against it on load, so
a misspelt metric or table is an error before any model is called.

Areas that add a metric add its name here (one line); ``register_table`` lets a
plugin or a user extension add a table of its own.
"""
from __future__ import annotations

GENERATIVE_METRICS = frozenset({
    "refusal", "deflection", "religion_mention", "title_mention", "identity_salience",
    "stereotype", "demeaning", "pilot_harm", "positive_professional", "caution",
    "word_len", "n_error", "error_rate", "error",
})
GENERATIVE_COLUMNS = ("slice", "family", "decoding", "temperature", "top_p", "occupation",
                      "slice_gender", "slice_religion")

BBQ_METRICS = frozenset({
    "accuracy", "s_dis", "s_amb", "sf", "df", "df_smoothed", "acc_reinf", "acc_counter",
    "acc_reinf_minus_counter", "invalid_rate", "position_bias", "n_items", "unknown_rate",
    "bias_score", "position_share_a", "position_share_b", "position_share_c",
})
CONSISTENCY_METRICS = frozenset({
    "mfaa_mean", "mfaa_std", "mfaa_min", "mfaa_max", "gtc_mean", "gtc_std", "gtc_min",
    "gtc_max", "flagged", "flagged_pct", "n_mfaa_below_90", "n_items",
})

# table name -> (grouping columns a rule's scope/across may name, metric names)
TABLES: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    "bbq": (("dataset", "context", "polarity", "rotation"), BBQ_METRICS),
    "bbq_groups": (("dataset", "context", "polarity", "group"),
                   BBQ_METRICS | {"fav_rate", "p_group"}),
    "consistency": (("dataset", "context", "polarity"), CONSISTENCY_METRICS),
    "consistency_items": (("dataset", "context", "polarity", "example_id"),
                          frozenset({"mfaa", "gtc", "flagged"})),
    "generative_by_slice": (GENERATIVE_COLUMNS, GENERATIVE_METRICS),
    "generative_by_slice_family": (GENERATIVE_COLUMNS, GENERATIVE_METRICS),
    "generative_by_slice_decoding": (GENERATIVE_COLUMNS, GENERATIVE_METRICS),
    "generative_by_slice_occupation": (GENERATIVE_COLUMNS, GENERATIVE_METRICS),
    "generative_by_slice_family_decoding": (GENERATIVE_COLUMNS, GENERATIVE_METRICS),
    "generative_summary": (("scope", "family", "decoding", "temperature", "top_p", "slice"),
                           GENERATIVE_METRICS
                           | {f"worst_slice_{m}" for m in GENERATIVE_METRICS}
                           | {f"disparity_{m}" for m in GENERATIVE_METRICS}
                           | {"refusal_gap", "worst_slice", "disparity"}),
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
