"""Section 6 of the card laid out in blocks: decision rules, verdicts, the upgrade
gate, the results (tables and plots) and the metric definitions.

The tables a reviewer must see are never folded: every decision rule, and every
failing and expected-failing verdict (a not-evaluable verdict sits in its own table,
folded when long). Results are laid out by the functions of :data:`RESULTS`, in
order; each adds its blocks and returns the names of the run tables it showed, and
every table none of them showed is listed in full under "Supporting tables". A new
result view (a table with its plot) is one function added to :data:`RESULTS`.
"""
from __future__ import annotations

from typing import Callable, Iterable

from fairness_tests.card import plots
from fairness_tests.card.blocks import Builder, Heading, Items, Para, Plot, Table, text
from fairness_tests.card.values import ci

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

def _generative(b: Builder) -> Iterable[str]:
    card = b.card
    by_slice = rows_of(card, "generative_by_slice")
    if by_slice:
        b.add(Heading(4, "Generative audit per slice", "res_by_slice"))
        panels, skipped = plots.slice_panels(card, by_slice)
        if panels:
            b.add(Plot("slice_rates", "Per-slice rates with 95% CIs", {"panels": panels},
                       plots.note(panels, skipped)))
        b.table(by_slice, prefer=["slice"], name="generative_by_slice")
    worst = (card.get("results") or {}).get("worst_slice") or []
    if worst:
        b.add(Heading(4, "Worst slice per metric", "res_worst_slice"))
        b.table(worst, prefer=["scope", "metric", "slice"], name="worst_slice")
    fam = rows_of(card, "generative_by_slice_family")
    if fam:
        b.add(Heading(4, "Generative audit per slice x family", "res_by_slice_family"))
        for hm in plots.heatmaps(card, fam):
            b.add(Plot("heatmap", f"{hm['metric']} rate: slice x prompt family", hm))
        b.table(fam, prefer=["family", "slice"], name="generative_by_slice_family")
    shown = ["generative_by_slice", "generative_by_slice_family"]
    for name, title in (("generative_by_slice_decoding", "Generative audit per slice x decoding"),
                        ("generative_summary", "Worst slice, disparity and refusal gap"),
                        ("scorer_sensitivity", "Scorer sensitivity (same outputs, two rubrics)"),
                        ("scorer_agreement", "Scorer agreement: raw agreement and Cohen's "
                                             "kappa per label and slice (95% CI)"),
                        ("scorer_flips", "Verdicts that change with the scorer"),
                        ("protocol_sensitivity", "Protocol-dependent verdicts"),
                        ("counterfactual", "Counterfactual probe")):
        rows = rows_of(card, name)
        shown.append(name)
        if rows:
            b.add(Heading(4, title, f"res_{name}"))
            b.table(rows, name=name)
    res = card.get("results") or {}
    for key, title in (("protocol_dependence", "Protocol dependence: beyond noise or not resolved"),
                       ("seed_spread", "Seed spread, prompts held fixed (not protocol cells)")):
        if res.get(key):
            b.add(Heading(4, title, f"res_{key}"), Items([x["statement"] for x in res[key]]))
    return shown


def _bbq(b: Builder) -> Iterable[str]:
    card = b.card
    bbq = rows_of(card, "bbq")
    if bbq:
        b.add(Heading(4, "Intersectional BBQ per dataset x context", "res_bbq"))
        panels, skipped = plots.bbq_panels(card, bbq)
        if panels:
            b.add(Plot("bbq", "BBQ metrics per dataset x context with 95% CIs",
                       {"panels": panels}, plots.note(panels, skipped)))
        b.table(bbq, prefer=["dataset", "context", "polarity"], name="bbq")
    groups = rows_of(card, "bbq_groups")
    if groups:
        b.add(Heading(4, "BBQ per intersectional group", "res_bbq_groups"))
        b.table(groups, prefer=["dataset", "group"], name="bbq_groups")
    return ["bbq", "bbq_groups"]


def _consistency(b: Builder) -> Iterable[str]:
    card = b.card
    cons = rows_of(card, "consistency")
    dist = (card.get("results") or {}).get("consistency_distribution") or {}
    if cons or dist:
        b.add(Heading(4, "Consistency over repeated runs", "res_consistency"))
        for h in plots.histograms(card, dist):
            b.add(Plot("histogram", f"{h['metric'].upper()}% per item ({h.get('n', 0)} items)",
                       h))
        b.table(cons, prefer=["dataset", "context"], name="consistency")
    return ["consistency"]


#: the result views, in card order: each adds its blocks, returns the tables it showed
RESULTS: list[Callable[[Builder], Iterable[str]]] = [_generative, _bbq, _consistency]


def _results(b: Builder) -> None:
    res = b.card.get("results") or {}
    tables = res.get("tables") or {}
    b.add(Heading(3, "Results", "results"))
    if not tables and not res.get("consistency_distribution"):
        b.add(Para("The run has no metric table.", "note"))
    shown: set[str] = set()
    for view in RESULTS:
        shown |= set(view(b))
    extra = sorted(set(tables) - shown)
    if extra:
        b.add(Heading(3, "Supporting tables", "res_supporting"))
        b.add(Para("Every other table the run computed, in full, so that each number "
                   "above can be traced (per-cell rule verdicts, cell statistics under "
                   "both rubrics, spread decomposition, ...)."))
    for name in extra:
        b.add(Heading(4, name, f"res_{name}"))
        b.table(tables[name], name=name)
