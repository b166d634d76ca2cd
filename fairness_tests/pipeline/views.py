"""What a benchmark family shows, as data: its sections of ``compare`` and its views of
the card's results (the hooks :meth:`fairness_tests.pipeline.benchmark.Family.
compare_sections` and :meth:`~fairness_tests.pipeline.benchmark.Family.card_results`
return these; ``compare`` and the card render them, and a family's own folder builds
them without importing either).

``compare``: a :class:`Section` holds tables to read (:class:`Display`), figures to draw
(:class:`Figure`: a kind of :mod:`fairness_tests.card.svg` drawing and its arguments) and
the rows of the long table ``compare.csv`` behind them (:data:`LONG_COLUMNS`). The card:
a :class:`View` is a heading, its plots (:class:`Panels`, :class:`Heatmaps`,
:class:`Histograms`: what to draw from which rows; the card adds the decision rules'
bounds) and a table of the card's results, or statements.

The generic layouts (a new benchmark's, unless its family overrides the hooks):
:func:`side_by_side` (compare: one table per metric table, its cells x metrics as rows,
one column per model, ``value [ci_low, ci_high]``) and :func:`table_views` (the card: a
heading and the table, for each table). Light: no pandas or numpy (the tables are read
through their own methods, numbers formatted where rendered), so the interface module
imports it while the plugin loads.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fairness_tests.metrics.schema import TABLES

LONG_COLUMNS = ["section", "model", "versus", "cell", "metric", "value", "ci_low", "ci_high",
                "n", "p_value", "p_adjusted", "note"]
NAN = float("nan")


# ---------------------------------------------------------------- compare

class Compared(Protocol):
    """One model of a comparison, as a family's sections read it
    (:class:`fairness_tests.compare.models.Entry`)."""
    name: str

    def table(self, protocol: str, name: str) -> Any:
        """The model's run table ``name`` of family ``protocol`` (None: absent)."""


@dataclass
class Display:
    """One rendered table: a title, a header and rows of cells (rendered with ``str``; an
    :class:`Estimate` as ``value [lo, hi]``)."""
    title: str
    header: list[str]
    rows: Sequence[Sequence[object]]
    caption: str = ""


@dataclass
class Figure:
    """One figure of a section: ``kind`` names the drawing (``dot_ci``, ``bars_ref``,
    ``grouped_bars`` of :mod:`fairness_tests.card.svg`), ``args`` its keyword arguments
    (numbers as the long table holds them; ``compare`` rounds them as the card does)."""
    kind: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Estimate:
    """A table cell shown as ``value [lo, hi]`` (``compare`` formats it as every interval
    of the report: :func:`fairness_tests.pipeline.view_tables.fmt_ci`)."""
    value: object
    lo: object
    hi: object


@dataclass
class Section:
    """A part of the report: its tables (for reading), figures and the long rows behind
    them (for ``compare.csv``: dicts of :data:`LONG_COLUMNS`, :func:`long_row`)."""
    id: str
    title: str
    intro: str = ""
    tables: list[Display] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    long: list[dict] = field(default_factory=list)


def long_row(section: str, model: str, cell: str, metric: str, value=NAN, ci_low=NAN,
             ci_high=NAN, n=NAN, note: object = "", versus: str = "", p_value=NAN,
             p_adjusted=NAN) -> dict:
    """One row of the long table: numbers as floats (NaN where undefined or absent), the
    note as text ("" where missing)."""
    return {"section": section, "model": model, "versus": versus, "cell": cell,
            "metric": metric, "value": as_float(value), "ci_low": as_float(ci_low),
            "ci_high": as_float(ci_high), "n": as_float(n), "p_value": as_float(p_value),
            "p_adjusted": as_float(p_adjusted), "note": "" if missing(note) else str(note)}


def as_float(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return NAN


def missing(x) -> bool:
    """None, NaN or pandas' NA (recognised by its type's name: no pandas import here)."""
    return x is None or (isinstance(x, float) and math.isnan(x)) or type(x).__name__ == "NAType"


def _text(x: object) -> str:
    return "" if missing(x) else str(x)


def _leading(columns: list[str]) -> tuple[str, ...]:
    """An unregistered table's grouping columns: those before ``metric`` (the long format)."""
    return tuple(columns[:columns.index("metric")]) if "metric" in columns else ()


def side_by_side(family: str, table: str, entries: Sequence[Compared]) -> Section | None:
    """The generic section of one metric table (None: no model's run has it): one row
    per cell x metric (the cell: the table's grouping columns of
    :data:`fairness_tests.metrics.schema.TABLES` (unregistered: the columns before
    ``metric``), joined by "/", "all" when none is set; rows in the order the
    models' tables first hold them), one column per model, ``value [ci_low, ci_high]``
    (an :class:`Estimate`; "-": that model's run lacks the row)."""
    have = [(e, e.table(family, table)) for e in entries]
    have = [(e, t) for e, t in have if t is not None]
    if not have:
        return None
    schema = TABLES.get(table)
    by: dict[tuple[str, str], dict[str, dict]] = {}
    for e, t in have:
        columns = schema.columns if schema is not None else _leading(list(t.columns))
        for r in t.to_dict("records"):
            cell = "/".join(_text(r.get(c)) for c in columns if _text(r.get(c))) or "all"
            by.setdefault((cell, _text(r.get("metric"))), {}).setdefault(e.name, r)
    names = [e.name for e, _ in have]
    body, rows = [], []
    for (cell, metric), per in by.items():
        body.append([cell, metric, *(Estimate(per[n].get("value"), per[n].get("ci_low"),
                                              per[n].get("ci_high")) if n in per else "-"
                                     for n in names)])
        rows += [long_row(table, n, cell, metric, per[n].get("value"), per[n].get("ci_low"),
                          per[n].get("ci_high"), per[n].get("n"), per[n].get("note"))
                 for n in names if n in per]
    return Section(table, table, intro=f"The run table {table}: value [95% CI] per model.",
                   tables=[Display(table, ["Cell", "Metric", *names], body)], long=rows)


# ---------------------------------------------------------------- the card

@dataclass(frozen=True)
class Panels:
    """Dot panels with 95% CIs, one per metric, over the rows of the view's table: the
    metrics in ``order`` (present ones), then, with ``others``, the rest by name; only
    those of ``unit`` (metric definitions) when given. A row is labelled by its values
    of ``columns`` joined by "/" (points sorted by label with ``sort``). ``kind`` names
    the figure (``data-figure`` in the HTML card)."""
    kind: str
    title: str
    columns: tuple[str, ...]
    order: tuple[str, ...] = ()
    others: bool = False
    unit: str | None = None
    sort: bool = False


@dataclass(frozen=True)
class Heatmaps:
    """One heatmap per metric of ``metrics`` (present ones): ``rows`` x ``cols`` of the
    view's table, one shared colour scale; ``title`` formatted with the metric."""
    metrics: tuple[str, ...]
    rows: str
    cols: str
    title: str = "{metric}"


@dataclass(frozen=True)
class Histograms:
    """Per-item histograms of the card's results entry ``source`` (``{metric: {bin_edges,
    counts, n, mean}}``), one per metric of ``metrics`` present, one count axis; the
    floor a rule puts on ``bound_metric`` (formatted with the metric) drawn."""
    source: str
    metrics: tuple[str, ...]
    title: str = "{METRIC}% per item ({n} items)"
    bound_metric: str = "{metric}_mean"


@dataclass(frozen=True)
class View:
    """One view of the card's results: a level-4 heading (``title``, anchor ``anchor``),
    its plots, then the rows of ``table`` (a run table under ``results.tables``; with
    ``source="results"``, the card's own results entry of that name) with the columns of
    ``prefer`` first; or, with ``statements``, the ``statement`` of each entry of that
    results key as a list. Shown when it has rows (or, for ``also``, when that results
    entry is present too). The tables a family's views show are left out of "Supporting
    tables"."""
    title: str
    anchor: str
    table: str = ""
    source: str = "tables"
    prefer: tuple[str, ...] = ()
    plots: tuple[Panels | Heatmaps | Histograms, ...] = ()
    also: str = ""
    statements: str = ""


@dataclass
class CardProtocol:
    """The card's statements of how a run asked and scored, as the families fill them
    (:meth:`fairness_tests.pipeline.benchmark.Family.card_protocol`, called in
    ``card_rank`` order; the card writes them into its sections ``prompt_suite``,
    ``decoding``, ``refusal_handling``, ``scorer`` and ``evaluation_protocol``).

    ``suite``: ``prompt_suite`` (its ``families`` list and the family's own keys);
    ``total_prompts``: the distinct prompts asked, summed over the families;
    ``regimes``: ``decoding.regimes``; ``seeds_per_prompt``, ``post_processing``: the
    first family's that sets them; ``refusal``: one sentence per family of
    ``refusal_handling.refusal_definition`` (``refusal_fields``: its other keys);
    ``scorer``: ``scorer``'s keys; its notes are each family's sentence of how its
    answers were scored (``scorer_notes``), then the checks of the scorers (judges,
    agreement, sensitivity: ``scorer_checks``); ``record``:
    ``{run.json key: what evaluation_protocol records under it}``; ``seeds`` and
    ``samples``: ``{family: its sentence of seed_policy / samples_per_prompt}`` (joined
    in registry order); ``slices``: ``protected_attributes.slices`` (each with its
    ``protocol``); ``operationalisation``: one sentence per family of how its protected
    attributes are put into the prompts; ``sample_seeds``: the seeds of the answers'
    sampling (reproducibility's ``seeds``: the first family's that sets them);
    ``total_samples``: the answers sampled, summed over the families that count them;
    ``system_prompt``: the system prompt the model was given (the served system's
    addendum; the first family's that sets it)."""
    suite: dict[str, Any] = field(default_factory=lambda: {"families": []})
    total_prompts: int = 0
    regimes: list[dict[str, Any]] = field(default_factory=list)
    seeds_per_prompt: int | None = None
    post_processing: str | None = None
    refusal: list[str] = field(default_factory=list)
    refusal_fields: dict[str, Any] = field(default_factory=dict)
    scorer: dict[str, Any] = field(default_factory=lambda: {"type": "lexical-rule"})
    scorer_notes: list[str] = field(default_factory=list)
    scorer_checks: list[str] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)
    seeds: dict[str, str] = field(default_factory=dict)
    samples: dict[str, str] = field(default_factory=dict)
    slices: list[dict[str, str]] = field(default_factory=list)
    operationalisation: list[str] = field(default_factory=list)
    sample_seeds: list[int] | None = None
    total_samples: int = 0
    system_prompt: str | None = None

    def add_family(self, facts: Any, family: dict[str, Any], template: str | None,
                   missing: str) -> None:
        """A family of the prompt suite, with its ``template`` (None: listed as
        missing, ``missing`` saying where the run would have recorded it)."""
        if template:
            family["template"] = template
        else:
            facts.lack(f"prompt_suite.families[{len(self.suite['families'])}].template",
                       "evaluation_protocol", missing)
        self.suite["families"].append(family)

    def add_prompts(self, facts: Any, n: int | None, missing: str) -> None:
        """``n`` distinct prompts into ``total_prompts`` (None: listed as missing)."""
        if n is not None:
            self.total_prompts += n
        else:
            facts.lack("prompt_suite.total_prompts", "evaluation_protocol", missing)

    def reads_loglikelihoods(self, key: str, name: str, of: str) -> None:
        """The decoding of a benchmark that reads log-likelihoods (of ``of``): nothing
        sampled (temperature 1 and top_p 1: the model's unscaled softmax), one answer
        per prompt, no post-processing of text."""
        self.regimes.append({
            "name": f"{key}-loglikelihood", "protocol": key, "temperature": 1.0,
            "top_p": 1.0, "sampling": f"none: the log-likelihood of {of} under the model's "
            "unscaled softmax (temperature 1, full vocabulary); nothing is generated"})
        if self.seeds_per_prompt is None:
            self.seeds_per_prompt = 1
        if self.post_processing is None:
            self.post_processing = f"None: {name} reads log-likelihoods, not text."


@dataclass(frozen=True)
class ProtocolView:
    """How the card shows a family's record under ``evaluation_protocol``
    (:meth:`fairness_tests.pipeline.benchmark.Family.protocol_view`): ``summary``:
    ``(label, value)`` pairs added to the protocol's summary list; a subsection
    ``title`` (anchor ``anchor``; none when the title is empty) showing ``warnings``
    first, then ``pairs``, then ``table`` (``(columns, rows, caption)``; None: no table).
    Values are the record's; the card formats them (a pair whose value formats empty is
    left out of the summary)."""
    summary: tuple[tuple[str, Any], ...] = ()
    title: str = ""
    anchor: str = ""
    warnings: tuple[str, ...] = ()
    pairs: tuple[tuple[str, Any], ...] = ()
    table: tuple[list[str], list[list[Any]], str] | None = None


def table_views(tables: Sequence[str]) -> list[View]:
    """The generic card views: for each table, a heading (its name) and the table."""
    return [View(t, f"res_{t}", t) for t in tables]

