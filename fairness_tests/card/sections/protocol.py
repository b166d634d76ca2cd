"""Section 5, the evaluation protocol: prompt suite, decoding, refusal handling, scorer,
and the protocol record (where the answers came from, data versions, seeds, samples,
what was not evaluated). Each benchmark family states its own part
(:meth:`fairness_tests.pipeline.benchmark.Family.card_protocol`, gathered once by
:func:`protocol_parts`); this module lays the parts into the card's sections.

Everything is read from the typed run metadata. A run scored from someone else's
predictions or generations (``source.kind`` ``predictions`` / ``outputs``) knows the
data and the answers but not the prompts, decoding or answer parsing that produced
them: those are stated as unknown and listed under ``missing_fields``.
"""
from __future__ import annotations

from typing import Any

from fairness_tests.card.schema import record_schemas
from fairness_tests.card.sections.asking import asking
from fairness_tests.card.sections.facts import RunFacts
from fairness_tests.core.fmt import finite
from fairness_tests.pipeline.benchmark import Shown, benchmarks, families, ranked_families
from fairness_tests.pipeline.views import CardProtocol

RETENTION = "kept-and-scored"


def protocol_parts(f: RunFacts) -> CardProtocol:
    """Every family's statements of how the run asked and scored
    (:meth:`fairness_tests.pipeline.benchmark.Family.card_protocol`), in ``card_rank``
    order (then registry order); computed once per card (the sections below read it). A
    family's record under ``evaluation_protocol`` needs the schema a benchmark of it
    declares (``Benchmark.card_schema``): a record without one is a ``LookupError``
    naming the family and the key (its card would not validate)."""
    if f.protocol is None:
        card = CardProtocol()
        declared = record_schemas()
        for spec, family in ranked_families():
            family.card_protocol(f, card)
            for key in card.record:
                if key not in declared:
                    raise LookupError(
                        f"benchmark family {spec.name!r} records evaluation_protocol.{key} "
                        "on the card, but no registered benchmark declares its schema "
                        "(Benchmark.card_schema: a YAML file beside its module)")
        f.protocol = card
    return f.protocol


# ----------------------------------------------------------------------------- prompt suite

def prompt_suite(f: RunFacts) -> dict[str, Any]:
    """Families with templates and paraphrases, occupations, insertion rule, suite hash
    and ``total_prompts``: the distinct prompts every family asked."""
    p = protocol_parts(f)
    suite = dict(p.suite)
    if p.total_prompts:
        suite["total_prompts"] = p.total_prompts
    else:
        f.lack("prompt_suite.total_prompts", "evaluation_protocol",
               "the run metadata of the benchmarks run (the prompts each asked)")
    return suite


# ----------------------------------------------------------------------------- decoding

def decoding(f: RunFacts) -> dict[str, Any]:
    p = protocol_parts(f)
    dec: dict[str, Any] = {"regimes": list(p.regimes)}
    if p.seeds_per_prompt is not None:
        dec["seeds_per_prompt"] = p.seeds_per_prompt
    if p.post_processing is not None:
        dec["post_processing"] = p.post_processing
    return dec


# ----------------------------------------------------------------------------- refusals, scorer

def refusal_handling(f: RunFacts) -> dict[str, Any]:
    p = protocol_parts(f)
    return {"retention_policy": RETENTION, **p.refusal_fields,
            "refusal_definition": " ".join(p.refusal) or "No protocol was run."}


def scorer(f: RunFacts) -> dict[str, Any]:
    p = protocol_parts(f)
    sc = dict(p.scorer)
    notes = p.scorer_notes + p.scorer_checks
    th = {}
    for rule, grp in f.verdicts.groupby("rule", sort=True):
        bounds = grp["bound"].dropna().unique()
        if len(bounds) == 1 and finite(bounds[0]) is not None:
            th[str(rule)] = float(bounds[0])
    if th:
        sc["thresholds"] = th
    sc["notes"] = " ".join(notes) if notes else "No protocol was run."
    return sc


# ----------------------------------------------------------------------------- the protocol record

def card_lines() -> list[Shown]:
    """What the card lists under ``protocols_run`` or ``not_evaluated``: every registered
    benchmark's declared lines (itself, then the analyses it brings), in registry order.
    A line is listed as not evaluated only for a benchmark that declares itself
    ``disclosed`` (the default audit's, and the probe) or that the run asked: so a card
    does not depend on which other benchmarks happen to be installed."""
    return [s for b in benchmarks() for s in b.shown]


def benchmark_warnings(meta: Any) -> list[str]:
    """What a benchmark's run metadata says a report must carry (its info's ``notes``:
    a choice of its protocol, e.g. which of the authors' prompts was asked; then its
    ``warnings``: e.g. the data authors' own caveats), each prefixed with the info's key,
    in the order the infos were registered."""
    out = []
    for key, info in meta.infos.items():
        for w in [*(getattr(info, "notes", None) or ()), *(getattr(info, "warnings", None) or ())]:
            out.append(f"{key}: {w}")
    return out


def evaluation_protocol(f: RunFacts) -> dict[str, Any]:
    m = f.meta
    shown = card_lines()
    run = [s.what for s in shown if any(t in f.tables for t in s.tables)]
    told = {s.what for b in benchmarks() if b.disclosed() or any(x.what in run for x in b.shown)
            for s in b.shown}
    not_run = [{"what": s.what, "why": s.why} for s in shown
               if s.what not in run and s.what in told]
    if not len(f.verdicts):
        not_run.append({"what": "decision_rules",
                        "why": "the run has no verdicts: no decision rule was evaluated"})
    ep: dict[str, Any] = {"protocols_run": run, "not_evaluated": not_run,
                          "source": _source(f)}
    notes = list(m.notes) + benchmark_warnings(m)
    if notes:
        ep["run_notes"] = notes
    p = protocol_parts(f)
    ep.update(p.record)
    if m.asking is not None:
        ep["asking"] = asking(m.asking)
    if m.thresholds:
        ep["thresholds"] = {"files": list(m.thresholds)}
    order = [spec.name for spec in families()]
    for key, said in (("seed_policy", p.seeds), ("samples_per_prompt", p.samples)):
        if said:
            ep[key] = " ".join(said[name] for name in sorted(said, key=order.index))
    return ep


def _source(f: RunFacts) -> dict[str, Any]:
    """Where the answers came from, as the run records it (``source``, ``mode``)."""
    m, s = f.meta, f.meta.source
    if f.asked:
        statement = (f"asked of the model by fairness_tests through the {m.backend} backend"
                     if m.mode == "live" else
                     f"replayed from the response store {m.store} (recorded through the "
                     f"{m.backend} backend)")
    elif s.kind == "predictions":
        statement = (f"{f.scored_from()}; the prompts, decoding and answer parsing that "
                     "produced them are not known to this run")
    else:
        statement = (f"{f.scored_from()}; the prompts that produced them are not known to "
                     "this run (temperature, top_p and seed are the file's own)")
    out = {"kind": s.kind, "mode": m.mode, "statement": statement}
    if s.file:
        out["file"] = s.file
    if s.sha256:
        out["sha256"] = s.sha256
    return out
