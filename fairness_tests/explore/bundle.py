"""A run as the explorer's data: its verdicts, each linked to its cell's items
(:mod:`.cells`), and every records table as its family shows it (:mod:`.views`),
column by column.

A column is ``{"name", "kind": "num", "values": [...]}`` (missing: null) or ``{"name",
"kind": "str", "dict": [distinct values], "codes": [index per row, -1 missing]}``: a
prompt asked 20 times is stored once. The outcome of each answer is the column
``outcome`` of ``derived`` (not a column of the records).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from fairness_tests.explore.cells import link, rule_tables
from fairness_tests.explore.views import View, views
from fairness_tests.rules.evaluate import VERDICT_COLUMNS
from fairness_tests.rules.thresholds import RuleSet


def column(name: str, s: pd.Series) -> dict[str, Any]:
    """One column, encoded (module docstring)."""
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        if pd.api.types.is_integer_dtype(s):
            return {"name": name, "kind": "num", "values": [int(x) for x in s]}
        return {"name": name, "kind": "num", "values": [number(x) for x in s]}
    codes, uniques = pd.factorize(s.astype(object).where(s.notna(), None), sort=False)
    return {"name": name, "kind": "str", "dict": [str(u) for u in uniques],
            "codes": [int(c) for c in codes]}


def number(x: Any) -> float | int | None:
    """A JSON number: None for NaN or infinite, an int for a whole float."""
    if x is None:
        return None
    f = float(x)
    if not math.isfinite(f):
        return None
    return int(f) if f.is_integer() and abs(f) < 2**53 else f


def encode_view(v: View) -> dict[str, Any]:
    """One records table as the explorer's data."""
    return {"name": v.name, "n": len(v.frame), "key": v.key, "answer": v.answer,
            "text": v.text, "flags": v.flags, "correct": v.correct, "cluster": v.cluster,
            "highlight": v.highlight, "notes": v.notes,
            "columns": [column(str(c), v.frame[c]) for c in v.frame.columns],
            "derived": [column("outcome", v.outcome)]}


def verdict_rows(run, rules: RuleSet | None, shown: dict[str, View]) -> list[dict[str, Any]]:
    """Every verdict of ``run`` with where its items are: ``table``, ``records``,
    ``filter`` (the cell's values) and ``n_items``."""
    frames = {n: v.frame for n, v in shown.items()}
    by_rule = rule_tables(rules)
    out = []
    for r in run.verdicts.to_dict("records"):
        where = link(run.tables, frames, by_rule, str(r["rule"]), str(r["metric"]),
                     str(r["cell"]))
        row = {c: _plain(r.get(c)) for c in VERDICT_COLUMNS}
        row.update(table=where.table, records=where.records, filter=where.values,
                   n_items=where.n)
        out.append(row)
    return out


def _plain(x: Any) -> Any:
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, float, np.integer, np.floating)):
        return number(x)
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return "" if pd.isna(x) else str(x)


def run_bundle(run, rules: RuleSet | None, label: str) -> tuple[dict[str, Any], dict[str, View]]:
    """``run`` (a RunResult) as the explorer's data, and its views (for the pairs)."""
    shown = views(run)
    md = run.metadata
    return {"label": label, "model": md.model, "source": str(run.source or ""),
            "date": str(getattr(md, "evaluation_date", "") or ""),
            "thresholds": list(md.thresholds or []),
            "verdicts": verdict_rows(run, rules, shown),
            "records": [encode_view(v) for v in shown.values()]}, shown
