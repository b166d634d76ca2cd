"""The pieces a family's own ``compare`` sections are built from
(:meth:`fairness_tests.pipeline.benchmark.Family.compare_sections`): the report's number
formats (:func:`fmt`, :func:`fmt_ci`), lookups in the
models' run tables, tables with the models as rows (:class:`Column`,
:func:`models_table`), and dot plots of a section's long rows.

Nothing here computes a metric: every value, CI, n and note is the row of the run's
table that the audit or a score command wrote.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fairness_tests.core.fmt import fixed
from fairness_tests.pipeline.views import (
    Compared,
    Display,
    Figure,
    Section,
    as_float,
    long_row,
    missing,
)


def rows_where(table: pd.DataFrame | None, **cell) -> pd.DataFrame:
    """Rows of a run table whose grouping columns equal ``cell`` (text compared; an
    empty cell value matches the empty or missing column value)."""
    if table is None or not len(table):
        return pd.DataFrame(columns=["metric", "value", "ci_low", "ci_high", "n", "note"])
    m = np.ones(len(table), dtype=bool)
    for col, v in cell.items():
        if col not in table.columns:
            return table.iloc[0:0]
        m &= text(table[col]).to_numpy() == str(v)
    return table[m]


def text(s: pd.Series) -> pd.Series:
    return s.astype(object).where(s.notna(), "").astype(str)


def get(table: pd.DataFrame | None, metric: str, **cell) -> dict | None:
    """The run table's row of ``metric`` in ``cell`` as a dict, None when absent."""
    r = rows_where(table, **cell)
    r = r[text(r["metric"]).to_numpy() == metric] if len(r) else r
    if not len(r):
        return None
    return r.iloc[0].to_dict()


def values(t: pd.DataFrame | None, col: str) -> list[str]:
    """The distinct non-empty values of column ``col``, sorted."""
    if t is None or col not in t.columns or not len(t):
        return []
    return sorted(set(text(t[col])) - {""})


def long_from(section: str, model: str, cell: str, row: dict | None, metric: str,
              note: str = "") -> dict:
    """The long row of a run table's row (``note`` when the run lacks it)."""
    if row is None:
        return long_row(section, model, cell, metric, note=note or "not in this run")
    return long_row(section, model, cell, metric, row.get("value"), row.get("ci_low"),
                    row.get("ci_high"), row.get("n"), row.get("note"))


def with_ci(r: dict) -> str:
    return fmt_ci(r["value"], r["ci_low"], r["ci_high"])


def value(r: dict) -> str:
    return fmt(r["value"])


def percent(r: dict) -> str:
    return fmt(r["value"], 1)


def count(r: dict) -> str:
    return str(int(r["n"]))


def worst(r: dict) -> str:
    """A worst-slice row: its value and, when the run names it, its slice."""
    sl = slice_of(r)
    return f"{fmt(r['value'])} ({sl})" if sl else fmt(r["value"])


def slice_of(r: dict) -> str:
    return "" if missing(r.get("slice")) else str(r["slice"])


@dataclass(frozen=True)
class Column:
    """One column of a models-as-rows table: the run table's row of ``metric`` where
    the grouping columns equal ``where``, shown by ``show``; ``cell`` names it in the
    long table (``long=False``: shown only, e.g. the count of items)."""
    header: str
    cell: str
    metric: str
    where: dict
    show: Callable[[dict], str] = with_ci
    long: bool = True
    missing: str = "not in this run"


def models_table(section: str, title: str, entries: Sequence[Compared], protocol: str,
                 table: str, columns: list[Column]) -> tuple[Display, list[dict]]:
    """(the table shown, its long rows): one row per model, one column per spec."""
    rows, body = [], []
    for e in entries:
        t = e.table(protocol, table)
        line = [e.name]
        for c in columns:
            r = get(t, c.metric, **c.where)
            if c.long:
                rows.append(long_from(section, e.name, c.cell, r, c.metric, c.missing))
                if c.show is worst and r is not None and slice_of(r):   # the run's own column
                    rows[-1]["note"] = "; ".join(x for x in (f"slice {slice_of(r)}",
                                                             rows[-1]["note"]) if x)
            line.append("-" if r is None else c.show(r))
        body.append(line)
    return Display(title, ["Model", *[c.header for c in columns]], body), rows


def section(sid: str, title: str, intro: str, parts: list[tuple[Display, list[dict]]],
            notes: list[str] | None = None) -> Section:
    """A section of models-as-rows tables (:func:`models_table`'s parts)."""
    return Section(sid, title, intro=intro, tables=[d for d, _ in parts],
                   long=[r for _, rows in parts for r in rows], notes=list(notes or []))


def fmt(v, digits: int = 3) -> str:
    """A number as the report prints it (:func:`fairness_tests.core.fmt.fixed`): NaN ->
    "n/a", +inf -> "UB", else ``digits`` decimals (never "-0.000")."""
    return fixed(as_float(v), digits)


def fmt_ci(value, lo, hi, digits: int = 3) -> str:
    """``value [lo, hi]``; the value alone when the interval is undefined."""
    if math.isnan(as_float(lo)) and math.isnan(as_float(hi)):
        return fmt(value, digits)
    return f"{fmt(value, digits)} [{fmt(lo, digits)}, {fmt(hi, digits)}]"


def fmt_count_pct(count, pct) -> str:
    if math.isnan(as_float(count)):
        return "n/a"
    return f"{int(round(as_float(count)))} ({fmt(pct, 1)}%)"


# ---------------------------------------------------------------- figures

def lookup(long: list[dict], model: str, cell: str, metric: str) -> dict | None:
    """A section's long row of ``model``, ``cell``, ``metric`` (the first; None: none)."""
    return next((r for r in long if r["model"] == model and r["cell"] == cell
                 and r["metric"] == metric), None)


def point(label: str, r: dict | None) -> dict:
    """A figure's point (``label, value, lo, hi``) from a long row (None: undefined)."""
    if r is None:
        return {"label": label, "value": None, "lo": None, "hi": None}
    return {"label": label, "value": r["value"], "lo": r["ci_low"], "hi": r["ci_high"]}


def dot_plots(sec: Section, models: list[str], metrics: list[str],
              labels: dict[str, str] | None = None) -> list[Figure]:
    """One dot plot per cell x metric of the section's long rows, one row per model
    (titled ``label · cell``)."""
    out = []
    for cell in dict.fromkeys(r["cell"] for r in sec.long):
        for m in metrics:
            if not any(r["cell"] == cell and r["metric"] == m for r in sec.long):
                continue
            pts = [point(name, lookup(sec.long, name, cell, m)) for name in models]
            out.append(Figure("dot_ci", {"title": f"{(labels or {}).get(m, m)} · {cell}",
                                         "points": pts, "width": 480, "kind": "compare_dots"}))
    return out

