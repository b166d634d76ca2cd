"""The comparison's per-model sections: each compared family's own
(:meth:`fairness_tests.pipeline.benchmark.Family.compare_sections`, in registry order),
read from the models' run tables; and the shapes and number formats every section of
the report uses (:mod:`fairness_tests.pipeline.views`, :mod:`fairness_tests.pipeline.
view_tables`: what a family's folder builds its sections from).

Every table is also a set of rows of the long table :data:`LONG_COLUMNS` (what
``compare.csv`` holds): ``section, model, versus, cell, metric, value, ci_low,
ci_high, n, p_value, p_adjusted, note``.
"""
from __future__ import annotations

import pandas as pd

from fairness_tests.compare.models import Entry, compared
from fairness_tests.core.registry import load
from fairness_tests.pipeline.view_tables import fmt, fmt_ci, fmt_count_pct
from fairness_tests.pipeline.views import LONG_COLUMNS, Display, Section, long_row

__all__ = ["LONG_COLUMNS", "Display", "Section", "fmt", "fmt_ci", "fmt_count_pct", "long_frame",
           "long_row", "model_sections"]


def long_frame(rows: list[dict]) -> pd.DataFrame:
    """Long rows (:func:`long_row`) as a frame of :data:`LONG_COLUMNS`."""
    return pd.DataFrame(rows, columns=LONG_COLUMNS)


def model_sections(entries: list[Entry]) -> list[Section]:
    """Every per-model section, in report order: each compared family's, in registry
    order."""
    return [s for spec in compared() for s in load(spec.impl).compare_sections(entries)]
