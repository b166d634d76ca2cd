"""The JSON report of ``fairness-tests bbq score``, rendered from the run's tables
(built by :func:`fairness_tests.metrics.bbq_tables.bbq_tables`, the one BBQ builder)."""
from __future__ import annotations

import pandas as pd

from fairness_tests.core.fmt import json_value
from fairness_tests.metrics.bbq import first_run
from fairness_tests.stats.permutation import DEFAULT_N_PERM

MAX_LISTED = 50


def coverage(items: pd.DataFrame, preds: pd.DataFrame) -> dict:
    """Items with no first-run answer (missing, not scored) and predictions outside the
    scored items (ignored)."""
    fr = first_run(preds)
    have = pd.MultiIndex.from_frame(fr[["dataset", "example_id"]])
    keys = pd.MultiIndex.from_frame(items[["dataset", "example_id"]])
    miss = items[~keys.isin(have)]
    outside = ~pd.MultiIndex.from_frame(preds[["dataset", "example_id"]]).isin(keys)
    return {
        "n_items": int(len(miss)),
        "by_dataset": {ds: int(n) for ds, n in miss.groupby("dataset").size().items()},
        "example_ids": {ds: [int(x) for x in g["example_id"].head(MAX_LISTED)]
                        for ds, g in miss.groupby("dataset")},
        "listed_at_most": MAX_LISTED,
        "ignored_predictions": int(outside.sum()),
    }


def _cell(table: pd.DataFrame, dataset: str, context: str, polarity: str = "all") -> dict:
    t = table[(table["dataset"] == dataset) & (table["context"] == context)
              & (table["polarity"] == polarity)]
    return {r.metric: r for r in t.itertuples(index=False)}


def score_report(items: pd.DataFrame, preds: pd.DataFrame, tables: dict[str, pd.DataFrame],
                 provenance: dict | None = None) -> dict:
    """The JSON object printed by ``bbq score``."""
    bbq = tables["bbq"]
    pos = bbq[bbq["metric"].str.startswith("position_")]
    bbq = bbq[~bbq["metric"].str.startswith("position_")]
    fr = first_run(preds)
    scored = items.merge(fr[["dataset", "example_id"]].drop_duplicates(),
                         on=["dataset", "example_id"])
    n_scored = scored.groupby(["dataset", "context"]).size()
    rows = []
    for (ds, ctx), _ in bbq.groupby(["dataset", "context"], sort=True):
        m = _cell(bbq, ds, ctx)
        bias = "s_amb" if ctx == "ambig" else "s_dis"
        names = ["accuracy", bias, "sf", "df", "df_smoothed", "df_eb"]
        if ctx == "disambig":
            names += ["acc_reinf", "acc_counter", "acc_reinf_minus_counter"]
        names.append("invalid_rate")
        row = {"dataset": ds, "context": ctx, "n_items": int(n_scored.get((ds, ctx), 0))}
        notes = {}
        for name in names:
            r = m.get(name)
            if r is None:
                continue
            row[name] = json_value(r.value)
            row[f"{name}_ci"] = [json_value(r.ci_low), json_value(r.ci_high)]
            if isinstance(r.note, str) and r.note:
                notes[name] = r.note
        row["by_polarity"] = {
            pol: {name: json_value(r.value) for name, r in _cell(bbq, ds, ctx, pol).items()}
            for pol in ("neg", "nonneg")}
        row["notes"] = notes
        rows.append(row)
    out = {"rows": rows, "missing": coverage(items, preds),
           "permutation": permutation_block(tables["bbq"])}
    if len(pos):
        out["position"] = [
            {"dataset": ds, "context": ctx,
             **{r.metric: json_value(r.value) for r in g.itertuples(index=False)},
             "position_bias_ci": [json_value(x) for x in
                                  g[g.metric == "position_bias"][["ci_low", "ci_high"]].iloc[0]]}
            for (ds, ctx), g in pos.groupby(["dataset", "context"], sort=True)]
    if "consistency" in tables:
        out["consistency"] = consistency_json(tables["consistency"])
    if provenance:
        out["data"] = provenance
    return out


PERMUTED = {"sf": "group labels permuted within templates", "df": "group labels "
            "permuted within templates", "df_smoothed": "group labels permuted within "
            "templates", "df_eb": "group labels permuted within templates",
            "position_bias": "rotation labels permuted within items"}


def permutation_block(bbq: pd.DataFrame) -> dict:
    """``{"<dataset>/<context>": {"<metric>": {statistic, value, value_bc, p_value,
    n_permutations}}}`` for SF, DF, smoothed DF and position bias: the permutation test
    of "no difference between groups" and the bootstrap bias-corrected value."""
    out: dict = {}
    t = bbq[bbq["metric"].isin(list(PERMUTED)) & (bbq["polarity"] == "all")]
    for r in t.itertuples(index=False):
        out.setdefault(f"{r.dataset}/{r.context}", {})[r.metric] = {
            "statistic": PERMUTED[r.metric], "value": json_value(r.value),
            "value_bc": json_value(r.value_bc), "p_value": json_value(r.p_value),
            "n_permutations": DEFAULT_N_PERM}
    return out


def consistency_json(table: pd.DataFrame) -> dict:
    def pack(g: pd.DataFrame, keys: dict) -> dict:
        d = dict(keys)
        d["n_items"] = int(g["n"].iloc[0])
        for r in g.itertuples(index=False):
            v = json_value(r.value)
            d[r.metric] = int(v) if r.metric in ("flagged", "n_mfaa_below_90") else v
            if r.metric == "repeats_fit":
                d["repeats_fit_p_value"] = json_value(r.p_value)
        return d

    t = table
    per = t[(t.dataset != "all") & (t.context != "all") & (t.polarity == "all")]
    cp = t[(t.dataset == "all") & (t.context != "all") & (t.polarity != "all")]
    pooled = t[(t.dataset == "all") & (t.context == "all") & (t.polarity == "all")]
    return {
        "rows": [pack(g, {"dataset": ds, "context": c})
                 for (ds, c), g in per.groupby(["dataset", "context"], sort=True)],
        "by_context_polarity": [pack(g, {"context": c, "polarity": p})
                                for (c, p), g in cp.groupby(["context", "polarity"], sort=True)],
        "pooled": pack(pooled, {}) if len(pooled) else {},
    }
