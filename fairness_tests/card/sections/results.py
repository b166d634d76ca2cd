"""Section 6, metrics and decision rules: metric definitions, each decision rule's
outcome, every verdict, and the results.

The card never recomputes a metric: ``results.tables`` are the run's tables; what a
family adds beside them (:meth:`~fairness_tests.pipeline.benchmark.Family.card_summaries`:
the generative audit's worst slice, a selection of its rows; BBQ's per-item consistency
histograms) is computed from them; the protocol-dependence and seed-spread
statements are the run's ``protocol_sensitivity`` and ``seed_spread`` rows put in words.
A verdict is *protocol-dependent* only when protocol cells disagree beyond sampling
noise (:mod:`fairness_tests.rules.protocol`); cells that disagree within noise are "not
resolved at this sample size". Seeds are a sampling dimension, reported as a spread with
the prompts held fixed, never as protocol cells.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from fairness_tests.card.schema import metric_definitions
from fairness_tests.card.sections.facts import RunFacts
from fairness_tests.card.values import records
from fairness_tests.core.fmt import finite
from fairness_tests.core.registry import load
from fairness_tests.pipeline.benchmark import families

COMPARED_TEXT = {"value": "point estimate", "ci_low": "CI lower bound", "ci_high": "CI upper bound"}
STATUSES = ("pass", "fail", "not_evaluable", "expected_fail")
DISAGREEMENT_TEXT = {
    "beyond_noise": "protocol-dependent beyond noise: a failing and a passing protocol cell "
                    "have intervals on opposite sides of the bound",
    "within_noise": "protocol cells disagree, but no interval separates them: not resolved "
                    "at this sample size",
    "none": "every evaluated protocol cell agrees: not protocol-dependent",
}
DOMINANT_TEXT = {"protocol_cells": "the cells differ more than the slices within a cell",
                 "slices_within_cell": "the slices within a cell differ more than the cells",
                 "tie": "cells and slices within a cell differ equally",
                 "undefined": "no spread"}
DOMINANT_PREFIX = "dominant_across_"


# ----------------------------------------------------------------------------- metrics

def metrics(f: RunFacts) -> list[dict]:
    """Every metric a table or verdict of the run holds, with its shipped definition and
    the bound the rules put on it."""
    defs = metric_definitions()
    names: set[str] = set()
    for name, t in f.tables.items():
        if name == "consistency_items":                # per-item columns mfaa, gtc
            names |= {"mfaa", "gtc"} & set(t.columns)
        elif "metric" in t.columns:
            names |= set(t["metric"].dropna().astype(str))
    v = f.verdicts
    names |= set(v["metric"].dropna().astype(str))
    bounds = {str(m): {float(b) for b in g["bound"].dropna() if finite(b) is not None}
              for m, g in v.groupby("metric", sort=True)}
    out = []
    for name in sorted(names):
        d = _definition(name, defs)
        entry = {"name": name, "definition": d["definition"]}
        if d.get("unit"):
            entry["unit"] = d["unit"]
        b = bounds.get(name)
        if b and len(b) == 1:
            entry["threshold"] = next(iter(b))
        elif b:
            entry["threshold"] = "per rule: see decision_rules"
        out.append(entry)
    return out


def _definition(name: str, defs: dict) -> dict:
    if name in defs:
        return defs[name]
    for suffix, word in (("_mean", "mean"), ("_std", "standard deviation"), ("_min", "minimum"),
                         ("_max", "maximum"), ("_pct", "percentage")):
        if name.endswith(suffix) and name[: -len(suffix)] in defs:
            base = defs[name[: -len(suffix)]]
            return {"unit": base.get("unit"),
                    "definition": f"{word} over items of: {base['definition']}"}
    for prefix in ("worst_slice_", "disparity_", "rubric_delta_"):
        if name.startswith(prefix) and name[len(prefix):] in defs:
            head = defs[prefix.rstrip("_")]["definition"]
            return {"unit": defs[name[len(prefix):]].get("unit"),
                    "definition": f"{head} Metric: {defs[name[len(prefix):]]['definition']}"}
    return {"definition": "no definition shipped for this metric "
                          "(fairness_tests/data/card_schema/metric_definitions.yaml)"}


# ----------------------------------------------------------------------------- rules, verdicts

def _rule_outcome(statuses: pd.Series) -> str:
    s = set(statuses.astype(str))
    if "fail" in s and "pass" in s:
        return "mixed"
    for status in ("fail", "expected_fail", "pass"):
        if status in s:
            return status
    return "not_evaluable"


def _flag(x: Any) -> bool:
    """A verdict's ``abs`` as read back from CSV (bool, "True", NaN when absent)."""
    return x is True or str(x).lower() == "true"


def _word(x: Any) -> str | None:
    return None if x is None or (isinstance(x, float) and x != x) or str(x) in ("", "nan") \
        else str(x)


def quantity(metric: str, abs_: bool = False, across: str | None = None,
             reduce: str | None = None) -> str:
    """What a rule compares: ``|s_dis|``, ``max over slice of stereotype``, ``range
    (max - min) over slice of refusal``."""
    q = f"|{metric}|" if abs_ else str(metric)
    if across:
        q = (f"range (max - min) over {across} of {q}" if reduce == "range"
             else f"{reduce or 'max'} over {across} of {q}")
    return q


def decision_rules(f: RunFacts) -> list[dict]:
    out = []
    for rule, g in f.verdicts.groupby("rule", sort=True):
        first = g.iloc[0]
        metric, op, compared = first["metric"], first["op"], first["compared"]
        abs_ = _flag(first.get("abs"))
        across, reduce = _word(first.get("across")), _word(first.get("reduce"))
        bounds = g["bound"].dropna().unique()
        single = len(bounds) == 1 and finite(bounds[0]) is not None
        bound_txt = f"{float(bounds[0]):g}" if single else "per-cell bounds"
        text = (f"{quantity(str(metric), abs_, across, reduce)}: "
                f"{COMPARED_TEXT.get(str(compared), str(compared))} {op} {bound_txt} "
                f"in every cell ({len(g)} cell(s)).")
        rationales = sorted({str(r) for r in g["rationale"].dropna() if str(r)})
        entry: dict[str, Any] = {
            "id": str(rule), "rule": text, "metric": str(metric),
            "outcome": _rule_outcome(g["status"]),
            "cells": {s: int((g["status"] == s).sum()) for s in STATUSES},
            "failing_cells": sorted(str(c) for c in g.loc[g["status"] == "fail", "cell"]),
        }
        if abs_:
            entry["abs"] = True
        if across:
            entry["across"], entry["reduce"] = across, reduce or "max"
        if rationales:
            entry["rationale"] = " ".join(rationales)
        if op in ("<=", ">="):
            entry["op"] = op
        if single:
            entry["bound"] = float(bounds[0])
        if compared in COMPARED_TEXT:
            entry["compared"] = compared
        out.append(entry)
    return out


def verdict_rows(f: RunFacts) -> list[dict]:
    rows = records(f.verdicts.sort_values(["rule", "cell"], kind="mergesort"))
    for r in rows:
        for k in ("rationale", "why"):
            if r.get(k) is None:
                r[k] = ""
        r["cell"] = "" if r.get("cell") is None else str(r["cell"])
        if "abs" in r:                    # the rule's shape (runs before it was recorded lack it)
            r["abs"] = _flag(r["abs"])
        for k in ("across", "reduce"):
            if k in r and _word(r[k]) is None:
                del r[k]
    return rows


# ----------------------------------------------------------------------------- results

def results(f: RunFacts) -> dict[str, Any]:
    res: dict[str, Any] = {"tables": {name: records(f.tables[name]) for name in sorted(f.tables)
                                      if name != "consistency_items"}}
    if len(f.verdicts):
        res["verdict_counts"] = {s: int((f.verdicts["status"] == s).sum()) for s in STATUSES}
    for spec in families():
        res.update(load(spec.impl).card_summaries(f.tables))
    if "protocol_sensitivity" in f.tables:
        res["protocol_dependence"] = protocol_dependence(f.tables["protocol_sensitivity"])
    if "seed_spread" in f.tables:
        res["seed_spread"] = seed_spread(f.tables["seed_spread"])
    return res


def protocol_dependence(table: pd.DataFrame) -> list[dict]:
    """One statement per rule of ``protocol_sensitivity``: beyond noise, not resolved at
    this sample size, or not protocol-dependent; with where the spread comes from."""
    out = []
    for r in records(table):
        n_pass, n_fail, n_ne = r["n_pass"], r["n_fail"], r["n_not_evaluable"]
        if n_pass + n_fail == 0:
            said = "no protocol cell is evaluable"
        else:
            said = DISAGREEMENT_TEXT[r["disagreement"]]
        counts = (f"{n_pass} cell(s) pass, {n_fail} fail"
                  + (f", {n_ne} not evaluable" if n_ne else ""))
        text = f"{r['rule']}: {said} ({counts}; overall {r['overall']})"
        if r.get("disagreeing"):
            text += f"; differing from the overall verdict: {r['disagreeing'].replace(';', ', ')}"
        spread = [f"across {col[len(DOMINANT_PREFIX):]}, {DOMINANT_TEXT[r[col]]}"
                  for col in sorted(r) if col.startswith(DOMINANT_PREFIX) and r[col] is not None]
        if spread:
            text += "; " + "; ".join(spread)
        out.append({"rule": r["rule"], "overall": r["overall"], "disagreement": r["disagreement"],
                    "protocol_dependent": bool(r["protocol_dependent"]), "statement": text + "."})
    return out


def seed_spread(table: pd.DataFrame) -> list[dict]:
    """One statement per rule of ``seed_spread``: with the prompts held fixed, the value the
    rule compares ranges over [min, max] across the seeds."""
    out = []
    for r in records(table):
        lo, hi = r["value_min"], r["value_max"]
        rng = "undefined" if lo is None else f"{_g(lo)}-{_g(hi)}"
        text = (f"{r['rule']}: with prompts held fixed, the value the rule compares "
                f"({r['metric']}) ranges over {rng} across {r['n_seeds']} seeds "
                f"({r['n_pass']} pass, {r['n_fail']} fail).")
        out.append({"rule": r["rule"], "metric": r["metric"], "n_seeds": r["n_seeds"],
                    "value_min": lo, "value_max": hi, "statement": text})
    return out


def _g(x: Any) -> str:
    return x if isinstance(x, str) else f"{x:.4g}"
