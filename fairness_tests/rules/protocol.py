"""Protocol sensitivity with the one rule engine: does a verdict depend on the protocol?

The generative decision rules (``across: slice``) are evaluated, by
:func:`fairness_tests.rules.evaluate.evaluate` itself, on the table
``generative_cells``, whose grouping columns ``cell_kind, cell`` name the protocol
cell (``overall``, ``family/F1``, ``decoding/t0.7_p0.9``). Rules that differ only in
the table they read (overall / per family / per decoding) are one property, so they
are evaluated once per protocol cell (:func:`protocol_rules`).

A verdict is *protocol-dependent* only when cells disagree beyond sampling noise:
some cell fails with its interval entirely on the failing side of the bound AND some
cell passes with its interval entirely on the passing side (for ``<=``: ``ci_low >
bound`` and ``ci_high <= bound``; for ``>=`` mirrored). Cells whose statuses differ
but whose intervals straddle the bound are reported as "not resolved at this sample
size". Rules compared on a reduction with no interval (``reduce: range``) can only be
"not resolved" when their cells disagree.

Seeds are a sampling dimension, not a protocol choice: the same rules evaluated per
seed (``generative_seed_cells``) give the seed spread (:func:`seed_spread`), reported
separately and never counted as protocol cells.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterable

import numpy as np
import pandas as pd

from fairness_tests.rules.thresholds import Rule

PROTOCOL_TABLE = "generative_cells"
SEED_TABLE = "generative_seed_cells"
_SUFFIXES = ("_per_family", "_per_decoding", "_per_occupation", "_per_family_decoding")
DEPENDENCE_COLUMNS = ["rule", "overall", "n_pass", "n_fail", "n_not_evaluable",
                      "protocol_dependent", "disagreement", "disagreeing"]


def protocol_rules(rules: Iterable[Rule], table: str = PROTOCOL_TABLE) -> list[Rule]:
    """The slice rules of the generative tables, retargeted at ``table`` (the protocol
    cells), one per property: rules equal but for their table and id become one,
    named by the id without its ``_per_<view>`` suffix. Expected failures do not carry
    over (they are declared for the cells of the original table)."""
    out: dict[tuple, Rule] = {}
    for r in rules:
        if not r.table.startswith("generative_by_slice") or r.across != "slice":
            continue
        key = (r.metric, r.reduce, r.op, float(r.bound), r.compare, r.abs, r.minimum_n)
        if key in out:
            continue
        name = r.id
        for suffix in _SUFFIXES:
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
