"""Apply decision rules to a run's metric tables -> the verdict table.

For each rule, the cells are the rows of ``tables[rule.table]`` with
``metric == rule.metric`` that match ``rule.scope``; with ``across`` the cells are
first reduced over that column (``max``/``min``: the worst row, with its CI;
``range``: max - min, no CI). The compared quantity ``q`` is the cell's
``value``, ``ci_low`` or ``ci_high`` (of ``|metric|`` when ``abs``), and

    status = "pass"  if q <op> bound        (op is <= or >=; inf compares as inf)
             "fail"  otherwise, or "expected_fail" when the rule declares it for the cell
             "not_evaluable" when q is undefined (NaN), the table/metric is absent,
                             or the cell is smaller than the rule's minimum

One minimum-size rule for every rule, table and cell: a row whose ``n`` column is
below :attr:`Rule.minimum_n` (the rule's ``min_n``, else
:data:`~fairness_tests.rules.thresholds.DEFAULT_MIN_N`) is not evaluable, "only N items
(< min_n M)" (an undefined value keeps its own reason, which says more); with
``across``, such rows are left out of the reduction like undefined ones, and a cell
none of whose rows is large enough is not evaluable for that reason.

Undefined is never a pass. The output has exactly :data:`VERDICT_COLUMNS`; ``abs``,
``across`` and ``reduce`` repeat the rule's own (what was compared: ``|metric|``, the
worst or the range over a column), so a reader of the verdicts alone (the card) can
say it. A declared
expected-failure reason has its placeholders filled from the row
(:func:`fairness_tests.rules.reasons.fill_reason`).
"""
from __future__ import annotations

import math
from typing import Collection, Iterable, Mapping

import numpy as np
import pandas as pd

from fairness_tests.core.errors import ConfigError, suggest
from fairness_tests.core.fmt import shown
from fairness_tests.metrics.schema import COLUMN_VALUES
from fairness_tests.rules.reasons import fill_reason
from fairness_tests.rules.thresholds import Rule, RuleSet
from fairness_tests.stats.bootstrap import METRIC_COLUMNS, cell_id

#: the verdict table's columns: one row per (rule, cell)
VERDICT_COLUMNS = [
    "rule", "metric", "cell", "value", "ci_low", "ci_high", "compared", "op", "bound",
    "status", "rationale", "why", "abs", "across", "reduce",
]


def grouping_columns(table: pd.DataFrame) -> list[str]:
    """The cell columns of a metric table: every column that is not a metric column."""
    return [c for c in table.columns if c not in METRIC_COLUMNS]


def _fmt(x: float) -> str:
    return shown(x, ".4g", unbounded="unbounded")


def _is_pooled(series: pd.Series) -> pd.Series:
    s = series.astype("object")
    return s.isna() | s.astype(str).isin(["", "all", "nan", "None"])


def _select(table: pd.DataFrame, rule: Rule) -> tuple[pd.DataFrame, str]:
    rows = table[table["metric"] == rule.metric]
    if rows.empty:
        return rows, f"metric {rule.metric!r} has no rows in table {rule.table!r}"
    for col, want in rule.scope:
        if col not in rows.columns:
            if want is None:
                continue            # the table is pooled over this column already
            return rows.iloc[0:0], (f"table {rule.table!r} has no column {col!r} "
                                    f"(scope {col}={want})")
        if want is None:
            rows = rows[_is_pooled(rows[col])]
        else:
            wanted = {str(w) for w in (want if isinstance(want, tuple) else (want,))}
            _check_scope_value(table, rule, col, wanted)
            rows = rows[rows[col].astype(str).isin(wanted)]
    if rows.empty:
        return rows, f"no cell of {rule.table}.{rule.metric} matches scope " + \
            ", ".join(f"{c}={v}" for c, v in rule.scope)
    return rows, ""


#: the metric that says what share of a cell's answers is invalid
INVALID = "invalid_rate"
NO_VALID = "no valid answer in this cell (invalid_rate 1): nothing to judge"


def without_valid_answers(table: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with the value and CI of every row whose cell has no valid answer
    (its ``invalid_rate`` row, same cell columns, is 1) made undefined, so the rule is
    not evaluable there: a rate over invalid answers only (SF 0, MFAA 100) is no
    verdict. The ``invalid_rate`` rows themselves are kept: they are what shows it."""
    if INVALID not in set(table["metric"]) or (rows["metric"] == INVALID).all():
        return rows
    cols = [c for c in grouping_columns(table) if c != "metric"]
    inv = table[table["metric"] == INVALID]
    dead = {tuple(str(v) for v in r) for r in
            inv.loc[inv["value"].astype(float) >= 1.0, cols].itertuples(index=False)}
    if not dead:
        return rows
    hit = np.array([tuple(str(v) for v in r) in dead
                    for r in rows[cols].itertuples(index=False)], dtype=bool)
    if not hit.any():
        return rows
    rows = rows.copy()
    rows.loc[hit, ["value", "ci_low", "ci_high"]] = np.nan
    note = rows["note"].astype(object).where(rows["note"].notna(), "").astype(str) \
        if "note" in rows.columns else pd.Series("", index=rows.index)
    rows["note"] = note.where(~hit, NO_VALID)
    return rows


def _check_scope_value(table: pd.DataFrame, rule: Rule, col: str, wanted: set[str]) -> None:
    """A scope value that matches no value of its column in the run's table is a
    mistake in the thresholds (a misspelt slice, family, group ...), never a silently
    unevaluated rule: ConfigError naming the rule's file and line and the values the
    column has. (Columns whose values the protocol fixes are checked when the file is
    read, and a valid value absent from this run, e.g. a category not run, is left to
    be not evaluable.)"""
    if col in COLUMN_VALUES.get(rule.table, {}):
        return
    present = sorted({str(v) for v in table[col].dropna()} - {"", "all", "nan", "None"})
    if wanted & set(present) or not present:
        return
    miss = sorted(wanted)[0]
    raise ConfigError(f"rule {rule.id!r}: scope value {miss!r} matches no value of column "
                      f"{col!r} of table {rule.table!r}{suggest(miss, present)}; its values: "
                      f"{', '.join(present)}", path=rule.source or None)


def _abs_ci(lo: float, hi: float) -> tuple[float, float]:
    """CI of |x| from a CI of x."""
    if math.isnan(lo) or math.isnan(hi):
        return float("nan"), float("nan")
    if lo <= 0 <= hi:
        return 0.0, max(-lo, hi)
    return min(abs(lo), abs(hi)), max(abs(lo), abs(hi))


def cell_name(row: pd.Series, cols: list[str]) -> str:
    """A row's cell id: its values of ``cols`` but the pooled ones ("all", empty), joined
    by "/" (``Race_x_SES/disambig``); "all" when every one is pooled."""
    parts = []
    for c in cols:
        v = row[c]
        if v is None or (isinstance(v, float) and math.isnan(v)) or str(v) in ("", "all"):
            continue
        parts.append(v)
    return cell_id(*parts) or "all"


def small_reason(n: float, minimum: int) -> str:
    """Why a cell of ``n`` items is below the minimum ``minimum``."""
    return f"only {int(n)} items (< min_n {minimum})"


def _small(n: pd.Series, minimum: int) -> pd.Series:
    """Per row: its ``n`` is known and below ``minimum``."""
    x = pd.to_numeric(n, errors="coerce").astype(float)
    return x.notna() & (x < minimum)


def _cells(rows: pd.DataFrame, rule: Rule, cols: list[str]) -> list[dict]:
    """One dict per cell: cell, value, ci_low, ci_high, n, note, detail, small (the
    reason it is below the rule's minimum size, or "")."""
    rows = rows.copy()
    v = rows["value"].astype(float)
    lo = rows["ci_low"].astype(float)
    hi = rows["ci_high"].astype(float)
    if rule.abs:
        ci = [_abs_ci(a, b) for a, b in zip(lo, hi, strict=True)]
        rows["value"] = v.abs()
        rows["ci_low"] = [c[0] for c in ci]
        rows["ci_high"] = [c[1] for c in ci]
    notes = rows["note"] if "note" in rows.columns else pd.Series("", index=rows.index)
    rows["note"] = notes.astype(object).where(notes.notna(), "").astype(str)
    if "n" not in rows.columns:
        rows["n"] = np.nan
    minimum = rule.minimum_n
    rows["_small"] = _small(rows["n"], minimum)
    if not rule.across:
        return [dict(cell=cell_name(r, cols), value=float(r["value"]),
                     ci_low=float(r["ci_low"]), ci_high=float(r["ci_high"]), n=r["n"],
                     note=r["note"], detail="",
                     small=small_reason(r["n"], minimum) if r["_small"] else "")
                for _, r in rows.iterrows()]
    keep = [c for c in cols if c != rule.across]
    out = []
    groups = rows.groupby(keep, sort=True, dropna=False) if keep else [((), rows)]
    for _, g in groups:
        first = g.iloc[0]
        cell = cell_name(first, keep)
        small = g[g["value"].notna() & g["_small"]]
        defined = g[g["value"].notna() & ~g["_small"]]
        undefined = len(g) - len(defined) - len(small)
        if defined.empty:
            why = (f"every {rule.across} is undefined" if small.empty else
                   f"every {rule.across} is undefined or too small: "
                   + small_reason(small["n"].max(), minimum).replace("only", "at most"))
            out.append(dict(cell=cell, value=float("nan"), ci_low=float("nan"),
                            ci_high=float("nan"), n=g["n"].sum(), note=why, detail="",
                            small=""))
            continue
        ranked = defined.sort_values("value", ascending=(rule.reduce == "min"), kind="stable")
        listing = "; ".join(
            f"{r[rule.across]} {_fmt(r['value'])} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]"
            for _, r in ranked.iterrows())
        extra = f" ({undefined} {rule.across} undefined, not counted)" if undefined else ""
        if len(small):
            extra += (f" ({len(small)} {rule.across} with fewer than min_n {minimum} items, "
                      f"not counted: " + ", ".join(
                          f"{r[rule.across]} ({int(r['n'])})" for _, r in small.iterrows())
                      + ")")
        top = ranked.iloc[0]
        if rule.reduce == "range":
            hi_row = defined.loc[defined["value"].idxmax()]
            lo_row = defined.loc[defined["value"].idxmin()]
            value = float(hi_row["value"]) - float(lo_row["value"])
            detail = (f"range over {rule.across}: max {hi_row[rule.across]} "
                      f"{_fmt(hi_row['value'])} - min {lo_row[rule.across]} "
                      f"{_fmt(lo_row['value'])}; by {rule.across}: {listing}{extra}")
            out.append(dict(cell=cell, value=value, ci_low=float("nan"), ci_high=float("nan"),
                            n=g["n"].sum(), note="", detail=detail, small=""))
        else:
            detail = (f"{'worst' if rule.reduce == 'max' else 'lowest'} {rule.across}: "
                      f"{top[rule.across]}; by {rule.across}: {listing}{extra}")
            out.append(dict(cell=cell, value=float(top["value"]), ci_low=float(top["ci_low"]),
                            ci_high=float(top["ci_high"]), n=top["n"], note=top["note"],
                            detail=detail, small=""))
    return out


def evaluate_rule(tables: Mapping[str, pd.DataFrame], rule: Rule) -> list[dict]:
    base = dict(rule=rule.id, metric=rule.metric, compared=rule.compare, op=rule.op,
                bound=rule.bound, rationale=rule.rationale, abs=bool(rule.abs),
                across=rule.across or "", reduce=rule.reduce if rule.across else "")
    table = tables.get(rule.table)
    if table is None or len(table) == 0:
        return [dict(base, cell="all", value=np.nan, ci_low=np.nan, ci_high=np.nan,
                     status="not_evaluable",
                     why=f"table {rule.table!r} is not in this run")]
    rows, why = _select(table, rule)
    if rows.empty:
        return [dict(base, cell="all", value=np.nan, ci_low=np.nan, ci_high=np.nan,
                     status="not_evaluable", why=why)]
    rows = without_valid_answers(table, rows)
    cols = grouping_columns(table)
    out = []
    for c in _cells(rows, rule, cols):
        q = c[rule.compare]
        row = dict(base, cell=c["cell"], value=c["value"], ci_low=c["ci_low"],
                   ci_high=c["ci_high"])
        detail = f"; {c['detail']}" if c["detail"] else ""
        undefined = q is None or math.isnan(q)
        if c["small"] and not (undefined and c["note"]):
            row.update(status="not_evaluable", why=f"{c['small']}{detail}")
        elif undefined:
            reason = c["note"] or ("the metric is undefined" if rule.compare == "value"
                                   else "its CI is undefined")
            row.update(status="not_evaluable", why=f"{rule.compare} undefined: {reason}{detail}")
        else:
            ok = q <= rule.bound if rule.op == "<=" else q >= rule.bound
            cmp = f"{rule.compare} {_fmt(q)} {'satisfies' if ok else 'violates'} " \
                  f"{rule.op} {rule.bound:g}"
            xf = fill_reason(rule.expected_fail_reason(c["cell"]), row)
            if ok:
                row.update(status="pass", why=cmp + detail +
                           (f"; declared expected_fail ({xf}) but it passed" if xf else ""))
            elif xf:
                row.update(status="expected_fail", why=f"expected: {xf}; {cmp}{detail}")
            else:
                row.update(status="fail", why=cmp + detail)
        out.append(row)
    return out


def evaluate(tables: Mapping[str, pd.DataFrame], rules: RuleSet | Iterable[Rule],
             asked: Collection[str] = ()) -> pd.DataFrame:
    """The verdict table (:data:`VERDICT_COLUMNS`), one row per (rule, cell). A
    benchmark's default rule (``optional``) whose table the run lacks has no row when
    the run did not ask one of its benchmarks (``owners``; ``asked``: the run's); asked
    (every answer failed, say) it is not evaluable, as a rule the user wrote for an
    absent table is."""
    rule_list = rules.rules if isinstance(rules, RuleSet) else list(rules)
    wanted = set(asked)
    rows = [r for rule in rule_list
            if not (rule.optional and rule.table not in tables and not wanted & set(rule.owners))
            for r in evaluate_rule(tables, rule)]
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def badness(v: pd.Series | dict) -> float:
    """How far a verdict row's compared quantity is on the wrong side of its bound
    (positive = violated; NaN = not evaluable)."""
    q = v[v["compared"]] if v["compared"] in v else v["value"]
    q = float(q)
    if math.isnan(q):
        return float("nan")
    return q - float(v["bound"]) if v["op"] == "<=" else float(v["bound"]) - q


def worst_cells(verdicts: pd.DataFrame, rule_id: str, k: int = 3) -> pd.DataFrame:
    """The k cells of a rule furthest on the wrong side of (or closest to) its bound."""
    rows = verdicts[verdicts["rule"] == rule_id].copy()
    if rows.empty:
        return rows
    rows["_bad"] = [badness(r) for _, r in rows.iterrows()]
    rows = rows[rows["_bad"].notna()].sort_values("_bad", ascending=False, kind="stable")
    return rows.drop(columns="_bad").head(k)
