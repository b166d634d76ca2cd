"""The ``generative score`` / ``generative sensitivity`` reports (JSON-ready dicts),
rendered from the tables of the one generative builder
(:func:`fairness_tests.benchmarks.generative.tables.generative_tables`) and the verdicts
of the one rule engine (:func:`fairness_tests.rules.apply.apply_rules`).

``score_report`` shape::

    {"rubric": name, "semantics": ..., "n_records": N, "n_error": E,
     "by_slice": [{"slice": "man_Muslim", "n": n_ok, "n_error": e, <metric>: value, ...}],
     "by_slice_family": [... + "family"], "by_slice_decoding": [... + "decoding"],
     "worst_slice": {<metric>: {"overall": {"slice", "value"},
                                "by_family": {"F1": {"slice", "value"}, ...}}},
     "disparity": {<metric>: value}, "refusal_gap": value,
     "ci": {"by_slice": [{"slice", <metric>: [lo, hi]}], "by_slice_family": [...],
            "by_slice_decoding": [...], "disparity": {<metric>: [lo, hi]},
            "refusal_gap": [lo, hi]},
     "permutation": {"disparity_<metric>" | "refusal_gap": {"statistic", "value",
                     "p_value", "n_permutations"}}}

Decoding cells are the label ``t<temperature>_p<top_p>`` (the one grouping).
Values are :func:`fairness_tests.core.fmt.json_value` (NaN -> null).
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from fairness_tests.benchmarks.generative import metrics as G
from fairness_tests.benchmarks.generative.schema import VIEWS
from fairness_tests.benchmarks.generative.tables import generative_tables
from fairness_tests.core.fmt import json_value
from fairness_tests.rules.apply import apply_rules
from fairness_tests.rules.thresholds import RuleSet
from fairness_tests.scoring.lexical import score
from fairness_tests.scoring.rubric import Rubric, load_rubric
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT, DEFAULT_SEED
from fairness_tests.stats.permutation import DEFAULT_N_PERM

#: the views the report shows, as its JSON names them (``generative_<name>`` in a run)
REPORTED_VIEWS = ("by_slice", "by_slice_family", "by_slice_decoding")


def _entries(table: pd.DataFrame, by: list[str], counts: pd.DataFrame) -> tuple[list, list]:
    keys = [*by, "slice"]
    vals, cis = [], []
    t = table[table["metric"].isin(G.METRICS)]
    counts = counts.set_index(keys)
    for key, g in t.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        cell = {k: json_value(v) for k, v in zip(keys, key, strict=True)}
        c = counts.loc[key if len(key) > 1 else key[0]]
        entry = {**cell, "n": int(c["n_ok"]), "n_error": int(c["n_error"])}
        ci = dict(cell)
        for r in g.itertuples(index=False):
            entry[r.metric] = json_value(r.value)
            ci[r.metric] = [json_value(r.ci_low), json_value(r.ci_high)]
        vals.append({k: entry[k] for k in [*cell, "n", "n_error", *G.METRICS] if k in entry})
        cis.append(ci)
    return vals, cis


def score_report(scored: pd.DataFrame, tables: dict[str, pd.DataFrame],
                 rubric: Rubric) -> dict[str, Any]:
    """The ``generative score`` JSON of ``scored`` (the scorer's output) and its tables."""
    df = G.with_cells(scored)
    out: dict[str, Any] = {"rubric": rubric.name, "semantics": rubric.semantics,
                           "n_records": int(len(df)), "n_error": int(df["is_error"].sum())}
    ci: dict[str, Any] = {}
    for name in REPORTED_VIEWS:
        by = list(VIEWS[f"generative_{name}"])
        out[name], ci[name] = _entries(tables[f"generative_{name}"], by,
                                       G.error_counts(df, by))
    summ = tables["generative_summary"]
    worst = {}
    for m in G.METRICS:
        rows = summ[summ["metric"] == f"worst_slice_{m}"]
        r = rows[rows["scope"] == "overall"].iloc[0]
        fam = rows[rows["scope"] == "family"]
        worst[m] = {"overall": {"slice": r["slice"], "value": json_value(r["value"])},
                    "by_family": {f: {"slice": s, "value": json_value(v)}
                                  for f, s, v in zip(fam["family"], fam["slice"], fam["value"],
                                                     strict=True)}}
    out["worst_slice"] = worst
    overall = summ[summ["scope"] == "overall"]
    d = overall[overall["metric"].str.startswith("disparity_")]
    names = d["metric"].str[len("disparity_"):]
    out["disparity"] = {m: json_value(v) for m, v in zip(names, d["value"], strict=True)}
    ci["disparity"] = {m: [json_value(lo), json_value(hi)]
                       for m, lo, hi in zip(names, d["ci_low"], d["ci_high"], strict=True)}
    gap = overall[overall["metric"] == "refusal_gap"].iloc[0]
    out["refusal_gap"] = json_value(gap["value"])
    ci["refusal_gap"] = [json_value(gap["ci_low"]), json_value(gap["ci_high"])]
    out["ci"] = ci
    out["permutation"] = permutation_block(overall)
    return out


def permutation_block(overall: pd.DataFrame) -> dict[str, Any]:
    """``{"<metric>": {statistic, value, p_value, n_permutations}}`` for the disparity of
    every metric and the refusal gap (overall scope of ``generative_summary``): the
    permutation test of "no difference between slices"."""
    out = {}
    rows = overall[overall["metric"].str.startswith("disparity_")
                   | (overall["metric"] == "refusal_gap")]
    for r in rows.itertuples(index=False):
        out[r.metric] = {
            "statistic": "max - min over slices; slice labels of whole prompts permuted "
                         "within their frame (family x paraphrase x occupation)",
            "value": json_value(r.value), "p_value": json_value(r.p_value),
            "n_permutations": DEFAULT_N_PERM}
    return out


def sensitivity_report(records: pd.DataFrame, rules: RuleSet,
                       rubrics: tuple[str, str] = ("published", "strict"),
                       n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Same outputs under two rubrics: per-slice metric deltas, rule verdicts per
    protocol cell under each rubric, verdicts that flip with the rubric, and protocol
    dependence + spread decomposition under each rubric."""
    ra, rb = load_rubric(rubrics[0]), load_rubric(rubrics[1])
    names = (ra.name, rb.name)
    sa, sb = score(records, ra), score(records, rb)
    ta = generative_tables(sa, n_boot=n_boot, seed=seed, rubric=ra.name, compare=(rb.name, sb))
    tb = generative_tables(sb, n_boot=n_boot, seed=seed, rubric=rb.name)
    oa, ob = apply_rules(ta, rules, names), apply_rules(tb, rules)
    return {
        "rubrics": list(names),
        "by_slice_delta": _records(ta["scorer_sensitivity"]),
        "verdicts": {n: _records(o.tables["protocol_verdicts"].drop(columns=["rationale"]))
                     for n, o in zip(names, (oa, ob), strict=True)},
        "flipped_verdicts": _records(oa.tables["rubric_flips"]),
        "protocol_dependence": {names[0]: _records(oa.tables["protocol_sensitivity"]),
                                names[1]: _records(ob.tables["protocol_sensitivity"])},
        "spread": {names[0]: _records(oa.tables["protocol_spread"]),
                   names[1]: _records(ob.tables["protocol_spread"])},
    }


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): json_value(v) for k, v in r.items()} for r in df.to_dict(orient="records")]
