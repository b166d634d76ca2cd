"""THE registry of a run's tables: their names, grouping columns and metric names, the
cell-id columns, the BBQ record columns and the tables' bootstrap units. A benchmark's
folder registers its own tables (:func:`register_table`, e.g.
:mod:`fairness_tests.benchmarks.bbq.schema`, :mod:`fairness_tests.benchmarks.generative.schema`);
:func:`registered` is the registry with all.

Every other module reads these names from here: the table builders name what they
compute with them, threshold
files are validated against :data:`TABLES` on load (so a misspelt metric or table is an
error before any model is called: :mod:`fairness_tests.rules.thresholds`), the run
directory reads the cell ids back as text (:data:`ID_COLUMNS`), the gate pairs records by
the item columns (:data:`BBQ_ITEM_COLUMNS`). Every metric named here is produced by some protocol
on the committed recordings (a test checks it), so a rule that validates is evaluable.
"""
from __future__ import annotations

from typing import Literal, NamedTuple, get_args

from fairness_tests.core.registry import load_all

#: the answer options of a BBQ item (the letters' distribution has one column each)
N_OPTIONS = 3

# ---------------------------------------------------------------- resampling units

#: the BBQ tables' bootstrap unit: the template (question_index) or the item
BBQCluster = Literal["template", "item"]
BBQ_CLUSTERS: tuple[BBQCluster, ...] = get_args(BBQCluster)

# ---------------------------------------------------------------- metric names


# ---------------------------------------------------------------- tables


class Table(NamedTuple):
    """A metric table: the grouping columns a rule's scope/across may name, and the
    metric names it holds."""
    columns: tuple[str, ...]
    metrics: frozenset[str]


TABLES: dict[str, Table] = {
}
#: the tables declared here (the others are registered from their benchmark's folder,
#: :func:`register_table`, and their own tests check that a run produces them)
DECLARED_HERE = frozenset(TABLES)

#: the values a grouping column can take, where they are fixed by the protocol
#: ("all": the row pooled over that column). A rule's scope value outside these is an
#: error when the thresholds file is read; the other columns' values depend on the run
#: (slices, families, groups ...) and are checked against the run's table.
COLUMN_VALUES: dict[str, dict[str, tuple[str, ...]]] = {
}

#: cell-id columns of the saved tables: always read back as text (a seed cell "1" stays
#: "1", not 1); every grouping column of :data:`TABLES`, and the rule and metric names
ID_COLUMNS: list[str] = [
    "dataset", "context", "polarity", "group", "slice", "family", "decoding", "occupation",
    "scope", "cell_kind", "cell", "rule", "swap", "metric", "scorer", "scorer_a", "scorer_b",
    "label"]


def register_table(name: str, table: Table,
                   values: dict[str, tuple[str, ...]] | None = None) -> None:
    """Register a benchmark's metric table (called from the benchmark's own light module,
    as :func:`fairness_tests.run.metadata.register_info` is): its grouping columns join
    :data:`ID_COLUMNS` (read back as text), ``values`` the fixed values of its columns
    (:data:`COLUMN_VALUES`, checked when a thresholds file is read). Registering a name
    again with another schema is an error; the same schema again is a no-op."""
    known = TABLES.get(name)
    if known is not None and known != table:
        raise ValueError(f"table {name!r} is already registered as {known}")
    TABLES[name] = table
    if values:
        COLUMN_VALUES[name] = dict(values)
    ID_COLUMNS.extend(c for c in table.columns if c not in ID_COLUMNS)


def registered() -> dict[str, Table]:
    """:data:`TABLES` with every registered benchmark's tables (their modules imported
    first: :func:`fairness_tests.core.registry.load_all`)."""
    load_all()
    return TABLES

# ---------------------------------------------------------------- BBQ records

#: one row per answer (every repeat and rotation): the item, the answer and its flags
BBQ_RECORD_COLUMNS = ["dataset", "example_id", "repeat", "rotation", "answer", "question_index",
                      "context", "polarity", "label", "unknown_loc", "target_loc", "group",
                      "correct", "invalid", "non_unknown", "biased", "fav"]
#: the record columns that describe the item (what the gate pairs runs by)
BBQ_ITEM_COLUMNS = ["dataset", "example_id", "question_index", "context", "polarity", "label",
                    "unknown_loc", "target_loc", "group"]
#: the answer distribution of a record, original option order
BBQ_LETTER_COLUMNS = [f"letter_p{k}" for k in range(N_OPTIONS)]

