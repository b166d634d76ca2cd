"""BBQ's metric tables, declared (light: no pandas): their grouping columns, metric names
and the fixed values of their columns, registered in the table-schema registry
(:func:`fairness_tests.metrics.schema.register_table`) when the BBQ package is imported.
The table builder (:mod:`fairness_tests.benchmarks.bbq.tables`), the consistency metrics
and ``compare``'s consistency layout read these names from here."""
from __future__ import annotations

from fairness_tests.benchmarks.bbq.official import CATEGORIES
from fairness_tests.metrics.schema import Table

#: BBQ accuracy, bias scores, SF/DF, reinforcing/counter accuracy, invalid answers,
#: position bias (table ``bbq``)
BBQ_METRICS = frozenset({
    "accuracy", "s_dis", "s_amb", "sf", "df", "df_smoothed", "df_eb", "acc_reinf", "acc_counter",
    "acc_reinf_minus_counter", "invalid_rate", "position_bias", "position_share_a",
    "position_share_b", "position_share_c",
})
BBQ_GROUP_METRICS = frozenset({"fav_rate", "invalid_rate"})
#: MFAA / GTC over an item's repeats, summarised over items (in this order: the layout of
#: the consistency tables of the card and ``compare``)
CONSISTENCY_SUMMARY = ["mfaa_mean", "mfaa_std", "mfaa_min", "mfaa_max", "gtc_mean", "gtc_std",
                       "gtc_min", "gtc_max"]
CONSISTENCY_METRICS = [*CONSISTENCY_SUMMARY, "flagged", "flagged_pct", "n_mfaa_below_90"]

#: the tables: name -> (grouping columns, metric names)
TABLES: dict[str, Table] = {
    "bbq": Table(("dataset", "context", "polarity"), BBQ_METRICS),
    "bbq_groups": Table(("dataset", "context", "group"), BBQ_GROUP_METRICS),
    "consistency": Table(("dataset", "context", "polarity"), frozenset(CONSISTENCY_METRICS)),
}

#: the values a grouping column can take, fixed by the protocol ("all": the row pooled
#: over that column); a rule's scope value outside them is an error when the thresholds
#: file is read (the groups depend on the run)
_VALUES = {"dataset": (*CATEGORIES, "all"), "context": ("ambig", "disambig", "all"),
           "polarity": ("neg", "nonneg", "all")}
COLUMN_VALUES: dict[str, dict[str, tuple[str, ...]]] = {
    name: {c: _VALUES[c] for c in table.columns if c in _VALUES}
    for name, table in TABLES.items()}
