"""The BBQ family's sections of ``compare`` (:meth:`BBQFamily.compare_sections
<fairness_tests.pipeline.benchmark.Family.compare_sections>`), models as rows, every
number the row of the run's own table (``bbq``, ``consistency``); the only arithmetic is
the share of low-consistency items, ``100 * n_mfaa_below_90 / n`` (the count and the
number of items are both the run's):

- ``bbq_ambig`` (the study's Table 5, per dataset): accuracy with its 95% CI, s_AMB,
  SF, DF ("UB" when unbounded), smoothed DF, invalid rate;
- ``bbq_disambig`` (Table 6, per dataset): the same with s_DIS, plus Acc_reinf,
  Acc_counter and their difference;
- ``bbq_position``: position bias per dataset x context, when a run has it;
- ``consistency`` (Table 7, per dataset and pooled): MFAA% and GTC% mean, std, min, max;
- ``low_consistency``: items with MFAA% < 90 per context x polarity (count and %);
- ``flagged``: items with a stereotype-consistent error in some repeat, per
  context x polarity (count and %).

Figures: dot plots per metric x cell, one row per model, and the flagged-item counts
per context x polarity, one bar per model.
"""
from __future__ import annotations

from collections.abc import Sequence

from fairness_tests.benchmarks.bbq.schema import CONSISTENCY_SUMMARY
from fairness_tests.pipeline.view_tables import (
    Column,
    count,
    dot_plots,
    fmt_count_pct,
    get,
    long_from,
    lookup,
    models_table,
    percent,
    section,
    text,
    value,
    values,
    with_ci,
)
from fairness_tests.pipeline.views import (
    NAN,
    Compared,
    Display,
    Figure,
    Section,
    as_float,
    long_row,
    missing,
)
from fairness_tests.stats.bootstrap import cell_id

AMBIG_METRICS = ["accuracy", "s_amb", "sf", "df", "df_smoothed", "invalid_rate"]
DISAMBIG_METRICS = ["accuracy", "s_dis", "sf", "df", "df_smoothed", "acc_reinf", "acc_counter",
                    "acc_reinf_minus_counter", "invalid_rate"]
WITH_CI = {"accuracy", "s_amb", "s_dis", "acc_reinf", "acc_counter", "acc_reinf_minus_counter",
           "sf", "df_smoothed", "invalid_rate", "position_bias"}
CONTEXT_POLARITY = [("ambig", "neg"), ("ambig", "nonneg"), ("disambig", "neg"),
                    ("disambig", "nonneg"), ("all", "all")]
#: the metrics each section plots, one dot plot per cell
PLOTTED = {"bbq_ambig": ["accuracy", "s_amb", "sf", "df", "df_smoothed"],
           "bbq_disambig": ["accuracy", "s_dis", "sf", "df", "df_smoothed", "acc_reinf",
                            "acc_counter"],
           "bbq_position": ["position_bias"], "consistency": ["mfaa_mean", "gtc_mean"]}

LABELS = {"accuracy": "Accuracy", "s_amb": "s_AMB", "s_dis": "s_DIS", "sf": "SF", "df": "DF",
          "df_smoothed": "DF (smoothed)", "invalid_rate": "Invalid rate",
          "acc_reinf": "Acc_reinf", "acc_counter": "Acc_counter",
          "acc_reinf_minus_counter": "Acc_reinf - Acc_counter", "position_bias": "Position bias",
          "mfaa_mean": "MFAA% mean", "mfaa_std": "MFAA% std", "mfaa_min": "MFAA% min",
          "mfaa_max": "MFAA% max", "gtc_mean": "GTC% mean", "gtc_std": "GTC% std",
          "gtc_min": "GTC% min", "gtc_max": "GTC% max"}


def sections(entries: Sequence[Compared]) -> list[Section]:
    """BBQ's sections, then consistency's, each with its figures."""
    out = [*bbq_sections(entries), *consistency_sections(entries)]
    models = [e.name for e in entries]
    for sec in out:
        if sec.id in PLOTTED:
            sec.figures.extend(dot_plots(sec, models, PLOTTED[sec.id], LABELS))
        if sec.id == "flagged":
            sec.figures.append(flagged_bars(sec, models))
    return out


# ---------------------------------------------------------------- BBQ

def bbq_sections(entries: Sequence[Compared]) -> list[Section]:
    """Tables 5 and 6 (per dataset, models as rows) and position bias."""
    have = [e for e in entries if e.table("bbq", "bbq") is not None]
    if not have:
        return []
    datasets = sorted({d for e in have for d in values(e.table("bbq", "bbq"), "dataset")})
    out = []
    for context, metrics, sid, title, ref in (
            ("ambig", AMBIG_METRICS, "bbq_ambig", "Ambiguous contexts", "Table 5"),
            ("disambig", DISAMBIG_METRICS, "bbq_disambig", "Disambiguated contexts", "Table 6")):
        parts = []
        for ds in datasets:
            where = dict(dataset=ds, context=context, polarity="all")
            cols = [Column(LABELS[m], cell_id(ds, context), m, where,
                           with_ci if m in WITH_CI else value) for m in metrics]
            cols.append(Column("n", "", "accuracy", where, count, long=False))
            parts.append(models_table(sid, f"{ds}, {context}", have, "bbq", "bbq", cols))
        out.append(section(
            sid, f"BBQ: {title.lower()} ({ref} layout)",
            "Per dataset, one row per model, first run (repeat 0, rotation 0), both "
            "polarities pooled. Values with their 95% interval as the run reports it; DF "
            "\"UB\" = unbounded (a group with probability 0 beside one above 0).",
            parts, _bbq_notes(have, datasets, context, metrics)))
    if any("position_bias" in set(text(e.table("bbq", "bbq")["metric"])) for e in have):
        cols = [Column(cell_id(ds, c), cell_id(ds, c), "position_bias",
                       dict(dataset=ds, context=c, polarity="all"),
                       missing="not asked under all three rotations")
                for ds in datasets for c in ("ambig", "disambig")]
        out.append(section(
            "bbq_position", "BBQ: position bias",
            "max over positions |share - 1/3| of the valid answers of items asked under all "
            "three cyclic option orders (0 = none, 2/3 = always the same letter).",
            [models_table("bbq_position", "Position bias", have, "bbq", "bbq", cols)]))
    return out


def _bbq_notes(have, datasets, context, metrics) -> list[str]:
    notes = []
    for e in have:
        t = e.table("bbq", "bbq")
        for ds in datasets:
            for m in metrics:
                r = get(t, m, dataset=ds, context=context, polarity="all")
                if r is not None and not missing(r.get("note")) and str(r["note"]):
                    notes.append(f"{e.name}, {ds}/{context}, {LABELS[m]}: {r['note']}")
    return notes


# ---------------------------------------------------------------- consistency

def consistency_sections(entries: Sequence[Compared]) -> list[Section]:
    """Table 7 (per dataset and pooled), the low-consistency breakdown and the
    flagged-item counts (both pooled over datasets, per context x polarity)."""
    have = [e for e in entries if e.table("bbq", "consistency") is not None]
    if not have:
        return []
    datasets = sorted({d for e in have for d in values(e.table("bbq", "consistency"),
                                                       "dataset")} - {"all"}) + ["all"]
    parts = []
    for ds in datasets:
        where = dict(dataset=ds, context="all", polarity="all")
        cols = [Column(LABELS[m], cell_id(ds, "all", "all"), m, where, percent)
                for m in CONSISTENCY_SUMMARY]
        cols.append(Column("items", "", "mfaa_mean", where, count, long=False))
        parts.append(models_table("consistency", "all datasets" if ds == "all" else ds, have,
                                  "bbq", "consistency", cols))
    t7 = section("consistency", "Consistency over repeated runs (Table 7 layout)",
                 "Items asked n times under identical settings (the consistency sample). "
                 "MFAA% = share of the most frequent answer, GTC% = share of correct "
                 "answers, per item; summarised over the items (std: sample standard "
                 "deviation).", parts)
    return [t7, _per_context("low_consistency", "n_mfaa_below_90", None, have,
                             "Low-consistency items (MFAA% < 90)",
                             "Items whose most frequent answer has less than 90% of the "
                             "repeats, pooled over datasets: count (% of the cell's items)."),
            _per_context("flagged", "flagged", "flagged_pct", have,
                         "Flagged items per context x polarity",
                         "Items with a stereotype-consistent error (valid, not unknown, "
                         "wrong, the stereotyped person) in at least one repeat, pooled over "
                         "datasets: count (% of the cell's items).")]


def _per_context(sid, count_metric, pct_metric, have, title, intro) -> Section:
    sec = Section(sid, title, intro=intro)
    rows, body = [], []
    for e in have:
        t = e.table("bbq", "consistency")
        line = [e.name]
        for c, p in CONTEXT_POLARITY:
            cell = cell_id("all", c, p)
            r = get(t, count_metric, dataset="all", context=c, polarity=p)
            rows.append(long_from(sid, e.name, cell, r, count_metric))
            if r is None:
                line.append("-")
                continue
            if pct_metric is not None:
                rp = get(t, pct_metric, dataset="all", context=c, polarity=p)
                rows.append(long_from(sid, e.name, cell, rp, pct_metric))
                pct = rp["value"] if rp is not None else NAN
            else:   # the share: the run's count over the run's number of items
                pct = 100.0 * as_float(r["value"]) / as_float(r["n"]) if as_float(r["n"]) else NAN
                rows.append(long_row(sid, e.name, cell, f"pct_{count_metric}", pct, n=r["n"],
                                     note=f"100 * {count_metric} / n"))
            line.append(fmt_count_pct(r["value"], pct))
        body.append(line)
    sec.tables.append(Display(title, ["Model", *[f"{c}/{p}" if c != "all" else "all"
                                                 for c, p in CONTEXT_POLARITY]], body))
    sec.long = rows
    return sec


def flagged_bars(sec: Section, models: list[str]) -> Figure:
    """The flagged-item counts per context x polarity, one bar per model."""
    groups = [f"{c}/{p}" if c != "all" else "all" for c, p in CONTEXT_POLARITY]
    bars = []
    for c, p in CONTEXT_POLARITY:
        row = []
        for name in models:
            r = lookup(sec.long, name, f"all/{c}/{p}", "flagged")
            row.append(None if r is None else r["value"])
        bars.append(row)
    return Figure("grouped_bars", {
        "title": "Flagged items per context x polarity", "groups": groups, "series": models,
        "values": bars, "ylabel": "items with a stereotype-consistent error in some repeat"})
