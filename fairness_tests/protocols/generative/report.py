"""The ``generative score`` / ``generative sensitivity`` reports (JSON-ready dicts).

``score_report`` shape (issue 4, section 6)::

    {"rubric": name, "n_records": N, "n_error": E,
     "by_slice": [{"slice": "man_Muslim", "n": n_ok, "n_error": e, <metric>: value, ...}],
     "by_slice_family": [... + "family"], "by_slice_decoding": [... + "temperature", "top_p"],
     "worst_slice": {<metric>: {"overall": {"slice", "value"},
                                "by_family": {"F1": {"slice", "value"}, ...}}},
     "disparity": {<metric>: value}, "refusal_gap": value,
     "ci": {"by_slice": [{"slice", <metric>: [lo, hi]}], "by_slice_family": [...],
            "by_slice_decoding": [...], "disparity": {<metric>: [lo, hi]},
            "refusal_gap": [lo, hi]}}

Values are :func:`fairness_tests.stats.json_value` (NaN -> null).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ...metrics import generative as G
from ...metrics import protocol_sensitivity as PS
from ...scoring.lexical import score
from ...scoring.rubric import Rubric, load_rubric
from ...stats import DEFAULT_N_BOOT, DEFAULT_SEED, json_value



def _entries(table: pd.DataFrame, by: list[str], counts: pd.DataFrame) -> tuple[list, list]:
    keys = [*by, "slice"]
    vals, cis = [], []
    t = table[table["metric"].isin(G.METRICS)]
    counts = counts.set_index(keys)
    for key, g in t.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        cell = {k: json_value(v) for k, v in zip(keys, key)}
        c = counts.loc[key if len(key) > 1 else key[0]]
        entry = {**cell, "n": int(c["n_ok"]), "n_error": int(c["n_error"])}
        ci = dict(cell)
        for r in g.itertuples(index=False):
            entry[r.metric] = json_value(r.value)
            ci[r.metric] = [json_value(r.ci_low), json_value(r.ci_high)]
        vals.append({k: entry[k] for k in [*cell, "n", "n_error", *G.METRICS] if k in entry})
        cis.append(ci)
    return vals, cis


def score_report(records: pd.DataFrame, rubric: Rubric | str = "published",
                 n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    rub = rubric if isinstance(rubric, Rubric) else load_rubric(rubric)
    df = G.with_cells(score(records, rub))
    out: dict[str, Any] = {"rubric": rub.name, "semantics": rub.semantics,
                           "n_records": int(len(df)), "n_error": int(df["is_error"].sum())}
    ci: dict[str, Any] = {}
    views = {"by_slice": [], "by_slice_family": ["family"],
             "by_slice_decoding": ["temperature", "top_p"]}
    tables = {}
    for name, by in views.items():
        tables[name] = G.slice_table(df, by, n_boot, seed)
        out[name], ci[name] = _entries(tables[name], by, G.error_counts(df, by))
    w_all = G.worst_slice(tables["by_slice"][tables["by_slice"]["metric"].isin(G.METRICS)])
    w_fam = G.worst_slice(tables["by_slice_family"][
        tables["by_slice_family"]["metric"].isin(G.METRICS)], ["family"])
    worst = {}
    for m in G.METRICS:
        r = w_all[w_all["metric"] == m].iloc[0]
        fam = w_fam[w_fam["metric"] == m]
        worst[m] = {"overall": {"slice": r["slice"], "value": json_value(r["value"])},
                    "by_family": {f: {"slice": s, "value": json_value(v)}
                                  for f, s, v in zip(fam["family"], fam["slice"], fam["value"])}}
    out["worst_slice"] = worst
    d = G.disparity(df, (), G.METRICS, n_boot, seed)
    out["disparity"] = {m: json_value(v) for m, v in zip(d["metric"], d["value"])}
    ci["disparity"] = {m: [json_value(lo), json_value(hi)]
                       for m, lo, hi in zip(d["metric"], d["ci_low"], d["ci_high"])}
    gap = d[d["metric"] == "refusal"].iloc[0]
    out["refusal_gap"] = json_value(gap["value"])
    ci["refusal_gap"] = [json_value(gap["ci_low"]), json_value(gap["ci_high"])]
    out["ci"] = ci
    return out


def load_rules(thresholds: str | Path | None = None, model: str | None = None) -> list[PS.Rule]:
    """The generative decision rules of the threshold files (``thresholds/``: the
    same rules the pytest suite and the audit apply), as protocol-sensitivity rules."""
    from ...rules.thresholds import load_rules as load_thresholds
    return PS.from_thresholds(load_thresholds(thresholds, model=model).rules)


def sensitivity_report(records: pd.DataFrame, rules: list[PS.Rule],
                       rubrics: tuple[str, str] = ("published", "strict"),
                       n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Same outputs under two rubrics: per-slice metric deltas, disparity deltas, rule
    verdicts per protocol cell under each rubric, verdicts that flip with the rubric,
    and protocol dependence + spread decomposition under each rubric."""
    a, b = rubrics
    ra, rb = load_rubric(a), load_rubric(b)
    sa, sb = G.with_cells(score(records, ra)), G.with_cells(score(records, rb))
    ta, tb = G.slice_table(sa, (), n_boot, seed), G.slice_table(sb, (), n_boot, seed)
    names = (ra.name, rb.name)
    deltas = G.rubric_deltas(ta[ta["metric"].isin(G.METRICS)], tb[tb["metric"].isin(G.METRICS)],
                             names)
    csa, csb = G.cell_statistics(sa, n_boot, seed), G.cell_statistics(sb, n_boot, seed)
    cd = G.rubric_deltas(csa.drop(columns=["slice"]), csb.drop(columns=["slice"]), names)
    va, vb = PS.evaluate(csa, rules), PS.evaluate(csb, rules)
    flips = G.flipped_verdicts(va, vb, names)
    out: dict[str, Any] = {
        "rubrics": list(names),
        "by_slice_delta": _records(deltas),
        "cell_statistics_delta": _records(cd),
        "verdicts": {names[0]: _records(va.drop(columns=["rationale"])),
                     names[1]: _records(vb.drop(columns=["rationale"]))},
        "flipped_verdicts": _records(flips),
        "protocol_dependence": {names[0]: _records(PS.protocol_dependence(va)),
                                names[1]: _records(PS.protocol_dependence(vb))},
        "spread": {},
    }
    for name, s in ((names[0], sa), (names[1], sb)):
        spread = {}
        for kind, col in (("family", "family"), ("decoding", "decoding")):
            ok = s[s["status"] != "error"]
            for rule in rules:
                # point values only (the decomposition needs no CI)
                sub = ok.groupby([col, "slice"])[rule.metric].mean().rename("value").reset_index()
                spread[f"{rule.metric}/{kind}"] = {
                    k: json_value(v) for k, v in PS.spread_decomposition(sub, col).items()}
        out["spread"][name] = spread
    return out


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: json_value(v) for k, v in r.items()} for r in df.to_dict(orient="records")]
