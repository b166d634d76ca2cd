"""The comparison of N models: :func:`build_report` -> :class:`CompareReport`.

Refuses models whose runs do not share the protocol (the gate's protocol facts: item
set, data, suite hash, decoding, repeats, rubric, ...), listing every difference,
unless ``allow_protocol_change`` (then the differences head the report and the
common items are compared).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import pandas as pd

from fairness_tests.compare import pairwise as P
from fairness_tests.compare.models import Entry, compared_names
from fairness_tests.compare.tables import (
    Display,
    Section,
    fmt,
    fmt_ci,
    long_row,
    model_sections,
)
from fairness_tests.core.fmt import shown_p
from fairness_tests.core.registry import default_clusters
from fairness_tests.pipeline import gate as G
from fairness_tests.pipeline.benchmark import families
from fairness_tests.pipeline.gate import ProtocolChangeError
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT, DEFAULT_SEED


@dataclass
class CompareReport:
    title: str
    entries: list[Entry]
    differences: list[str]
    sections: list[Section]
    unstated: list[str] = field(default_factory=list)
    method: list[str] = field(default_factory=list)
    footer: str = ""

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    def models_table(self) -> Display:
        rows = []
        for e in self.entries:
            for proto in compared_names():
                run = e.run(proto)
                if run is None:
                    continue
                md = run.metadata
                src = md.source.kind + (f" {md.source.file}" if md.source.file else "")
                rows.append([e.name, proto, md.model, md.mode, src, md.fairness_tests_version])
        return Display("Models", ["Model", "Protocol", "Run's model id", "Mode", "Answers from",
                                  "fairness_tests"], rows)

    def protocol_lines(self) -> list[str]:
        if not self.differences:
            return ["All runs share the protocol of each protocol they hold (item set, data, "
                    "suite, decoding, repeats, rubric); comparisons are paired on the shared "
                    "items."]
        return [f"The runs do NOT share the protocol ({len(self.differences)} difference(s), "
                "compared with --allow-protocol-change on the common items; a difference "
                "below may be the protocol's, not the model's):",
                *[f"- {d}" for d in self.differences]]


def protocol_facts(entries: list[Entry]) -> tuple[list[str], list[str]]:
    """(differences, unstated): each model's run of a protocol against the first
    model's run of it, the facts of that protocol both state differently, and those
    only one of them states (a run scored from someone's predictions does not know
    their decoding or prompt)."""
    differences, unstated = [], []
    for proto in compared_names():
        having = [e for e in entries if e.run(proto) is not None]
        for e in having[1:]:
            a, b = having[0].run(proto), e.run(proto)
            assert a is not None and b is not None   # both have the protocol
            names = (having[0].name, e.name)
            differences += G.protocol_differences(a, b, names=names, protocol=proto)
            unstated += G.protocol_unstated(a, b, names=names, protocol=proto)
    return differences, unstated


def build_report(entries: list[Entry], *, allow_protocol_change: bool = False,
                 n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
                 alpha: float = P.ALPHA, cluster: dict[str, str] | None = None) -> CompareReport:
    differences, unstated = protocol_facts(entries)
    if differences and not allow_protocol_change:
        raise ProtocolChangeError(
            "the runs do not share the protocol, so their differences are not only the "
            "models': " + "; ".join(differences) + " (re-run them under one protocol, or "
            "pass --allow-protocol-change to compare the common items anyway)")
    names = [e.name for e in entries]
    sections = model_sections(entries)
    pairs = P.pairwise(entries, n_boot=n_boot, seed=seed, alpha=alpha, cluster=cluster)
    ranks = P.ranking(pairs)
    if len(pairs):
        sections.append(_pairwise_section(pairs, alpha))
    if len(ranks):
        sections.append(_ranking_section(ranks, names))
    clusters = {**default_clusters(), **(cluster or {})}
    method = [
        "Every per-model number is the run's own table row (tables/*.csv of its run "
        "directory), not recomputed; undefined values are n/a with the run's note, "
        "unbounded DF is UB.",
        f"Pairwise comparisons: the gate's paired statistics on the items both models "
        f"answered ({n_boot} paired resamples, seed {seed}, resampling "
        f"{_units(entries, clusters)}, the same resamples "
        f"for both models); two-sided p from the gate's test at margin 0 (accuracy: the "
        f"score test on discordant items, McNemar's at margin 0, times the design effect; "
        f"other metrics: paired bootstrap z); Holm's procedure over all "
        f"{int(pairs['p_value'].notna().sum()) if len(pairs) else 0} comparisons at "
        f"family-wise alpha = {alpha:g}.",
        "Ranking: per metric and cell, a model's rank interval is [1 + the number of "
        "models separated from it and better, N - the number separated from it and worse] "
        "(separated: Holm-adjusted p < alpha), the joint confidence set for ranks of "
        "Klein, Wright & Wieczorek (2020), simultaneous over every model, metric and cell; "
        "its rank is the lower end, so models the data cannot separate share a rank.",
        "Max-type metrics (SF, DF, worst-slice rate, disparity, refusal gap): their "
        "intervals are not tests of 'no difference between groups'; see each run's card.",
    ]
    return CompareReport(title="Model comparison: " + ", ".join(names), entries=entries,
                         differences=differences, unstated=unstated, sections=sections,
                         method=method,
                         footer="fairness-tests compare " + " ".join(names))


def _units(entries: list[Entry], clusters: dict[str, str]) -> str:
    """What the pairwise resamples, in words: each gated family some model's runs hold,
    its unit (:meth:`FamilySpec.unit_text`), joined with "and"."""
    units = [spec.unit_text(clusters[spec.name]) for spec in families()
             if spec.gated and any(e.run(spec.name) is not None for e in entries)]
    return " and ".join(units) or "items"


def _pairwise_section(pairs: pd.DataFrame, alpha: float) -> Section:
    sec = Section("pairwise", "Pairwise comparisons (paired, Holm-adjusted)",
                  intro=(f"delta = model B - model A on the shared items, its paired 95% CI, "
                         f"the two-sided p-value and the Holm-adjusted one; separated when "
                         f"the adjusted p < {alpha:g} (the gate's notes call A the baseline "
                         f"and B the candidate)."))
    rows, body = [], []
    pair_rows: Iterable[Any] = pairs.itertuples(index=False)
    for r in pair_rows:
        rows.append(long_row("pairwise", r.model_b, r.cell, r.metric, r.delta, r.ci_low,
                             r.ci_high, r.n, note="; ".join(x for x in (r.verdict, r.note) if x),
                             versus=r.model_a, p_value=r.p_value, p_adjusted=r.p_adjusted))
        body.append([r.metric, r.cell, r.model_a, r.model_b, fmt(r.value_a), fmt(r.value_b),
                     fmt_ci(r.delta, r.ci_low, r.ci_high), str(int(r.n)), _p(r.p_value),
                     _p(r.p_adjusted), r.verdict])
    sec.tables.append(Display("pairs", ["Metric", "Cell", "A", "B", "A value", "B value",
                                        "B - A [95% CI]", "n", "p", "p (Holm)", "verdict"],
                              body))
    notes = sorted({str(r.note) for r in pairs.itertuples(index=False) if r.note})
    sec.notes = notes
    sec.long = rows
    return sec


def _ranking_section(ranks: pd.DataFrame, names: list[str]) -> Section:
    sec = Section("ranking", "Ranking per metric, with rank intervals",
                  intro=("rank [rank interval]: 1 = best; models the data cannot separate "
                         "share a rank; the interval holds the model's true rank for every "
                         "metric and cell at once with probability 1 - alpha."))
    rows, body = [], []
    for (metric, cell), g in ranks.groupby(["metric", "cell"], sort=False):
        line = [metric, cell, g["better"].iloc[0]]
        rank_rows: Iterable[Any] = g.itertuples(index=False)
        by = {str(r.model): r for r in rank_rows}
        for n in names:
            r = by.get(n)
            if r is None:
                line.append("-")
                continue
            rows.append(long_row("ranking", n, str(cell), str(metric), r.rank, r.rank_low,
                                 r.rank_high, r.n,
                                 note=f"value {fmt(r.value)}; {r.n_models} models ranked"))
            line.append("n/a" if math.isnan(r.rank) else
                        f"{int(r.rank)} [{_r(r.rank_low)}-{_r(r.rank_high)}]")
        body.append(line)
    sec.tables.append(Display("ranks", ["Metric", "Cell", "better", *names], body))
    sec.long = rows
    return sec


def _r(x) -> str:
    return "?" if x is None or math.isnan(float(x)) else str(int(x))


def _p(x) -> str:
    return shown_p(x, undefined="n/a")
