"""The card as a sequence of neutral blocks (headings, key-values, lists, tables,
plots, missing-field notices), in the order of the eight sections.

Both renderers (:mod:`.render_md`, :mod:`.render_html`) serialise these blocks,
so what a card says is decided once, here. Blocks carry plain text; each
renderer escapes it for its format.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fairness_tests.card.schema import metric_definitions, user_fields
from fairness_tests.card.values import ci, num
from fairness_tests.card.values import get_path as _get

STATUS_ORDER = ("fail", "mixed", "expected_fail", "not_evaluable", "pass")
RATE_METRICS_ORDER = ("stereotype", "demeaning", "pilot_harm", "refusal", "deflection",
                      "identity_salience", "title_mention", "religion_mention")
GROUPING_ORDER = ("protocol", "scope", "rule", "dataset", "context", "polarity", "group", "slice",
                  "family", "decoding", "temperature", "top_p", "occupation", "context_cue",
                  "metric")
HEATMAP_METRICS = ("stereotype", "pilot_harm", "refusal")
BBQ_PLOT_METRICS = ("accuracy", "s_amb", "s_dis", "acc_reinf", "acc_counter", "sf", "df",
                    "df_smoothed", "invalid_rate")


@dataclass
class Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass
class Para:
    text: str
    style: str = ""           # "", "note", "warn", "summary"


@dataclass
class KV:
    pairs: list[tuple[str, str]]


@dataclass
class Items:
    items: list[str]


@dataclass
class Code:
    text: str


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    status_col: int | None = None   # a column holding pass/fail/... (styled)
    caption: str = ""
    name: str = ""                  # a result table's name (its CSV file beside card.md)
    records: list[dict] = field(default_factory=list)   # its rows as recorded in the card


@dataclass
class Missing:
    field: str
    hint: str = ""
    source: str = "user"


@dataclass
class Plot:
    kind: str                 # slice_rates | heatmap | bbq | histogram
    title: str
    data: dict[str, Any] = field(default_factory=dict)


def _s(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, (float, int)) and not isinstance(x, bool):
        return num(x)
    if isinstance(x, list):
        return ", ".join(_s(v) for v in x)
    if isinstance(x, dict):
        return ", ".join(f"{k}={_s(v)}" for k, v in sorted(x.items()))
    return str(x)


def section_titles() -> dict[str, str]:
    return dict(user_fields()["sections"])


class _Builder:
    def __init__(self, card: dict):
        self.card = card
        self.blocks: list[Any] = []
        self.missing = {m["field"]: m for m in card.get("missing_fields") or []
                        if isinstance(m, dict) and "field" in m}

    def add(self, *blocks):
        self.blocks.extend(blocks)

    def missing_under(self, prefix: str) -> None:
        for f, m in sorted(self.missing.items()):
            if f == prefix or f.startswith(prefix + ".") or f.startswith(prefix + "["):
                self.add(Missing(f, m.get("hint", ""), m.get("source", "user")))

    def items_or_missing(self, label: str, path: str) -> None:
        v = _get(self.card, path)
        if v is None or v == []:
            if path in self.missing:
                self.add(Para(label, "label"))
                self.missing_under(path)
            return
        self.add(Para(label, "label"), Items([_s(x) for x in (v if isinstance(v, list) else [v])]))

    def table(self, rows: list[dict], caption: str = "", prefer: list[str] | None = None,
              name: str = "") -> None:
        if not rows:
            return
        cols: list[str] = []
        for r in rows:
            for k in r:
                if k not in cols:
                    cols.append(k)
        has_ci = "ci_low" in cols and "ci_high" in cols
        # column order never depends on dict order: preferred, known grouping columns,
        # the rest alphabetically, then metric, value, CI, n, note
        order = [c for c in [*(prefer or []), *GROUPING_ORDER] if c in cols]
        order = list(dict.fromkeys(order))
        metric_cols = ["metric", "value"] if {"metric", "value"} <= set(cols) else []
        rest = sorted(c for c in cols if c not in order and c not in metric_cols
                      and c not in ("ci_low", "ci_high", "n", "note"))
        head = [c for c in order + rest if c not in metric_cols] + metric_cols
        tail = (["95% CI"] if has_ci else []) + [c for c in ("n", "note") if c in cols]
        out_rows = []
        for r in rows:
            line = [_s(r.get(c)) for c in head]
            if has_ci:
                line.append(ci(r.get("ci_low"), r.get("ci_high")))
            line += [_s(r.get(c)) for c in ("n", "note") if c in cols]
            out_rows.append(line)
        status_col = (head + tail).index("status") if "status" in head else None
        self.add(Table(head + tail, out_rows, status_col, caption, name, rows))


def build(card: dict) -> list[Any]:
    """The blocks of a card, in section order."""
    b = _Builder(card)
    titles = section_titles()
    system = card.get("system") or {}
    name = system.get("name") or "(model not recorded)"
    b.add(Heading(1, f"Fairness Card — {name}", "top"))
    meta = [f"Card version {card.get('card_version', '?')}", f"modality {card.get('modality', '?')}"]
    if card.get("evaluation_date"):
        meta.append(f"evaluation date {card['evaluation_date']}")
    gen = card.get("generator") or {}
    if gen:
        meta.append(f"written by {gen.get('name')} {gen.get('version')}")
    b.add(Para(", ".join(meta) + ".", "note"))
    _summary(b)
    _identification(b, titles)
    b.add(Heading(2, titles["intended_use"], "intended_use"))
    if not card.get("intended_use") and not any(f.startswith("intended_use") for f in b.missing):
        b.add(Para("Not stated.", "note"))
    b.items_or_missing("In scope", "intended_use.in_scope")
    b.items_or_missing("Out of scope", "intended_use.out_of_scope")
    b.add(Heading(2, titles["fairness_scope"], "fairness_scope"))
    for label, key in (("Representational harms", "representational_harms"),
                       ("Access harms", "access_harms"), ("Allocative harms", "allocative_harms"),
                       ("Excluded", "excluded")):
        b.items_or_missing(label, f"fairness_scope.{key}")
    _protected(b, titles)
    _protocol(b, titles)
    _metrics(b, titles)
    b.add(Heading(2, titles["mitigations"], "mitigations"))
    for label, key in (("Applied", "applied"), ("Trade-offs", "trade_offs"),
                       ("Considered, not applied", "not_applied")):
        b.items_or_missing(label, f"mitigations.{key}")
    _governance(b, titles)
    if b.missing:
        b.add(Heading(2, "Missing fields", "missing_fields"))
        b.add(Para("Required fields that neither the run nor the user YAML supplied. Nothing "
                   "was invented in their place.", "note"))
        b.add(Table(["field", "section", "source", "how to supply"],
                    [[m["field"], m.get("section", ""), m.get("source", ""), m.get("hint", "")]
                     for _, m in sorted(b.missing.items())]))
    return b.blocks


def _summary(b: _Builder) -> None:
    card = b.card
    counts = (card.get("results") or {}).get("verdict_counts") or {}
    rules = card.get("decision_rules") or []
    parts = []
    if counts:
        parts.append("Verdicts: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in
                                                 ("pass", "fail", "expected_fail", "not_evaluable")))
    if rules:
        failing = [r["id"] for r in rules if r.get("outcome") in ("fail", "mixed")]
        parts.append(f"{len(rules)} decision rule(s); failing in some cell: "
                     + (", ".join(failing) if failing else "none"))
    ne = (card.get("evaluation_protocol") or {}).get("not_evaluated") or []
    if ne:
        parts.append("Not evaluated: " + ", ".join(x["what"] for x in ne))
    if b.missing:
        parts.append(f"{len(b.missing)} required field(s) missing")
    if parts:
        b.add(Para(". ".join(parts) + ".", "summary"))


def _identification(b: _Builder, titles: dict) -> None:
    card = b.card
    s = card.get("system") or {}
    b.add(Heading(2, titles["identification"], "identification"))
    pairs = [("Model", _s(s.get("name"))), ("Version", _s(s.get("version"))),
             ("Modality", _s(card.get("modality")))]
    surface = s.get("surface")
    if surface:
        src = {"run": " (from the backend)", "user": " (stated by the user)"}.get(
            s.get("surface_source"), "")
        pairs.append(("Surface", f"{surface}{src}"))
    for label, key in (("Backend", "backend"), ("Backend version", "backend_version"),
                       ("Recorded by backend", "recorded_backend"),
                       ("Snapshot date", "snapshot_date"), ("Precision", "precision"),
                       ("Checkpoint", "checkpoint_url"), ("Known served-system layers", "known_layers"),
                       ("Notes", "notes")):
        if s.get(key):
            pairs.append((label, _s(s[key])))
    add = card.get("served_system_addendum") or {}
    for label, key in (("System prompt", "system_prompt"), ("Chat template", "chat_template"),
                       ("Policy classifier", "policy_classifier"),
                       ("Post-processing", "post_processing"), ("API version", "api_version"),
                       ("API evaluation window", "api_evaluation_window")):
        if add.get(key):
            pairs.append((label, _s(add[key])))
    authors = card.get("authors") or []
    if authors:
        pairs.append(("Card authors", "; ".join(
            a.get("name", "") + (f" ({a['affiliation']})" if a.get("affiliation") else "")
            for a in authors)))
    b.add(KV([(k, v) for k, v in pairs if v]))
    for f in ("system.name", "system.version", "system.surface", "system.snapshot_date",
              "system.known_layers", "evaluation_date"):
        b.missing_under(f)


def _protected(b: _Builder, titles: dict) -> None:
    pa = b.card.get("protected_attributes") or {}
    b.add(Heading(2, titles["protected_attributes"], "protected_attributes"))
    slices = pa.get("slices") or []
    if slices:
        b.table(slices, caption=f"{len(slices)} slice(s)", prefer=["protocol"])
    else:
        b.add(Para("No slice recorded.", "note"))
    if pa.get("operationalisation"):
        b.add(Para("How operationalised", "label"), Para(pa["operationalisation"]))
    b.missing_under("protected_attributes")
    if pa.get("notes"):
        b.add(Para("Notes", "label"), Para(_s(pa["notes"])))


def _protocol(b: _Builder, titles: dict) -> None:
    card = b.card
    ep = card.get("evaluation_protocol") or {}
    b.add(Heading(2, titles["evaluation_protocol"], "evaluation_protocol"))
    pairs = [("Answers", (ep.get("source") or {}).get("statement", "")),
             ("Run notes", _s(ep.get("run_notes"))),
             ("How the model was asked", (ep.get("asking") or {}).get("statement", "")),
             ("Protocols run", ", ".join(ep.get("protocols_run") or []) or "none"),
             ("Seed policy", ep.get("seed_policy", "")),
             ("Samples per prompt", ep.get("samples_per_prompt", ""))]
    ps = card.get("prompt_suite") or {}
    pairs += [("Suite", _s(ps.get("suite_name"))), ("Suite hash (sha256)", _s(ps.get("suite_hash"))),
              ("Total prompts", _s(ps.get("total_prompts"))),
              ("Occupations", _s(ps.get("occupations"))),
              ("Attribute insertion rule", _s(ps.get("attribute_insertion_rule")))]
    g = ep.get("generative") or {}
    pairs += [("Generations", _s(g.get("n_generations"))), ("Rubric", _s(g.get("rubric"))),
              ("Reductions from the default grid", _s(g.get("reductions")) or
               ("none" if "reductions" in g else ""))]
    th = ep.get("thresholds") or {}
    pairs.append(("Threshold files", _s(th.get("files"))))
    b.add(KV([(k, v) for k, v in pairs if v]))
    ne = ep.get("not_evaluated") or []
    if ne:
        b.add(Para("Not evaluated", "label"), Items([f"{x['what']}: {x['why']}" for x in ne]))
    b.add(Heading(3, "Prompt families and templates", "prompt_families"))
    for f in ps.get("families") or []:
        b.add(Para(f"{f.get('id')} — {f.get('name', '')}", "label"))
        if f.get("description"):
            b.add(Para(f["description"], "note"))
        if f.get("template"):
            b.add(Code(f["template"]))
        if f.get("paraphrases"):
            b.add(Para(f"Paraphrases ({len(f['paraphrases'])})", "note"), Items(f["paraphrases"]))
    b.missing_under("prompt_suite")
    bbq = ep.get("bbq") or {}
    if bbq:
        b.add(Heading(3, "BBQ data and settings", "bbq_protocol"))
        b.add(KV([(k, _s(bbq[k])) for k in ("data_dir", "categories", "filter", "target_loc",
                                             "conventions", "n_items", "repeats", "rotations",
                                             "temperature", "seed", "bootstrap", "consistency",
                                             "answer_parser") if k in bbq]))
        sha = bbq.get("data_sha256") or {}
        if sha:
            b.add(Table(["data file", "sha256"], [[k, v] for k, v in sorted(sha.items())],
                        caption="data version"))
    dec = card.get("decoding") or {}
    b.add(Heading(3, "Decoding", "decoding"))
    b.table(dec.get("regimes") or [], prefer=["protocol", "name", "temperature", "top_p",
                                              "max_new_tokens"])
    b.add(KV([(k, _s(v)) for k, v in (("Seeds per prompt", dec.get("seeds_per_prompt")),
                                       ("Post-processing", dec.get("post_processing"))) if v]))
    b.missing_under("decoding")
    rh = card.get("refusal_handling") or {}
    sc = card.get("scorer") or {}
    b.add(Heading(3, "Refusal handling and scorer", "refusal_scorer"))
    b.add(KV([(k, _s(v)) for k, v in (
        ("Refusal", rh.get("refusal_definition")), ("Deflection", rh.get("deflection_definition")),
        ("Retention policy", rh.get("retention_policy")), ("Scorer", sc.get("type")),
        ("Patterns", sc.get("patterns_file")), ("Scorer notes", sc.get("notes"))) if v]))


def _rows(card: dict, name: str) -> list[dict]:
    return ((card.get("results") or {}).get("tables") or {}).get(name) or []


def _metrics(b: _Builder, titles: dict) -> None:
    card = b.card
    b.add(Heading(2, titles["metrics"], "metrics"))
    rules = card.get("decision_rules") or []
    b.add(Heading(3, "Decision rules and outcomes", "decision_rules"))
    if rules:
        rows = []
        for r in sorted(rules, key=lambda r: (STATUS_ORDER.index(r.get("outcome", "pass"))
                                               if r.get("outcome") in STATUS_ORDER else 9,
                                               str(r.get("id", r.get("rule"))))):
            c = r.get("cells") or {}
            cells = ", ".join(f"{c[k]} {k}" for k in ("pass", "fail", "expected_fail",
                                                       "not_evaluable") if c.get(k))
            rows.append([_s(r.get("id", "")), _s(r.get("rule")), _s(r.get("outcome", "")), cells,
                         _s(r.get("failing_cells")), _s(r.get("rationale"))])
        b.add(Table(["rule", "decision rule", "outcome", "cells", "failing cells", "rationale"],
                    rows, status_col=2))
        if any(r.get("outcome") == "mixed" for r in rules):
            b.add(Para("'mixed': the rule passes in some cells and fails in others; whether the "
                       "cells differ beyond sampling noise is stated under Protocol dependence.",
                       "warn"))
    else:
        b.add(Para("No decision rule was evaluated.", "note"))
    verdicts = card.get("verdicts") or []
    notable = [v for v in verdicts if v.get("status") != "pass"]
    if verdicts:
        b.add(Heading(3, "Verdicts other than pass", "verdicts"))
        if notable:
            b.add(Table(["rule", "cell", "value", "95% CI", "compared", "bound", "status", "why"],
                        [[_s(v.get("rule")), _s(v.get("cell")), _s(v.get("value")),
                          ci(v.get("ci_low"), v.get("ci_high")), _s(v.get("compared")),
                          f"{_s(v.get('op'))} {_s(v.get('bound'))}".strip(), _s(v.get("status")),
                          _s(v.get("why"))] for v in notable], status_col=6))
        else:
            b.add(Para(f"All {len(verdicts)} verdicts pass.", "note"))
    _gate(b)
    _results(b)
    mets = card.get("metrics") or []
    if mets:
        b.add(Heading(3, "Metric definitions", "metric_definitions"))
        b.add(Table(["metric", "unit", "threshold", "definition"],
                    [[m["name"], _s(m.get("unit")), _s(m.get("threshold")), m["definition"]]
                     for m in mets], name="metric_definitions",
                    records=[{"metric": m["name"], "unit": m.get("unit"),
                              "threshold": m.get("threshold"), "definition": m["definition"]}
                             for m in mets]))


def _gate(b: _Builder) -> None:
    g = b.card.get("upgrade_gate")
    if not g:
        return
    b.add(Heading(3, f"Upgrade gate: {g['candidate']} against {g['baseline']}", "upgrade_gate"))
    outcome = "FAILS" if g.get("failed") else "passes"
    b.add(Para("Paired differences candidate - baseline on the items both runs answered "
               "(95% CI of the paired bootstrap).", "note"))
    b.add(Para(f"The gate {outcome} at family-wise alpha = {_s(g['alpha'])} "
               f"({g['correction']}'s procedure over {len(g['cells'])} cells). {g['family']}",
               "warn" if g.get("failed") else ""))
    b.add(Table(["metric", "cell", "mode", "margin", "baseline", "candidate", "delta",
                 "95% CI", "p", "p (Holm)", "detects", "verdict"],
                [[_s(r.get("metric")), _s(r.get("cell")), _s(r.get("mode")), _s(r.get("margin")),
                  _s(r.get("baseline")), _s(r.get("candidate")), _s(r.get("delta")),
                  ci(r.get("ci_low"), r.get("ci_high")), _s(r.get("p_value")),
                  _s(r.get("p_adjusted")), _s(r.get("detectable")), _s(r.get("verdict"))]
                 for r in g["cells"]], status_col=11, name="upgrade_gate", records=g["cells"]))
    b.add(Para("What this gate can see (80% power at its per-cell level):", "label"),
          Items(g["detectable"]))
    for key, label in (("refusals", "Not gated"), ("warnings", "Protocol differences allowed")):
        if g.get(key):
            b.add(Para(label, "label"), Items(g[key]))


def _results(b: _Builder) -> None:
    card = b.card
    res = card.get("results") or {}
    tables = res.get("tables") or {}
    b.add(Heading(3, "Results", "results"))
    if not tables and not res.get("consistency_distribution"):
        b.add(Para("The run has no metric table.", "note"))
    by_slice = _rows(card, "generative_by_slice")
    if by_slice:
        b.add(Heading(4, "Generative audit per slice", "res_by_slice"))
        panels = _slice_panels(by_slice)
        if panels:
            b.add(Plot("slice_rates", "Per-slice rates with 95% CIs", {"panels": panels}))
        b.table(by_slice, prefer=["slice"], name="generative_by_slice")
    worst = res.get("worst_slice") or []
    if worst:
        b.add(Heading(4, "Worst slice per metric", "res_worst_slice"))
        b.table(worst, prefer=["scope", "metric", "slice"], name="worst_slice")
    fam = _rows(card, "generative_by_slice_family")
    if fam:
        b.add(Heading(4, "Generative audit per slice x family", "res_by_slice_family"))
        for metric in HEATMAP_METRICS:
            hm = _heatmap(fam, metric)
            if hm:
                b.add(Plot("heatmap", f"{metric} rate: slice x prompt family", hm))
        b.table(fam, prefer=["family", "slice"], name="generative_by_slice_family")
    for name, title in (("generative_by_slice_decoding", "Generative audit per slice x decoding"),
                        ("generative_summary", "Worst slice, disparity and refusal gap"),
                        ("scorer_sensitivity", "Scorer sensitivity (same outputs, two rubrics)"),
                        ("protocol_sensitivity", "Protocol-dependent verdicts"),
                        ("counterfactual", "Counterfactual probe")):
        rows = _rows(card, name)
        if rows:
            b.add(Heading(4, title, f"res_{name}"))
            b.table(rows, name=name)
    for key, title in (("protocol_dependence", "Protocol dependence: beyond noise or not resolved"),
                       ("seed_spread", "Seed spread, prompts held fixed (not protocol cells)")):
        if res.get(key):
            b.add(Heading(4, title, f"res_{key}"), Items([x["statement"] for x in res[key]]))
    bbq = _rows(card, "bbq")
    if bbq:
        b.add(Heading(4, "Intersectional BBQ per dataset x context", "res_bbq"))
        panels = _bbq_panels(bbq)
        if panels:
            b.add(Plot("bbq", "BBQ metrics per dataset x context with 95% CIs", {"panels": panels}))
        b.table(bbq, prefer=["dataset", "context", "polarity"], name="bbq")
    groups = _rows(card, "bbq_groups")
    if groups:
        b.add(Heading(4, "BBQ per intersectional group", "res_bbq_groups"))
        b.table(groups, prefer=["dataset", "group"], name="bbq_groups")
    cons = _rows(card, "consistency")
    dist = res.get("consistency_distribution") or {}
    if cons or dist:
        b.add(Heading(4, "Consistency over repeated runs", "res_consistency"))
        for m in ("mfaa", "gtc"):
            if m in dist:
                b.add(Plot("histogram", f"{m.upper()}% per item ({dist[m].get('n', 0)} items)",
                           {"metric": m, **dist[m]}))
        b.table(cons, prefer=["dataset", "context"], name="consistency")
    shown = {"generative_by_slice", "generative_by_slice_family", "generative_by_slice_decoding",
             "generative_summary", "scorer_sensitivity", "protocol_sensitivity", "counterfactual",
             "bbq", "bbq_groups", "consistency"}
    extra = sorted(set(tables) - shown)
    if extra:
        b.add(Heading(3, "Supporting tables", "res_supporting"))
        b.add(Para("Every other table the run computed, in full, so that each number "
                   "above can be traced (per-cell rule verdicts, cell statistics under "
                   "both rubrics, spread decomposition, ...)."))
    for name in extra:
        b.add(Heading(4, name, f"res_{name}"))
        b.table(tables[name], name=name)


def _slice_panels(rows: list[dict]) -> list[dict]:

    defs = metric_definitions()
    metrics = sorted({r.get("metric") for r in rows if r.get("metric")},
                     key=lambda m: (RATE_METRICS_ORDER.index(m) if m in RATE_METRICS_ORDER else 99, m))
    panels = []
    for m in metrics:
        if (defs.get(m) or {}).get("unit") != "rate":
            continue
        pts = [{"label": str(r.get("slice")), "value": r.get("value"), "lo": r.get("ci_low"),
                "hi": r.get("ci_high")} for r in rows if r.get("metric") == m]
        panels.append({"metric": m, "points": sorted(pts, key=lambda p: p["label"])})
    return panels


def _heatmap(rows: list[dict], metric: str) -> dict | None:
    sel = [r for r in rows if r.get("metric") == metric]
    if not sel:
        return None
    slices = sorted({str(r.get("slice")) for r in sel})
    fams = sorted({str(r.get("family")) for r in sel})
    cells = {(str(r.get("slice")), str(r.get("family"))): r.get("value") for r in sel}
    return {"metric": metric, "rows": slices, "cols": fams,
            "values": [[cells.get((s, f)) for f in fams] for s in slices]}


def _bbq_panels(rows: list[dict]) -> list[dict]:
    panels = []
    for m in BBQ_PLOT_METRICS:
        sel = [r for r in rows if r.get("metric") == m]
        if not sel:
            continue
        pts = []
        for r in sel:
            label = "/".join(str(r[k]) for k in ("dataset", "context", "polarity")
                             if r.get(k) not in (None, ""))
            pts.append({"label": label, "value": r.get("value"), "lo": r.get("ci_low"),
                        "hi": r.get("ci_high")})
        panels.append({"metric": m, "points": pts})
    return panels


def _governance(b: _Builder, titles: dict) -> None:
    card = b.card
    g = card.get("governance") or {}
    b.add(Heading(2, titles["governance"], "governance"))
    b.add(KV([(label, _s(g.get(key))) for label, key in (
        ("Owner", "owner"), ("Contact", "contact"), ("Review cadence", "review_cadence"),
        ("Escalation", "escalation"), ("Next review", "next_review"), ("Sign-off", "sign_off"))
        if g.get(key)]))
    b.items_or_missing("Monitoring", "governance.monitoring")
    for f in ("governance.owner", "governance.review_cadence"):
        b.missing_under(f)
    rep = card.get("reproducibility") or {}
    b.add(Heading(3, "Reproducibility", "reproducibility"))
    b.add(KV([(label, _s(rep.get(key))) for label, key in (
        ("Code", "code_url"), ("Licence", "license"), ("Data release", "data_release"),
        ("Seeds", "seeds"), ("Total samples", "total_samples"),
        ("Regenerate", "regen_command")) if rep.get(key) not in (None, "", [])]))
    b.missing_under("reproducibility")
