"""The card as a sequence of neutral blocks (:mod:`.blocks`: headings, key-values,
lists, tables, plots, missing-field notices), in the order of the eight sections.

Both renderers (:mod:`.render_md`, :mod:`.render_html`) serialise these blocks, so
what a card says is decided once: here for sections 1-5, 7 and 8 and the summary at
the top, in :mod:`.layout_metrics` for section 6. A run that did not get all its
answers (failed requests) or whose letter probabilities were unusable says so in a
banner at the top, before any verdict.
"""
from __future__ import annotations

from typing import Any

from fairness_tests.card.blocks import (
    KV,
    Builder,
    Code,
    Heading,
    Items,
    Para,
    Table,
    section_titles,
    text,
)
from fairness_tests.card.layout_metrics import metrics_section
from fairness_tests.pipeline.benchmark import ranked_families
from fairness_tests.pipeline.views import ProtocolView


def build(card: dict) -> list[Any]:
    """The blocks of a card, in section order."""
    b = Builder(card)
    titles = section_titles()
    system = card.get("system") or {}
    name = system.get("name") or "(model not recorded)"
    b.add(Heading(1, f"Fairness Card — {name}", "top"))
    meta = [f"Card version {card.get('card_version', '?')}",
            f"modality {card.get('modality', '?')}"]
    if card.get("evaluation_date"):
        meta.append(f"evaluation date {card['evaluation_date']}")
    gen = card.get("generator") or {}
    if gen:
        meta.append(f"written by {gen.get('name')} {gen.get('version')}")
    b.add(Para(", ".join(meta) + ".", "note"))
    _banners(b)
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
    metrics_section(b, titles["metrics"])
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


def _asking(card: dict) -> dict:
    return (card.get("evaluation_protocol") or {}).get("asking") or {}


def _banners(b: Builder) -> None:
    """Before any verdict: a run that lacks answers (failed requests) or whose letter
    probabilities were unusable everywhere says so."""
    a = _asking(b.card)
    inc = a.get("incomplete")
    if inc:
        where = ", ".join(f"{r['protocol']} {r['failed']}" for r in a.get("requests") or []
                          if r.get("failed"))
        first = inc.get("first_error") or "not recorded"
        b.add(Para(f"INCOMPLETE RUN: {inc['failed']} of {inc['requests']} requests failed after "
                   f"their retries ({where}); first error: {first}. Every verdict below rests "
                   "only on the answers that arrived; run the same "
                   "command again to ask the failed requests.", "alert"))
    lm = a.get("letter_mass")
    if lm and lm.get("everywhere"):
        b.add(Para(f"LETTER MASS LOW EVERYWHERE: {lm['statement']}", "alert"))


def _requests(b: Builder) -> None:
    """Section 5: how many requests each protocol sent, took from the store, lost."""
    a = _asking(b.card)
    reqs = a.get("requests") or []
    if not reqs and "cost_usd" not in a:
        return
    b.add(Heading(3, "Requests", "requests"))
    if reqs:
        has_mass = any(r.get("letter_prompts") for r in reqs)
        cols = ["protocol", "requests", "sent", "from store", "failed", "invalid", "refused",
                "truncated"] + (["letter mass below floor"] if has_mass else [])
        rows = []
        for r in reqs:
            row = [text(r.get(k)) for k in ("protocol", "requests", "sent", "from_store",
                                             "failed", "invalid", "refused", "truncated")]
            if has_mass:
                row.append(f"{r.get('low_mass_prompts', 0)} of {r['letter_prompts']} prompts"
                           if r.get("letter_prompts") else "")
            rows.append(row)
        b.add(Table(cols, rows, caption="requests per protocol: sent to the model by this run, "
                                        "answered from the response store, failed after retries",
                    fold=False))
        errors = [f"{r['protocol']}: {r['first_error']}" for r in reqs if r.get("first_error")]
        if errors:
            b.add(Para("First error", "label"), Items(errors))
    lm = a.get("letter_mass")
    if lm:
        b.add(Para(lm["statement"], "alert" if lm.get("everywhere") else "note"))
    if "cost_usd" in a:
        b.add(KV([("Cost", a["cost_usd"] if isinstance(a["cost_usd"], str)
                   else f"{a['cost_usd']:.4f} USD")]))


def _summary(b: Builder) -> None:
    card = b.card
    counts = (card.get("results") or {}).get("verdict_counts") or {}
    rules = card.get("decision_rules") or []
    parts = []
    if counts:
        parts.append("Verdicts: " + ", ".join(
            f"{counts.get(s, 0)} {s}" for s in ("pass", "fail", "expected_fail", "not_evaluable")))
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


def _identification(b: Builder, titles: dict) -> None:
    card = b.card
    s = card.get("system") or {}
    b.add(Heading(2, titles["identification"], "identification"))
    pairs = [("Model", text(s.get("name"))), ("Version", text(s.get("version"))),
             ("Modality", text(card.get("modality")))]
    surface = s.get("surface")
    if surface:
        src = {"run": " (from the backend)", "user": " (stated by the user)"}.get(
            s.get("surface_source") or "", "")
        pairs.append(("Surface", f"{surface}{src}"))
    for label, key in (("Backend", "backend"), ("Backend version", "backend_version"),
                       ("Recorded by backend", "recorded_backend"),
                       ("Snapshot date", "snapshot_date"), ("Precision", "precision"),
                       ("Checkpoint", "checkpoint_url"),
                       ("Known served-system layers", "known_layers"),
                       ("Notes", "notes")):
        if s.get(key):
            pairs.append((label, text(s[key])))
    add = card.get("served_system_addendum") or {}
    for label, key in (("System prompt", "system_prompt"), ("Chat template", "chat_template"),
                       ("Policy classifier", "policy_classifier"),
                       ("Post-processing", "post_processing"), ("API version", "api_version"),
                       ("API evaluation window", "api_evaluation_window")):
        if add.get(key):
            pairs.append((label, text(add[key])))
    authors = card.get("authors") or []
    if authors:
        pairs.append(("Card authors", "; ".join(
            a.get("name", "") + (f" ({a['affiliation']})" if a.get("affiliation") else "")
            for a in authors)))
    b.add(KV([(k, v) for k, v in pairs if v]))
    for f in ("system.name", "system.version", "system.surface", "system.snapshot_date",
              "system.known_layers", "evaluation_date"):
        b.missing_under(f)


def _protected(b: Builder, titles: dict) -> None:
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
        b.add(Para("Notes", "label"), Para(text(pa["notes"])))


def _protocol(b: Builder, titles: dict) -> None:
    card = b.card
    ep = card.get("evaluation_protocol") or {}
    b.add(Heading(2, titles["evaluation_protocol"], "evaluation_protocol"))
    pairs = [("Answers", (ep.get("source") or {}).get("statement", "")),
             ("Run notes", text(ep.get("run_notes"))),
             ("How the model was asked", (ep.get("asking") or {}).get("statement", "")),
             ("Protocols run", ", ".join(ep.get("protocols_run") or []) or "none"),
             ("Seed policy", ep.get("seed_policy", "")),
             ("Samples per prompt", ep.get("samples_per_prompt", ""))]
    ps = card.get("prompt_suite") or {}
    pairs += [("Suite", text(ps.get("suite_name"))),
              ("Suite hash (sha256)", text(ps.get("suite_hash"))),
              ("Total prompts", text(ps.get("total_prompts"))),
              ("Occupations", text(ps.get("occupations"))),
              ("Attribute insertion rule", text(ps.get("attribute_insertion_rule")))]
    views = _protocol_views(ep)
    pairs += [(k, text(v)) for view in views for k, v in view.summary]
    th = ep.get("thresholds") or {}
    pairs.append(("Threshold files", text(th.get("files"))))
    b.add(KV([(k, v) for k, v in pairs if v]))
    ne = ep.get("not_evaluated") or []
    if ne:
        b.add(Para("Not evaluated", "label"), Items([f"{x['what']}: {x['why']}" for x in ne]))
    _requests(b)
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
    for view in views:
        if view.title:
            b.add(Heading(3, view.title, view.anchor))
            b.add(*(Para(w, "warn") for w in view.warnings))
            b.add(KV([(k, text(v)) for k, v in view.pairs]))
            if view.table is not None:
                columns, rows, caption = view.table
                b.add(Table(columns, rows, caption=caption))
    dec = card.get("decoding") or {}
    b.add(Heading(3, "Decoding", "decoding"))
    b.table(dec.get("regimes") or [], prefer=["protocol", "name", "temperature", "top_p",
                                              "max_new_tokens"])
    b.add(KV([(k, text(v)) for k, v in (("Seeds per prompt", dec.get("seeds_per_prompt")),
                                       ("Post-processing", dec.get("post_processing"))) if v]))
    b.missing_under("decoding")
    rh = card.get("refusal_handling") or {}
    sc = card.get("scorer") or {}
    b.add(Heading(3, "Refusal handling and scorer", "refusal_scorer"))
    b.add(KV([(k, text(v)) for k, v in (
        ("Refusal", rh.get("refusal_definition")), ("Deflection", rh.get("deflection_definition")),
        ("Retention policy", rh.get("retention_policy")), ("Scorer", sc.get("type")),
        ("Patterns", sc.get("patterns_file")), ("Scorer notes", sc.get("notes"))) if v]))


def _protocol_views(ep: dict) -> list[ProtocolView]:
    """Each family's view of its record under ``evaluation_protocol``
    (:meth:`~fairness_tests.pipeline.benchmark.Family.protocol_view`), in ``card_rank``
    order (then registry order), for the records the card holds."""
    return [family.protocol_view(ep[spec.metadata_key]) for spec, family in ranked_families()
            if ep.get(spec.metadata_key)]


def _governance(b: Builder, titles: dict) -> None:
    card = b.card
    g = card.get("governance") or {}
    b.add(Heading(2, titles["governance"], "governance"))
    b.add(KV([(label, text(g.get(key))) for label, key in (
        ("Owner", "owner"), ("Contact", "contact"), ("Review cadence", "review_cadence"),
        ("Escalation", "escalation"), ("Next review", "next_review"), ("Sign-off", "sign_off"))
        if g.get(key)]))
    b.items_or_missing("Monitoring", "governance.monitoring")
    for f in ("governance.owner", "governance.review_cadence"):
        b.missing_under(f)
    rep = card.get("reproducibility") or {}
    b.add(Heading(3, "Reproducibility", "reproducibility"))
    b.add(KV([(label, text(rep.get(key))) for label, key in (
        ("Code", "code_url"), ("Licence", "license"), ("Data release", "data_release"),
        ("Seeds", "seeds"), ("Total samples", "total_samples"),
        ("Regenerate", "regen_command")) if rep.get(key) not in (None, "", [])]))
    b.missing_under("reproducibility")
