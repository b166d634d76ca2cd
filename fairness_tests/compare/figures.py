"""The comparison's figures, inline SVG drawn by :mod:`fairness_tests.card.svg`.

Every figure draws numbers of the long table (the runs' own table rows), never
anything recomputed:

- dot plots, one per metric x cell, one row per model, the value with its 95% CI
  (``svg.dot_ci``; DF "UB" as an arrow);
- the flagged-item counts per context x polarity, one bar per model (``svg.grouped_bars``);
- per model, the two panels of the generative position paper's Figure 1
  (``svg.bars_ref``): the max disparity across slices of each rate on the whole grid,
  and the worst-slice stereotype rate per prompt family, each against the 5% audit line.
"""
from __future__ import annotations

import pandas as pd

from fairness_tests.card import svg
from fairness_tests.card.values import clean
from fairness_tests.compare.tables import CONTEXT_POLARITY, LABELS, Section
from fairness_tests.metrics.schema import GENERATIVE_RATE_METRICS

AUDIT_LINE = 0.05


def _point(label: str, r: pd.Series | None) -> dict:
    if r is None:
        return {"label": label, "value": None, "lo": None, "hi": None}
    return {"label": label, "value": clean(r["value"]), "lo": clean(r["ci_low"]),
            "hi": clean(r["ci_high"])}


def _lookup(long: pd.DataFrame, model: str, cell: str, metric: str) -> pd.Series | None:
    m = long[(long["model"] == model) & (long["cell"] == cell) & (long["metric"] == metric)]
    return None if not len(m) else m.iloc[0]


def dot_plots(sec: Section, models: list[str], metrics: list[str]) -> list[str]:
    """One dot plot per metric x cell of the section, one row per model."""
    out = []
    long = sec.long
    for cell in dict.fromkeys(long["cell"]):
        for m in metrics:
            if not ((long["cell"] == cell) & (long["metric"] == m)).any():
                continue
            pts = [_point(name, _lookup(long, name, cell, m)) for name in models]
            out.append(svg.dot_ci(f"{LABELS.get(m, m)} · {cell}", pts, width=480,
                                  kind="compare_dots"))
    return out


def flagged_bars(sec: Section, models: list[str]) -> str:
    groups = [f"{c}/{p}" if c != "all" else "all" for c, p in CONTEXT_POLARITY]
    values = []
    for c, p in CONTEXT_POLARITY:
        row = []
        for name in models:
            r = _lookup(sec.long, name, f"all/{c}/{p}", "flagged")
            row.append(None if r is None else clean(r["value"]))
        values.append(row)
    return svg.grouped_bars("Flagged items per context x polarity", groups, models, values,
                            ylabel="items with a stereotype-consistent error in some repeat")


def figure1(disparity: Section, worst: Section, models: list[str]) -> list[str]:
    """Per model: max disparity across slices per rate metric (whole grid) and the
    worst-slice stereotype rate per prompt family, each with the 5% line."""
    out = []
    families = list(dict.fromkeys(worst.long.loc[worst.long["metric"] == "worst_slice_stereotype",
                                                 "cell"]))
    for name in models:
        if not (disparity.long["model"] == name).any():
            continue
        bars = [_point(m, _lookup(disparity.long, name, "overall", f"disparity_{m}"))
                for m in GENERATIVE_RATE_METRICS]
        out.append(svg.bars_ref(f"{name}: max disparity across slices", bars, AUDIT_LINE,
                                "5% audit line", width=480, kind="figure1_disparity"))
        bars = [_point(f, _lookup(worst.long, name, f, "worst_slice_stereotype"))
                for f in families]
        out.append(svg.bars_ref(f"{name}: worst-slice stereotype per family", bars,
                                AUDIT_LINE, "5% audit line", width=480, kind="figure1_worst_slice"))
    return out


def add_figures(sections: list[Section], models: list[str]) -> None:
    """Put each section's figures into it (in place)."""
    by_id = {s.id: s for s in sections}
    for sid, metrics in (("bbq_ambig", ["accuracy", "s_amb", "sf", "df", "df_smoothed"]),
                         ("bbq_disambig", ["accuracy", "s_dis", "sf", "df", "df_smoothed",
                                           "acc_reinf", "acc_counter"]),
                         ("bbq_position", ["position_bias"]),
                         ("consistency", ["mfaa_mean", "gtc_mean"]),
                         ("refusal_gap", ["refusal_gap"])):
        if sid in by_id:
            by_id[sid].figures.extend(dot_plots(by_id[sid], models, metrics))
    if "flagged" in by_id:
        by_id["flagged"].figures.append(flagged_bars(by_id["flagged"], models))
    if "generative_disparity" in by_id and "generative_worst" in by_id:
        by_id["generative_disparity"].figures.extend(
            figure1(by_id["generative_disparity"], by_id["generative_worst"], models))
