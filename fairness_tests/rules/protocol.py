"""Protocol sensitivity with the one rule engine: does a verdict depend on the protocol?

A benchmark whose verdicts can depend on the protocol declares it
(``Benchmark.protocol_cells``: a :class:`ProtocolCells`): its decision rules ``across``
a column (the generative audit's ``across: slice``) are evaluated, by
:func:`fairness_tests.rules.evaluate.evaluate` itself, on its protocol-cell table, whose
grouping columns ``cell_kind, cell`` name the protocol cell (``overall``, ``family/F1``,
``decoding/t0.7_p0.9``). Rules that differ only in the table they read (overall / per
family / per decoding) are one property, so they are evaluated once per protocol cell
(:func:`protocol_rules`).

A verdict is *protocol-dependent* only when cells disagree beyond sampling noise:
some cell fails with its interval entirely on the failing side of the bound AND some
cell passes with its interval entirely on the passing side (for ``<=``: ``ci_low >
bound`` and ``ci_high <= bound``; for ``>=`` mirrored). Cells whose statuses differ
but whose intervals straddle the bound are reported as "not resolved at this sample
size". Rules compared on a reduction with no interval (``reduce: range``) can only be
"not resolved" when their cells disagree.

Seeds are a sampling dimension, not a protocol choice: the same rules evaluated per
seed (the declared seed table) give the seed spread (:func:`seed_spread`), reported
separately and never counted as protocol cells.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable

import numpy as np
import pandas as pd

from fairness_tests.core.registry import load, load_all
from fairness_tests.rules.thresholds import Rule


@dataclass(frozen=True)
class ProtocolCells:
    """What a benchmark declares about its protocol cells (``Benchmark.protocol_cells``
    names it, ``"module:NAME"``). ``table``: its metrics per protocol cell (grouping
    columns ``cell_kind, cell`` before ``across``); ``sources``: the tables whose rules
    ``across`` it are evaluated per protocol cell; ``id_suffixes``: removed from those
    rules' ids to name the property they share; ``seeds``: the same cells per seed (a
    spread, never protocol cells; None: none); ``spread``: ``((cell kind, table), ...)``,
    the tables the spread decomposition across each kind reads. The protocol cells of
    another rubric or scorer ``S`` are the table ``<table>_<S>``."""
    table: str
    sources: tuple[str, ...]
    across: str = "slice"
    id_suffixes: tuple[str, ...] = ()
    seeds: str | None = None
    spread: tuple[tuple[str, str], ...] = ()


def declared_cells() -> list[ProtocolCells]:
    """Every registered benchmark's :class:`ProtocolCells`, in registry order."""
    return [load(b.protocol_cells) for b in load_all()
            if getattr(b, "protocol_cells", None)]


DEPENDENCE_COLUMNS = ["rule", "overall", "n_pass", "n_fail", "n_not_evaluable",
                      "protocol_dependent", "disagreement", "disagreeing"]


def protocol_rules(rules: Iterable[Rule], cells: ProtocolCells,
                   table: str | None = None) -> list[Rule]:
    """The rules ``across`` ``cells.across`` of the ``cells.sources`` tables, retargeted
    at ``table`` (default: ``cells.table``, the protocol cells), one per property: rules
    equal but for their table and id become one, named by the id without its
    ``cells.id_suffixes`` suffix. Expected failures do not carry over (they are declared
    for the cells of the original table)."""
    table = table or cells.table
    out: dict[tuple, Rule] = {}
    for r in rules:
        if r.table not in cells.sources or r.across != cells.across:
            continue
        key = (r.metric, r.reduce, r.op, float(r.bound), r.compare, r.abs, r.minimum_n)
        if key in out:
            continue
        name = r.id
        for suffix in cells.id_suffixes:
            name = name.replace(suffix, "")
        if name in {x.id for x in out.values()}:
            name = r.id                   # another bound for the same property: its own id
        out[key] = replace(r, id=name, table=table, scope=(), expected_fail=None)
    return list(out.values())


def _resolved(row: pd.Series) -> str:
    """"fail" / "pass" when the row's interval lies entirely on that side of the
    bound, "" when it straddles it or is undefined."""
    lo, hi, b = float(row["ci_low"]), float(row["ci_high"]), float(row["bound"])
    if math.isnan(lo) or math.isnan(hi):
        return ""
    if row["op"] == "<=":
        return "fail" if lo > b else "pass" if hi <= b else ""
    return "fail" if hi < b else "pass" if lo >= b else ""


def protocol_dependence(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per rule: the overall cell's status, counts, ``protocol_dependent`` (cells
    disagree beyond noise), ``disagreement`` (``beyond_noise`` | ``within_noise``: the
    statuses differ but no interval separates them, "not resolved at this sample
    size" | ``none``) and ``disagreeing`` (cells whose status differs from overall)."""
    rows = []
    for rule, g in verdicts.groupby("rule", sort=False):
        ev = g[g["status"].isin(["pass", "fail"])]
        cell_all = g.loc[g["cell"] == "overall", "status"]
        overall = cell_all.iloc[0] if len(cell_all) else "not_evaluable"
        statuses = set(ev["status"])
        resolved = {_resolved(r) for _, r in ev.iterrows()} - {""}
        if len(statuses) < 2:
            kind = "none"
        elif resolved >= {"pass", "fail"}:
            kind = "beyond_noise"
        else:
            kind = "within_noise"
        if overall in ("pass", "fail"):
            dis = ev[ev["status"] != overall]
        elif len(statuses) > 1:
            dis = ev[ev["status"] == ev["status"].value_counts().idxmin()]
        else:
            dis = ev.iloc[0:0]
        rows.append({"rule": rule, "overall": overall,
                     "n_pass": int((ev["status"] == "pass").sum()),
                     "n_fail": int((ev["status"] == "fail").sum()),
                     "n_not_evaluable": int((g["status"] == "not_evaluable").sum()),
                     "protocol_dependent": kind == "beyond_noise", "disagreement": kind,
                     "disagreeing": ";".join(f"{c}={s}" for c, s in
                                             zip(dis["cell"], dis["status"], strict=True))})
    return pd.DataFrame(rows, columns=DEPENDENCE_COLUMNS)


def seed_spread(seed_verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per rule, over the seeds (prompts held fixed): the range of the compared value
    and how many seeds pass / fail: "with prompts held fixed, the worst-slice rate
    ranges over 0.094-0.125"."""
    rows = []
    for rule, g in seed_verdicts.groupby("rule", sort=False):
        v = g["value"].astype(float).to_numpy()
        d = v[~np.isnan(v)]
        rows.append({"rule": rule, "metric": g["metric"].iloc[0], "n_seeds": len(g),
                     "value_min": float(d.min()) if len(d) else np.nan,
                     "value_max": float(d.max()) if len(d) else np.nan,
                     "n_pass": int((g["status"] == "pass").sum()),
                     "n_fail": int((g["status"] == "fail").sum()),
                     "seeds": ";".join(f"{c}={_short(x)}"
                                       for c, x in zip(g["cell"], v, strict=True))})
    return pd.DataFrame(rows, columns=["rule", "metric", "n_seeds", "value_min", "value_max",
                                       "n_pass", "n_fail", "seeds"])


def _short(x: float) -> str:
    return "undefined" if math.isnan(x) else f"{x:.4g}"


def flipped_verdicts(verdicts_a: pd.DataFrame, verdicts_b: pd.DataFrame,
                     names: tuple[str, str] = ("published", "strict")) -> pd.DataFrame:
    """Verdict rows (rule, cell) whose status differs between two scorings."""
    a, b = names
    m = verdicts_a[["rule", "cell", "value", "status"]].merge(
        verdicts_b[["rule", "cell", "value", "status"]], on=["rule", "cell"],
        suffixes=(f"_{a}", f"_{b}"))
    return m[m[f"status_{a}"] != m[f"status_{b}"]].reset_index(drop=True)
