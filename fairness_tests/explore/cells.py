"""From a verdict (or a gate row) to the items behind it.

A verdict names its rule and its cell: the cell's grouping values but the pooled ones,
joined by "/" (``Race_x_SES/disambig``, "all" when every one is pooled:
:func:`fairness_tests.rules.evaluate.cell_name`). The rule names its table; the rows of
that table for the rule's metric whose cell name (over the table's grouping columns
but the rule's ``across``) is the verdict's give the cell's values, ``{column: value}``
without the pooled ones. The items are the rows of a family's records whose columns
equal those values (as text); a column the records lack is not filtered, so "all"
selects every row. The records are the family's whose declared tables
(:func:`fairness_tests.pipeline.benchmark.family_tables`) hold the rule's table, else
the first (registry order) whose records have every column of the cell and some row
in it. A cell no table row names (a gate metric no rule bounds) is matched on the
values of the records themselves (:func:`guess`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fairness_tests.pipeline.benchmark import families, family_tables
from fairness_tests.rules.evaluate import cell_name, grouping_columns
from fairness_tests.rules.thresholds import RuleSet


@dataclass(frozen=True)
class CellLink:
    """Where a verdict's items are: ``table`` (the rule's), ``values`` (the cell's
    grouping values), ``records`` (the records' name, None: none found) and ``n`` (how
    many records rows are in the cell)."""
    table: str | None
    values: dict[str, str] = field(default_factory=dict)
    records: str | None = None
    n: int = 0


def rule_tables(rules: RuleSet | None) -> dict[str, tuple[str, str | None, str]]:
    """``{rule id: (table, across, metric)}`` of a rule set."""
    return {r.id: (r.table, r.across, r.metric) for r in (rules.rules if rules else [])}


def owners() -> dict[str, str]:
    """``{table: records name}`` of the tables each registered family declares."""
    out: dict[str, str] = {}
    for spec in families():
        for t in family_tables(spec):
            out.setdefault(t, spec.records)
    return out


def cell_values(table: pd.DataFrame, metric: str, cell: str,
                across: str | None = None) -> dict[str, str] | None:
    """The grouping values of the row(s) of ``table`` for ``metric`` whose cell name is
    ``cell`` (``across`` left out of the name), pooled ones left out; None: no row."""
    rows = table[table["metric"].astype(str) == metric] if "metric" in table else table
    cols = [c for c in grouping_columns(table) if c not in ("metric", across)]
    for _, r in rows.iterrows():
        if cell_name(r, cols) == cell:
            return {c: str(r[c]) for c in cols if cell_name(r, [c]) != "all"}
    return None


def in_cell(frame: pd.DataFrame, values: Mapping[str, str]) -> np.ndarray:
    """Per row of ``frame``: its columns equal ``values`` (as text; columns ``frame``
    lacks are not filtered)."""
    mask = np.ones(len(frame), dtype=bool)
    for col, want in values.items():
        if col in frame.columns:
            mask &= (as_text(frame[col]) == want).to_numpy()
    return mask


def as_text(s: pd.Series) -> pd.Series:
    """A column as the text a cell value is compared with: integers without ".0"
    (a float column of whole numbers included), missing values as ""."""
    if pd.api.types.is_float_dtype(s):
        return pd.Series(["" if x != x else str(int(x)) if float(x).is_integer() else repr(x)
                          for x in s.astype(float)], index=s.index, dtype=object)
    return s.astype(object).where(s.notna(), "").astype(str)


def link(tables: Mapping[str, pd.DataFrame], frames: Mapping[str, pd.DataFrame],
         by_rule: Mapping[str, tuple[str, str | None, str]], rule: str, metric: str,
         cell: str) -> CellLink:
    """Where the items of ``rule``'s ``cell`` are among ``frames`` (``{records name:
    records as shown}``), found in the run's ``tables``: by the rule's table and metric,
    else (a rule the thresholds do not have) in every table with ``metric``."""
    candidates = ([by_rule[rule]] if rule in by_rule else
                  [(t, None, metric) for t, df in tables.items() if "metric" in df
                   and metric in set(df["metric"].astype(str))])
    for name, across, metric in candidates:
        table = tables.get(name)
        if table is None or not len(table):
            continue
        values = cell_values(table, metric, cell, across)
        if values is None:
            continue
        records = _records_of(name, values, frames)
        n = int(in_cell(frames[records], values).sum()) if records else 0
        return CellLink(name, values, records, n)
    return guess(cell, frames, candidates[0][0] if candidates else None)


def guess(cell: str, frames: Mapping[str, pd.DataFrame], table: str | None = None) -> CellLink:
    """A cell no table row names (a gate metric no rule bounds): each of its "/"-parts
    is a value of some columns of a records table; the first records (in order) that
    hold every part, filtered on every column holding it ("all": not linked)."""
    parts = [] if cell == "all" else cell.split("/")
    for name, frame in frames.items():
        values: dict[str, str] = {}
        for part in parts:
            cols = [c for c in frame.columns if not pd.api.types.is_float_dtype(frame[c])
                    and (as_text(frame[c]) == part).any()]
            if not cols:
                break
            values.update({c: part for c in cols})
        else:
            if parts:
                return CellLink(table, values, name, int(in_cell(frame, values).sum()))
    return CellLink(table)


def _records_of(table: str, values: Mapping[str, str],
                frames: Mapping[str, pd.DataFrame]) -> str | None:
    own = owners().get(table)
    if own in frames:
        return own
    for name, frame in frames.items():
        if values and all(c in frame.columns for c in values) and in_cell(frame, values).any():
            return name
    return None
