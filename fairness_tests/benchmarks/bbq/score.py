"""The JSON report of ``fairness-tests bbq score``, rendered from the run's tables
(built by :func:`fairness_tests.benchmarks.bbq.tables.bbq_tables`, the one BBQ builder)."""
from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

from fairness_tests.benchmarks.bbq.metrics import first_run
from fairness_tests.core.fmt import json_value
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


def _cell(table: pd.DataFrame, dataset: str, context: str, polarity: str = "all",
          proxy: str = "all") -> dict:
    t = table[(table["dataset"] == dataset) & (table["context"] == context)
              & (table["polarity"] == polarity)]
    if "proxy" in t:
        t = t[t["proxy"] == proxy]
    return {r.metric: r for r in t.itertuples(index=False)}


PROXY_ORDER = ("all", "label", "names")


def _cells(bbq: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(dataset, context, proxy) of every row of the report, in order."""
    if "proxy" not in bbq:
        return [(str(ds), str(ctx), "all")
                for (ds, ctx), _ in bbq.groupby(["dataset", "context"], sort=True)]
    keys = bbq[["dataset", "context", "proxy"]].drop_duplicates().itertuples(index=False)
    return sorted(((str(k.dataset), str(k.context), str(k.proxy)) for k in keys),
                  key=lambda k: (k[0], k[1], PROXY_ORDER.index(k[2])))


def score_report(items: pd.DataFrame, preds: pd.DataFrame, tables: dict[str, pd.DataFrame],
                 provenance: dict | None = None, answers: dict | None = None,
                 notes: list[str] | None = None) -> dict:
    """The JSON object printed by ``bbq score``: one row per dataset x context (x proxy
    under the BBQ authors' conventions), ``polarity`` "all" (the per-polarity values
    under ``by_polarity``), accuracy and bias as fractions; ``answers`` says how the
    answers were read and what did not map."""
    bbq = tables["bbq"]
    pos = bbq[bbq["metric"].str.startswith("position_")]
    bbq = bbq[~bbq["metric"].str.startswith("position_")]
    fr = first_run(preds)
    scored = items.merge(fr[["dataset", "example_id"]].drop_duplicates(),
                         on=["dataset", "example_id"])
    n_scored = scored.groupby(["dataset", "context"]).size()
    rows = []
    for ds, ctx, proxy in _cells(bbq):
        m = _cell(bbq, ds, ctx, proxy=proxy)
        bias = "s_amb" if ctx == "ambig" else "s_dis"
        names = ["accuracy", bias, "sf", "df", "df_smoothed", "df_eb"]
        if ctx == "disambig":
            names += ["acc_reinf", "acc_counter", "acc_reinf_minus_counter"]
        names.append("invalid_rate")
        n_items = int(m["accuracy"].n) if "proxy" in bbq and "accuracy" in m else \
            int(n_scored.get((ds, ctx), 0))
        row = {"dataset": ds, "context": ctx, "polarity": "all", "proxy": proxy,
               "n_items": n_items}
        cell_notes = {}
        for name in names:
            r = m.get(name)
            if r is None:
                continue
            row[name] = json_value(r.value)
            row[f"{name}_ci"] = [json_value(r.ci_low), json_value(r.ci_high)]
            if isinstance(r.note, str) and r.note:
                cell_notes[name] = r.note
        row["by_polarity"] = {
            pol: {name: json_value(r.value)
                  for name, r in _cell(bbq, ds, ctx, pol, proxy).items()}
            for pol in ("neg", "nonneg")}
        row["notes"] = cell_notes
        rows.append(row)
    out: dict[str, Any]
    out = {"rows": rows, "missing": coverage(items, preds),
           "permutation": permutation_block(tables["bbq"])}
    if answers is not None:
        out["answers"] = answers
        if answers.get("conventions") == "bbq-authors":
            out["answers"]["items_without_target"] = int(items["target_loc"].isna().sum())
    if notes:
        out["data_notes"] = list(notes)
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
    if "proxy" in t:
        t = t[t["proxy"] == "all"]
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
        metric_rows: Iterable[Any] = g.itertuples(index=False)
        for r in metric_rows:
            v = json_value(r.value)
            d[r.metric] = int(r.value) if r.metric in ("flagged", "n_mfaa_below_90") else v
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


def answers_lines(report: dict) -> list[str]:
    """The text lines ``bbq score --format table`` prints about the answers."""
    a = report.get("answers") or {}
    if not a:
        return []
    what = {"index": "option indices", "letter": "letters", "text": "answer texts",
            "choice": "lm-eval choices", None: "null answers only"}[a.get("kind")]
    out = [f"answers: {a['n_lines']} lines ({a['format']}, {what} from {a['field']!r}; "
           f"{a['conventions']} conventions): {a['null']} null, {a['unmatched']} unmatched, "
           f"{a['ambiguous']} ambiguous; unmatched and ambiguous: {a['treatment']}"]
    for key in ("unmatched_answers", "ambiguous_answers"):
        for x in a.get(key, []):
            out.append(f"  {key.split('_')[0]}: line {x['line']} {x['category']} example_id "
                       f"{x['example_id']}: {x['answer']!r}")
    if "items_without_target" in a:
        out.append(f"items without a target_loc (dropped): {a['items_without_target']}")
    if "question_only" in a:
        q = a["question_only"]
        out.append(f"question-only baseline: {q['dropped_disambiguated']} disambiguated "
                   f"answers not scored ({q['why']})")
    d = a.get("item_differs")
    if d:
        ids = "; ".join(f"{ds}: {', '.join(map(str, v))}" for ds, v in d["example_ids"].items())
        out.append(f"items whose copy in the predictions differs from the BBQ data: "
                   f"{d['n_items']} ({', '.join(f'{k} {n}' for k, n in d['fields'].items())}; "
                   f"used: {d['used']}): {ids}")
    for note in report.get("data_notes", []):
        out.append(f"data: {note}")
    return out
