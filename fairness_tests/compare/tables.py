"""The comparison's tables: each model's numbers, read from its own run tables.

Nothing here computes a metric: every value, CI, n and note is the row of the run's
table (``bbq``, ``consistency``, ``generative_by_slice``, ``generative_summary``) that
the audit or the score command wrote; the only arithmetic is the share of
low-consistency items, ``100 * n_mfaa_below_90 / n`` (the count and the number of
items are both the run's). Layout, models as rows:

- ``bbq_ambig`` (the study's Table 5, per dataset): accuracy with its 95% CI, s_AMB,
  SF, DF ("UB" when unbounded), smoothed DF, invalid rate;
- ``bbq_disambig`` (Table 6, per dataset): the same with s_DIS, plus Acc_reinf,
  Acc_counter and their difference;
- ``bbq_position``: position bias per dataset x context, when a run has it;
- ``consistency`` (Table 7, per dataset and pooled): MFAA% and GTC% mean, std, min, max;
- ``low_consistency``: items with MFAA% < 90 per context x polarity (count and %);
- ``flagged``: items with a stereotype-consistent error in some repeat, per
  context x polarity (count and %);
- ``generative_slices``: every rate per slice; ``generative_worst``: the worst slice
  per prompt family; ``generative_disparity``: max - min over slices on the whole
  grid; ``refusal_gap``: overall and per family.

Every table is also a set of rows of the long table :data:`LONG_COLUMNS` (what
``compare.csv`` holds): ``section, model, versus, cell, metric, value, ci_low,
ci_high, n, p_value, p_adjusted, note``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from fairness_tests.compare.models import Entry
from fairness_tests.core.fmt import fixed
from fairness_tests.metrics.schema import CONSISTENCY_SUMMARY, GENERATIVE_RATE_METRICS
from fairness_tests.stats.bootstrap import cell_id

LONG_COLUMNS = ["section", "model", "versus", "cell", "metric", "value", "ci_low", "ci_high",
                "n", "p_value", "p_adjusted", "note"]
NAN = float("nan")

AMBIG_METRICS = ["accuracy", "s_amb", "sf", "df", "df_smoothed", "invalid_rate"]
DISAMBIG_METRICS = ["accuracy", "s_dis", "sf", "df", "df_smoothed", "acc_reinf", "acc_counter",
                    "acc_reinf_minus_counter", "invalid_rate"]
WITH_CI = {"accuracy", "s_amb", "s_dis", "acc_reinf", "acc_counter", "acc_reinf_minus_counter",
           "sf", "df_smoothed", "invalid_rate", "position_bias"}
CONTEXT_POLARITY = [("ambig", "neg"), ("ambig", "nonneg"), ("disambig", "neg"),
                    ("disambig", "nonneg"), ("all", "all")]
WORST_FOCUS = ["stereotype", "demeaning", "pilot_harm", "refusal"]

LABELS = {"accuracy": "Accuracy", "s_amb": "s_AMB", "s_dis": "s_DIS", "sf": "SF", "df": "DF",
          "df_smoothed": "DF (smoothed)", "invalid_rate": "Invalid rate",
          "acc_reinf": "Acc_reinf", "acc_counter": "Acc_counter",
          "acc_reinf_minus_counter": "Acc_reinf - Acc_counter", "position_bias": "Position bias",
          "mfaa_mean": "MFAA% mean", "mfaa_std": "MFAA% std", "mfaa_min": "MFAA% min",
          "mfaa_max": "MFAA% max", "gtc_mean": "GTC% mean", "gtc_std": "GTC% std",
          "gtc_min": "GTC% min", "gtc_max": "GTC% max"}


# ---------------------------------------------------------------- shapes

@dataclass
class Display:
    """One rendered table: a title, a header and rows of cells (rendered with ``str``)."""
    title: str
    header: list[str]
    rows: Sequence[Sequence[object]]
    caption: str = ""


@dataclass
class Section:
    """A part of the report: its tables (for reading), figures (inline SVG, filled by
    :mod:`.figures`) and the long rows behind them (for ``compare.csv``)."""
    id: str
    title: str
    intro: str = ""
    tables: list[Display] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    long: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LONG_COLUMNS))


def long_row(section: str, model: str, cell: str, metric: str, value=NAN, ci_low=NAN,
             ci_high=NAN, n=NAN, note: object = "", versus: str = "", p_value=NAN,
             p_adjusted=NAN) -> dict:
    return {"section": section, "model": model, "versus": versus, "cell": cell,
            "metric": metric, "value": _float(value), "ci_low": _float(ci_low),
            "ci_high": _float(ci_high), "n": _float(n), "p_value": _float(p_value),
            "p_adjusted": _float(p_adjusted), "note": "" if _missing(note) else str(note)}


def long_frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=LONG_COLUMNS)


def _float(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return NAN


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA


# ---------------------------------------------------------------- formatting

def fmt(v, digits: int = 3) -> str:
    """A number as the report prints it (:func:`fairness_tests.core.fmt.fixed`): NaN ->
    "n/a", +inf -> "UB", else ``digits`` decimals (never "-0.000")."""
    return fixed(_float(v), digits)


def fmt_ci(value, lo, hi, digits: int = 3) -> str:
    """``value [lo, hi]``; the value alone when the interval is undefined."""
    if math.isnan(_float(lo)) and math.isnan(_float(hi)):
        return fmt(value, digits)
    return f"{fmt(value, digits)} [{fmt(lo, digits)}, {fmt(hi, digits)}]"


def fmt_count_pct(count, pct) -> str:
    if math.isnan(_float(count)):
        return "n/a"
    return f"{int(round(_float(count)))} ({fmt(pct, 1)}%)"


# ---------------------------------------------------------------- lookups in run tables

def _rows(table: pd.DataFrame | None, **cell) -> pd.DataFrame:
    """Rows of a run table whose grouping columns equal ``cell`` (text compared; an
    empty cell value matches the empty or missing column value)."""
    if table is None or not len(table):
        return pd.DataFrame(columns=["metric", "value", "ci_low", "ci_high", "n", "note"])
    m = np.ones(len(table), dtype=bool)
    for col, v in cell.items():
        if col not in table.columns:
            return table.iloc[0:0]
        m &= _text(table[col]).to_numpy() == str(v)
    return table[m]


def _text(s: pd.Series) -> pd.Series:
    return s.astype(object).where(s.notna(), "").astype(str)


def _get(table: pd.DataFrame | None, metric: str, **cell) -> dict | None:
    """The run table's row of ``metric`` in ``cell`` as a dict, None when absent."""
    r = _rows(table, **cell)
    r = r[_text(r["metric"]).to_numpy() == metric] if len(r) else r
    if not len(r):
        return None
    return r.iloc[0].to_dict()


def _values(t: pd.DataFrame | None, col: str) -> list[str]:
    if t is None or col not in t.columns or not len(t):
        return []
    return sorted(set(_text(t[col])) - {""})


def _long_from(section: str, model: str, cell: str, row: dict | None, metric: str,
               note: str = "") -> dict:
    if row is None:
        return long_row(section, model, cell, metric, note=note or "not in this run")
    return long_row(section, model, cell, metric, row.get("value"), row.get("ci_low"),
                    row.get("ci_high"), row.get("n"), row.get("note"))


def _with_ci(r: dict) -> str:
    return fmt_ci(r["value"], r["ci_low"], r["ci_high"])


def _value(r: dict) -> str:
    return fmt(r["value"])


def _percent(r: dict) -> str:
    return fmt(r["value"], 1)


def _count(r: dict) -> str:
    return str(int(r["n"]))


def _worst(r: dict) -> str:
    sl = _slice(r)
    return f"{fmt(r['value'])} ({sl})" if sl else fmt(r["value"])


def _slice(r: dict) -> str:
    return "" if _missing(r.get("slice")) else str(r["slice"])


@dataclass(frozen=True)
class Column:
    """One column of a models-as-rows table: the run table's row of ``metric`` where
    the grouping columns equal ``where``, shown by ``show``; ``cell`` names it in the
    long table (``long=False``: shown only, e.g. the count of items)."""
    header: str
    cell: str
    metric: str
    where: dict
    show: Callable[[dict], str] = _with_ci
    long: bool = True
    missing: str = "not in this run"


def _models_table(section: str, title: str, entries: list[Entry], protocol: str, table: str,
                  columns: list[Column]) -> tuple[Display, list[dict]]:
    """(the table shown, its long rows): one row per model, one column per spec."""
    rows, body = [], []
    for e in entries:
        t = e.table(protocol, table)
        line = [e.name]
        for c in columns:
            r = _get(t, c.metric, **c.where)
            if c.long:
                rows.append(_long_from(section, e.name, c.cell, r, c.metric, c.missing))
                if c.show is _worst and r is not None and _slice(r):   # the run's own column
                    rows[-1]["note"] = "; ".join(x for x in (f"slice {_slice(r)}",
                                                             rows[-1]["note"]) if x)
            line.append("-" if r is None else c.show(r))
        body.append(line)
    return Display(title, ["Model", *[c.header for c in columns]], body), rows


def _section(sid: str, title: str, intro: str, parts: list[tuple[Display, list[dict]]],
             notes: list[str] | None = None) -> Section:
    return Section(sid, title, intro=intro, tables=[d for d, _ in parts],
                   long=long_frame([r for _, rows in parts for r in rows]),
                   notes=list(notes or []))


# ---------------------------------------------------------------- BBQ

def bbq_sections(entries: list[Entry]) -> list[Section]:
    """Tables 5 and 6 (per dataset, models as rows) and position bias."""
    have = [e for e in entries if e.table("bbq", "bbq") is not None]
    if not have:
        return []
    datasets = sorted({d for e in have for d in _values(e.table("bbq", "bbq"), "dataset")})
    out = []
    for context, metrics, sid, title, ref in (
            ("ambig", AMBIG_METRICS, "bbq_ambig", "Ambiguous contexts", "Table 5"),
            ("disambig", DISAMBIG_METRICS, "bbq_disambig", "Disambiguated contexts", "Table 6")):
        parts = []
        for ds in datasets:
            where = dict(dataset=ds, context=context, polarity="all")
            cols = [Column(LABELS[m], cell_id(ds, context), m, where,
                           _with_ci if m in WITH_CI else _value) for m in metrics]
            cols.append(Column("n", "", "accuracy", where, _count, long=False))
            parts.append(_models_table(sid, f"{ds}, {context}", have, "bbq", "bbq", cols))
        out.append(_section(
            sid, f"BBQ: {title.lower()} ({ref} layout)",
            "Per dataset, one row per model, first run (repeat 0, rotation 0), both "
            "polarities pooled. Values with their 95% interval as the run reports it; DF "
            "\"UB\" = unbounded (a group with probability 0 beside one above 0).",
            parts, _bbq_notes(have, datasets, context, metrics)))
    if any("position_bias" in set(_text(e.table("bbq", "bbq")["metric"])) for e in have):
        cols = [Column(cell_id(ds, c), cell_id(ds, c), "position_bias",
                       dict(dataset=ds, context=c, polarity="all"),
                       missing="not asked under all three rotations")
                for ds in datasets for c in ("ambig", "disambig")]
        out.append(_section(
            "bbq_position", "BBQ: position bias",
            "max over positions |share - 1/3| of the valid answers of items asked under all "
            "three cyclic option orders (0 = none, 2/3 = always the same letter).",
            [_models_table("bbq_position", "Position bias", have, "bbq", "bbq", cols)]))
    return out


def _bbq_notes(have, datasets, context, metrics) -> list[str]:
    notes = []
    for e in have:
        t = e.table("bbq", "bbq")
        for ds in datasets:
            for m in metrics:
                r = _get(t, m, dataset=ds, context=context, polarity="all")
                if r is not None and not _missing(r.get("note")) and str(r["note"]):
                    notes.append(f"{e.name}, {ds}/{context}, {LABELS[m]}: {r['note']}")
    return notes


# ---------------------------------------------------------------- consistency

def consistency_sections(entries: list[Entry]) -> list[Section]:
    """Table 7 (per dataset and pooled), the low-consistency breakdown and the
    flagged-item counts (both pooled over datasets, per context x polarity)."""
    have = [e for e in entries if e.table("bbq", "consistency") is not None]
    if not have:
        return []
    datasets = sorted({d for e in have for d in _values(e.table("bbq", "consistency"),
                                                        "dataset")} - {"all"}) + ["all"]
    parts = []
    for ds in datasets:
        where = dict(dataset=ds, context="all", polarity="all")
        cols = [Column(LABELS[m], cell_id(ds, "all", "all"), m, where, _percent)
                for m in CONSISTENCY_SUMMARY]
        cols.append(Column("items", "", "mfaa_mean", where, _count, long=False))
        parts.append(_models_table("consistency", "all datasets" if ds == "all" else ds, have,
                                   "bbq", "consistency", cols))
    t7 = _section("consistency", "Consistency over repeated runs (Table 7 layout)",
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
            r = _get(t, count_metric, dataset="all", context=c, polarity=p)
            rows.append(_long_from(sid, e.name, cell, r, count_metric))
            if r is None:
                line.append("-")
                continue
            if pct_metric is not None:
                rp = _get(t, pct_metric, dataset="all", context=c, polarity=p)
                rows.append(_long_from(sid, e.name, cell, rp, pct_metric))
                pct = rp["value"] if rp is not None else NAN
            else:   # the share: the run's count over the run's number of items
                pct = 100.0 * _float(r["value"]) / _float(r["n"]) if _float(r["n"]) else NAN
                rows.append(long_row(sid, e.name, cell, f"pct_{count_metric}", pct, n=r["n"],
                                     note=f"100 * {count_metric} / n"))
            line.append(fmt_count_pct(r["value"], pct))
        body.append(line)
    sec.tables.append(Display(title, ["Model", *[f"{c}/{p}" if c != "all" else "all"
                                                 for c, p in CONTEXT_POLARITY]], body))
    sec.long = long_frame(rows)
    return sec


# ---------------------------------------------------------------- generative

def generative_sections(entries: list[Entry]) -> list[Section]:
    """Per-slice rates, worst slice per family, disparity and refusal gap per model."""
    have = [e for e in entries if e.table("generative", "generative_summary") is not None]
    if not have:
        return []
    slices = sorted({s for e in have for s in _values(e.table("generative",
                                                                "generative_by_slice"), "slice")})
    families = sorted({f for e in have for f in _values(e.table("generative",
                                                                  "generative_summary"), "family")})
    sid = "generative_slices"
    slice_parts = [_models_table(sid, m, have, "generative", "generative_by_slice",
                                 [Column(s, s, m, dict(slice=s)) for s in slices])
                   for m in GENERATIVE_RATE_METRICS]
    sid = "generative_worst"
    worst_parts = [_models_table(sid, f"worst-slice {m}", have, "generative",
                                 "generative_summary",
                                 [Column(f, f, f"worst_slice_{m}", dict(scope="family", family=f),
                                         _worst) for f in families])
                   for m in WORST_FOCUS]
    disparity = [Column(m, "overall", f"disparity_{m}", dict(scope="overall"))
                 for m in GENERATIVE_RATE_METRICS]
    gap = [Column("overall", "overall", "refusal_gap", dict(scope="overall"))] + [
        Column(f, f, "refusal_gap", dict(scope="family", family=f)) for f in families]
    return [
        _section("generative_slices", "Generative: rates per slice",
                 "Share of the successful generations of each slice that the rubric flags, "
                 "with the run's 95% interval (the whole grid pooled).", slice_parts),
        _section("generative_worst", "Generative: worst slice per prompt family",
                 "The slice with the highest rate in each family: rate (slice).", worst_parts),
        _section("generative_disparity", "Generative: slice disparity on the whole grid",
                 "max - min over slices of each rate, the grid pooled, with the run's "
                 "bootstrap interval (a max-type statistic: its interval is not a test of "
                 "no difference).",
                 [_models_table("generative_disparity", "disparity (max - min over slices)",
                                have, "generative", "generative_summary", disparity)]),
        _section("refusal_gap", "Generative: refusal gap",
                 "max over slice pairs |P(refusal | g) - P(refusal | g')|, overall and per "
                 "prompt family.",
                 [_models_table("refusal_gap", "refusal gap", have, "generative",
                                "generative_summary", gap)]),
    ]


def model_sections(entries: list[Entry]) -> list[Section]:
    """Every per-model section, in report order."""
    return [*bbq_sections(entries), *consistency_sections(entries),
            *generative_sections(entries)]
