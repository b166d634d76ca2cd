"""Section 6 of the card laid out in blocks: decision rules, verdicts, the upgrade
gate, the results (tables and plots) and the metric definitions.

The tables a reviewer must see are never folded: every decision rule, and every
failing and expected-failing verdict (a not-evaluable verdict sits in its own table,
folded when long). Results are laid out by the benchmark families' views
(:meth:`fairness_tests.pipeline.benchmark.Family.card_results`: a heading, its plots and
a table, or statements; :func:`views`), and every table none of them showed is listed
in full under "Supporting tables". A new benchmark's tables are laid out by the generic
views unless its family declares its own.
"""
from __future__ import annotations

from fairness_tests.card import plots
from fairness_tests.card.blocks import Builder, Heading, Items, Para, Plot, Table, text
from fairness_tests.card.values import ci
from fairness_tests.pipeline.benchmark import ranked_families
from fairness_tests.pipeline.views import Heatmaps, Histograms, Panels, View

STATUS_ORDER = ("fail", "mixed", "expected_fail", "not_evaluable", "pass")
VERDICT_HEAD = ["rule", "cell", "value", "95% CI", "compared", "bound", "status", "why"]


def rows_of(card: dict, name: str) -> list[dict]:
    """The rows of the run table ``name`` as recorded in the card ([] when absent)."""
    return ((card.get("results") or {}).get("tables") or {}).get(name) or []


def _rank(status: object) -> int:
    return STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER)


def metrics_section(b: Builder, title: str) -> None:
    card = b.card
    b.add(Heading(2, title, "metrics"))
    _rules(b)
    _verdicts(b)
    _gate(b)
    _results(b)
    mets = card.get("metrics") or []
    if mets:
        b.add(Heading(3, "Metric definitions", "metric_definitions"))
        b.add(Table(["metric", "unit", "threshold", "definition"],
                    [[m["name"], text(m.get("unit")), text(m.get("threshold")), m["definition"]]
                     for m in mets], name="metric_definitions",
                    records=[{"metric": m["name"], "unit": m.get("unit"),
                              "threshold": m.get("threshold"), "definition": m["definition"]}
                             for m in mets]))


def _rules(b: Builder) -> None:
    rules = b.card.get("decision_rules") or []
    b.add(Heading(3, "Decision rules and outcomes", "decision_rules"))
    if not rules:
        b.add(Para("No decision rule was evaluated.", "note"))
        return
    rows = []
    for r in sorted(rules, key=lambda r: (_rank(r.get("outcome", "pass")),
                                          str(r.get("id", r.get("rule"))))):
        c = r.get("cells") or {}
        cells = ", ".join(f"{c[k]} {k}" for k in ("pass", "fail", "expected_fail",
                                                   "not_evaluable") if c.get(k))
        rows.append([text(r.get("id", "")), text(r.get("rule")), text(r.get("outcome", "")),
                     cells, text(r.get("failing_cells")), text(r.get("rationale"))])
    b.add(Table(["rule", "decision rule", "outcome", "cells", "failing cells", "rationale"],
                rows, status_col=2, fold=False))
    if any(r.get("outcome") == "mixed" for r in rules):
        b.add(Para("'mixed': the rule passes in some cells and fails in others; whether the "
                   "cells differ beyond sampling noise is stated under Protocol dependence.",
                   "warn"))


def _bound(x: object) -> str:
    """A rule's bound as written in its thresholds file (0.1, 50), not at 3 decimals."""
    return f"{x:g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else text(x)


def _verdict_row(v: dict) -> list[str]:
    return [text(v.get("rule")), text(v.get("cell")), text(v.get("value")),
            ci(v.get("ci_low"), v.get("ci_high")), text(v.get("compared")),
            f"{text(v.get('op'))}\u00a0{_bound(v.get('bound'))}".strip(), text(v.get("status")),
            text(v.get("why"))]


def _verdicts(b: Builder) -> None:
    verdicts = b.card.get("verdicts") or []
    if not verdicts:
        return
    b.add(Heading(3, "Verdicts other than pass", "verdicts"))
    notable = sorted((v for v in verdicts if v.get("status") != "pass"),
                     key=lambda v: (_rank(v.get("status")), str(v.get("rule")),
                                    str(v.get("cell"))))
    if not notable:
        b.add(Para(f"All {len(verdicts)} verdicts pass.", "note"))
        return
    failing = [v for v in notable if v.get("status") in ("fail", "expected_fail")]
    other = [v for v in notable if v not in failing]
    if failing:
        b.add(Table(VERDICT_HEAD, [_verdict_row(v) for v in failing], status_col=6,
                    caption=f"{len(failing)} failing or expected-failing cell(s); value and CI "
                            "are this run's, an expected failure's reason is declared in the "
                            "thresholds file", fold=False))
    if other:
        b.add(Table(VERDICT_HEAD, [_verdict_row(v) for v in other], status_col=6,
                    caption=f"{len(other)} cell(s) not evaluable"))


def _gate(b: Builder) -> None:
    g = b.card.get("upgrade_gate")
    if not g:
        return
    b.add(Heading(3, f"Upgrade gate: {g['candidate']} against {g['baseline']}", "upgrade_gate"))
    nothing = g.get("evaluated") == 0
    outcome = "COMPARED NOTHING" if nothing else "FAILS" if g.get("failed") else "passes"
    b.add(Para("Paired differences candidate - baseline on the items both runs answered "
               "(95% CI of the paired bootstrap).", "note"))
    b.add(Para(f"The gate {outcome} at family-wise alpha = {text(g['alpha'])} "
               f"({g['correction']}'s procedure over the cells with a test). {g['family']}",
               "warn" if g.get("failed") or nothing else ""))
    if g.get("summary"):
        b.add(Para(f"Outcome: {g['summary']}", "warn" if g.get("failed") or nothing else ""))
    b.add(Table(["metric", "cell", "mode", "margin", "baseline", "candidate", "delta",
                 "95% CI", "p", "p (Holm)", "detects", "verdict"],
                [[text(r.get("metric")), text(r.get("cell")), text(r.get("mode")),
                  text(r.get("margin")), text(r.get("baseline")), text(r.get("candidate")),
                  text(r.get("delta")), ci(r.get("ci_low"), r.get("ci_high")),
                  text(r.get("p_value")), text(r.get("p_adjusted")), text(r.get("detectable")),
                  text(r.get("verdict"))]
                 for r in g["cells"]], status_col=11, name="upgrade_gate", records=g["cells"]))
    b.add(Para("What this gate can see (80% power at its per-cell level):", "label"),
          Items(g["detectable"]))
    for key, label in (("refusals", "Not gated"), ("warnings", "Protocol differences allowed")):
        if g.get(key):
            b.add(Para(label, "label"), Items(g[key]))


# ----------------------------------------------------------------------------- results

#: the run's rule statements (from its protocol-sensitivity and seed-spread tables)
STATEMENTS = [View("Protocol dependence: beyond noise or not resolved", "res_protocol_dependence",
                   statements="protocol_dependence"),
              View("Seed spread, prompts held fixed (not protocol cells)", "res_seed_spread",
                   statements="seed_spread")]
#: where :data:`STATEMENTS` stand among the families' views (``Family.card_rank``)
STATEMENTS_RANK = 30


def views(tables: dict[str, list[dict]]) -> list[View]:
    """Every view of the results (the card's result ``tables``), in card order: each
    family's (:meth:`~fairness_tests.pipeline.benchmark.Family.card_results`) by its
    ``card_rank`` (then registry order), the rule statements at :data:`STATEMENTS_RANK`."""
    ranked = [(STATEMENTS_RANK, -1, STATEMENTS)] + [
        (family.card_rank, i, family.card_results(tables))
        for i, (_, family) in enumerate(ranked_families())]
    return [v for _, _, vs in sorted(ranked, key=lambda x: x[:2]) for v in vs]


def _plot(b: Builder, spec: Panels | Heatmaps | Histograms, rows: list[dict]) -> None:
    card = b.card
    if isinstance(spec, Panels):
        panels, skipped = plots.panels(card, rows, spec)
        if panels:
            b.add(Plot(spec.kind, spec.title, {"panels": panels}, plots.note(panels, skipped)))
    elif isinstance(spec, Heatmaps):
        for hm in plots.heatmaps(card, rows, spec):
            b.add(Plot("heatmap", spec.title.format(metric=hm["metric"]), hm))
    else:
        dist = (card.get("results") or {}).get(spec.source) or {}
        for h in plots.histograms(card, dist, spec):
            b.add(Plot("histogram", spec.title.format(METRIC=h["metric"].upper(),
                                                      metric=h["metric"], n=h.get("n", 0)), h))


def _view(b: Builder, v: View) -> list[str]:
    """Add one view's blocks; the run tables it shows."""
    res = b.card.get("results") or {}
    if v.statements:
        if res.get(v.statements):
            b.add(Heading(4, v.title, v.anchor), Items([x["statement"] for x in res[v.statements]]))
        return []
    rows = rows_of(b.card, v.table) if v.source == "tables" else res.get(v.table) or []
    if rows or (v.also and res.get(v.also)):
        b.add(Heading(4, v.title, v.anchor))
        for p in v.plots:
            _plot(b, p, rows)
        b.table(rows, prefer=list(v.prefer), name=v.table)
    return [v.table] if v.source == "tables" else []


def _results(b: Builder) -> None:
    res = b.card.get("results") or {}
    tables = res.get("tables") or {}
    b.add(Heading(3, "Results", "results"))
    if not tables and not set(res) - {"tables", "verdict_counts"}:
        b.add(Para("The run has no metric table.", "note"))
    shown: set[str] = set()
    for view in views(tables):
        shown |= set(_view(b, view))
    extra = sorted(set(tables) - shown)
    if extra:
        b.add(Heading(3, "Supporting tables", "res_supporting"))
        b.add(Para("Every other table the run computed, in full, so that each number "
                   "above can be traced (per-cell rule verdicts, cell statistics under "
                   "both rubrics, spread decomposition, ...)."))
    for name in extra:
        b.add(Heading(4, name, f"res_{name}"))
        b.table(tables[name], name=name)
