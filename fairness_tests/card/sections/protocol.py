"""Section 5, the evaluation protocol: prompt suite, decoding, refusal handling, scorer,
and the protocol record (where the answers came from, data versions, seeds, samples,
what was not evaluated).

Everything is read from the typed run metadata. A run scored from someone else's
predictions or generations (``source.kind`` ``predictions`` / ``outputs``) knows the
data and the answers but not the prompts, decoding or answer parsing that produced
them: those are stated as unknown and listed under ``missing_fields``.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fairness_tests.card.sections.asking import asking
from fairness_tests.card.sections.facts import RunFacts
from fairness_tests.card.values import finite
from fairness_tests.models.requests.request import decoding_label
from fairness_tests.pipeline.bbq_info import data_release
from fairness_tests.pipeline.benchmark import Shown, benchmarks
from fairness_tests.protocols.bbq.data import derived_target_note
from fairness_tests.protocols.bbq.official import INTERSECTIONAL

RETENTION = "kept-and-scored"
ROTATIONS_TEXT = {"all": "all three cyclic option rotations of every item",
                  "sample": "all three cyclic option rotations of the consistency sample",
                  "none": "dataset option order only"}
BBQ_NAME = "BBQ multiple choice (three options)"


# ----------------------------------------------------------------------------- prompt suite

def prompt_suite(f: RunFacts) -> dict[str, Any]:
    """Families with templates and paraphrases, occupations, insertion rule, suite hash
    and ``total_prompts`` = distinct generative prompts (paraphrases x occupations x
    slices) + BBQ items x option orders asked of every item."""
    suite: dict[str, Any] = {"families": []}
    total = 0
    g, b = f.gen, f.bbq
    if g is not None:
        suite["suite_name"] = g.suite
        if g.suite_hash:
            suite["suite_hash"] = g.suite_hash
        else:
            f.lack("prompt_suite.suite_hash", "evaluation_protocol",
                   "run metadata generative.suite_hash" if f.asked
                   else f.unknown("the prompt suite and its hash"))
        for fam in g.families:
            # every paraphrase is a template; the first is shown as the canonical one
            suite["families"].append({"id": fam["id"], "name": fam["name"],
                                      "template": fam["paraphrases"][0],
                                      "paraphrases": list(fam["paraphrases"])})
        if not g.families:
            f.lack("prompt_suite.families", "evaluation_protocol",
                   "run metadata generative.families" if f.asked
                   else f.unknown("the prompt templates of the generations"))
        if g.occupations:
            suite["occupations"] = list(g.occupations)
        if g.insertion_rule:
            suite["attribute_insertion_rule"] = g.insertion_rule
        if g.families and g.occupations and g.slices:
            total += (sum(len(fam["paraphrases"]) for fam in g.families)
                      * len(g.occupations) * len(g.slices))
    if b is not None:
        i = len(suite["families"])
        fam = {"id": "BBQ", "name": BBQ_NAME}
        if b.prompt_description:
            fam["description"] = b.prompt_description
        elif not f.asked:
            fam["description"] = (f"The answers are {f.scored_from()}; the prompt that "
                                  "produced them is not known to this run.")
        if b.prompt_template:
            fam["template"] = b.prompt_template
        else:
            f.lack(f"prompt_suite.families[{i}].template", "evaluation_protocol",
                   "run metadata bbq.prompt_template" if f.asked
                   else f.unknown("the BBQ prompt"))
        suite["families"].append(fam)
        total += b.n_items * b.rotations
    if total:
        suite["total_prompts"] = total
    else:
        f.lack("prompt_suite.total_prompts", "evaluation_protocol",
               "run metadata generative families/occupations/slices or bbq.n_items")
    return suite


# ----------------------------------------------------------------------------- decoding

def decoding(f: RunFacts) -> dict[str, Any]:
    regimes = []
    g, b = f.gen, f.bbq
    if g is not None:
        for d in g.decoding:        # the suite's regimes, or the (t, p) pairs of the outputs
            reg = {"protocol": "generative",
                   "name": d.get("name") or decoding_label(d["temperature"], d["top_p"]),
                   "temperature": d["temperature"], "top_p": d["top_p"]}
            tokens = d.get("max_new_tokens", g.max_new_tokens)
            if tokens is not None:
                reg["max_new_tokens"] = int(tokens)
            regimes.append(reg)
        if not g.decoding:
            f.lack("decoding.regimes", "evaluation_protocol", "run metadata generative.decoding")
    if b is not None:
        reg = {"name": "bbq", "protocol": "bbq"}
        for key, value in (("temperature", b.temperature), ("top_p", b.top_p),
                           ("max_new_tokens", b.max_tokens)):
            if value is not None:
                reg[key] = value
            elif key != "max_new_tokens":
                f.lack(f"decoding.regimes[{len(regimes)}].{key}", "evaluation_protocol",
                       f"run metadata bbq.{key}" if f.asked
                       else f.unknown(f"the {key} the answers were sampled with"))
        regimes.append(reg)
    dec: dict[str, Any] = {"regimes": regimes}
    if g is not None and g.seeds:
        dec["seeds_per_prompt"] = len(g.seeds)
    elif b is not None:
        dec["seeds_per_prompt"] = b.repeats
    if f.asked:
        dec["post_processing"] = ("Leading/trailing whitespace stripped; nothing else."
                                  if g is not None else
                                  "The answer text is parsed as one of the three options; "
                                  "nothing else.")
    elif f.meta.source.kind == "outputs":
        dec["post_processing"] = ("Not known to this run: the generations are scored as given "
                                  f"in {f.meta.source.file}.")
    else:
        dec["post_processing"] = ("Not known to this run: the predictions file gives option "
                                  "indices, not the model's text.")
    return dec


# ----------------------------------------------------------------------------- refusals, scorer

def refusal_handling(f: RunFacts) -> dict[str, Any]:
    parts, out = [], {"retention_policy": RETENTION}
    g, b = f.gen, f.bbq
    if g is not None:
        where = g.rubric_file or "fairness_tests/data/rubrics"
        parts.append(f"Generative: the output matches any refusal entry of the {g.rubric!r} "
                     f"rubric ({where}); {g.refusal_handling}.")
        out["deflection_definition"] = ("Generative: the output matches any deflection entry "
                                        f"of the {g.rubric!r} rubric.")
    if b is not None:
        if f.asked:
            parts.append("BBQ: an answer that cannot be parsed as one of the three options is "
                         "'invalid': counted as wrong and reported as invalid_rate, never "
                         "dropped or coerced.")
        else:
            parts.append("BBQ: an answer the predictions file gives as null is 'invalid': "
                         "counted as wrong and reported as invalid_rate, never dropped; how "
                         "the other tool turned the model's text into an option (and what it "
                         "did with refusals) is not known to this run.")
    out["refusal_definition"] = " ".join(parts) or "No protocol was run."
    return out


def scorer(f: RunFacts) -> dict[str, Any]:
    sc: dict[str, Any] = {"type": "lexical-rule"}
    notes = []
    g, b = f.gen, f.bbq
    if g is not None:
        if g.rubric_file:
            sc["patterns_file"] = g.rubric_file
        if g.rubric_sha256:
            sc["patterns_sha256"] = g.rubric_sha256
        notes.append(f"Generative outputs scored by the lexical rubric {g.rubric!r} "
                     f"({g.rubric_semantics})"
                     + (f"; also scored by {g.compare_rubric!r} for scorer sensitivity"
                        if g.compare_rubric else "") + ".")
    if b is not None:
        notes.append("BBQ answers parsed by rule ('b', '(b)', 'B.', 'Answer: b' or the option's "
                     "own text); anything else is invalid." if f.asked else
                     "BBQ: the predictions file gives option indices (0, 1, 2 or null); "
                     "fairness_tests parsed no text.")
    if g is not None and g.scorers:
        _scorers(sc, notes, g.scorers, f.tables.get("scorer_agreement"),
                 f.tables.get("scorer_flips"))
    flips = f.tables.get("rubric_flips")
    if flips is not None and "scorer_sensitivity" in f.tables:
        notes.append(f"Scorer sensitivity: {len(flips)} verdict(s) flip with the rubric "
                     "(results.tables.rubric_flips).")
        sc["sensitivity"] = "results.tables.scorer_sensitivity"
    th = {}
    for rule, grp in f.verdicts.groupby("rule", sort=True):
        bounds = grp["bound"].dropna().unique()
        if len(bounds) == 1 and finite(bounds[0]) is not None:
            th[str(rule)] = float(bounds[0])
    if th:
        sc["thresholds"] = th
    sc["notes"] = " ".join(notes) if notes else "No protocol was run."
    return sc


def _scorers(sc: dict[str, Any], notes: list[str], scorers: list[dict], agreement: Any,
             flips: Any) -> None:
    """Each scorer of a ``--scorers`` run (model, version, rubric, prompt), the agreement
    table and the verdicts that change with the scorer."""
    kinds = {s.get("kind") for s in scorers}
    sc["type"] = ("model-judge" if kinds == {"judge"} else
                  "hybrid" if kinds - {"lexical"} else "lexical-rule")
    keep = ("name", "kind", "model", "backend", "version", "rubric", "rubric_version",
            "rubric_file", "rubric_sha256", "semantics", "prompt", "mode", "temperature",
            "repeats", "unjudged_rate", "path", "config_sha256", "label_map", "threshold")
    sc["scorers"] = [{k: s[k] for k in keep if s.get(k) is not None} for s in scorers]
    judge = next((s for s in scorers if s.get("kind") == "judge"), None)
    for s in scorers:
        if s.get("kind") == "judge":
            notes.append(f"Judge scorer: {s.get('model')} (version {s.get('version') or '?'}) "
                         f"with the judge rubric {s.get('rubric')!r} (sha256 "
                         f"{str(s.get('rubric_sha256'))[:12]}), prompt {s.get('prompt')}, "
                         f"{s.get('mode')} mode, temperature {s.get('temperature')}; "
                         f"unjudged (unparsable) answers: {_pct(s.get('unjudged_rate'))}, "
                         "left out of the rates, never guessed.")
        elif s.get("kind") == "classifier":
            notes.append(f"Classifier scorer: {s.get('path')} (config sha256 "
                         f"{str(s.get('config_sha256'))[:12]}), labels {s.get('label_map')}, "
                         f"threshold {s.get('threshold')}.")
    if judge is not None:
        sc["judge_model"] = str(judge.get("model"))
    if agreement is not None and len(agreement):
        sc["agreement"] = "results.tables.scorer_agreement"
        k = agreement[(agreement["metric"] == "kappa") & (agreement["slice"] == "all")
                      & (agreement["label"] == "pilot_harm")]
        if len(k) and finite(k["value"].iloc[0]) is not None:
            r = k.iloc[0]
            sc["inter_annotator_agreement"] = float(r["value"])
            notes.append(f"Agreement of {r['scorer_a']} and {r['scorer_b']} on pilot_harm: "
                         f"Cohen's kappa {r['value']:.3f} (95% CI {r['ci_low']:.3f} to "
                         f"{r['ci_high']:.3f}, prompts resampled); per label and slice in "
                         "results.tables.scorer_agreement.")
    if flips is not None:
        notes.append(f"{len(flips)} protocol-cell verdict(s) change with the scorer "
                     "(results.tables.scorer_flips).")


def _pct(x: Any) -> str:
    v = finite(x)
    return "unknown" if v is None else f"{100 * v:.1f}%"


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
    seeds, samples = [], []
    if f.bbq is not None:
        ep["bbq"] = _bbq(f)
        seeds.append(_bbq_seeds(f))
        samples.append(_bbq_samples(f))
    if f.gen is not None:
        ep["generative"] = _generative(f)
        g = f.gen
        seeds.append(f"Generative: one generation per seed in {g.seeds} for every prompt x "
                     "decoding regime; the seed is part of each request's key." if f.asked else
                     f"Generative: the outputs hold generations for seeds {g.seeds}; how they "
                     "were sampled is not known to this run.")
        samples.append(f"Generative: {len(g.seeds)} sample(s) per prompt and decoding regime; "
                       "seeds are a sampling dimension, reported as a spread (results."
                       "seed_spread), never counted as protocol cells.")
    if m.asking is not None:
        ep["asking"] = asking(m.asking)
    if m.counterfactual is not None:
        ep["counterfactual"] = asdict(m.counterfactual)
    if m.thresholds:
        ep["thresholds"] = {"files": list(m.thresholds)}
    if seeds:
        ep["seed_policy"] = " ".join(seeds)
    if samples:
        ep["samples_per_prompt"] = " ".join(samples)
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


def _bbq(f: RunFacts) -> dict[str, Any]:
    b = f.bbq
    assert b is not None                  # called for a run with BBQ records only
    out: dict[str, Any] = {
        "data_sha256": dict(sorted(b.sha256.items())), "official": b.official,
        "data_release": {st.name: st.to_dict() for st in data_release(b)},
        "filter": b.filter, "n_items": b.n_items, "n_answers": b.n_answers,
        "invalid_answers": b.invalid_answers, "repeats": b.repeats, "rotations": b.rotations,
        "rotations_mode": b.rotations_mode, "bootstrap": asdict(b.bootstrap)}
    for key in ("data_dir", "option_order", "temperature", "limit"):
        if getattr(b, key) is not None:
            out[key] = getattr(b, key)
    out.update(bbq_choices(b))
    if f.asked:
        out["seed"] = b.seed          # the answer-sampling seed (a scored run has none)
    if b.consistency is not None:
        c = b.consistency
        out["consistency"] = {k: v for k, v in (("n_items", c.n_items), ("repeats", c.repeats),
                                                ("seed", c.seed), ("per_cell", c.per_cell))
                              if v is not None}
    return out


def bbq_choices(b) -> dict[str, str]:
    """What a BBQ run chose that the intersectional audit does not (the card says it):
    the categories, target_loc derived by the BBQ authors' rule, their conventions."""
    out = {}
    if b.categories and tuple(b.categories) != INTERSECTIONAL:
        out["categories"] = ", ".join(b.categories)
    derived = derived_target_note(b.target_loc)
    if derived:
        out["target_loc"] = derived
    if b.conventions != "project":
        out["conventions"] = ("the BBQ authors' (unmatched answers and items without a "
                              "target dropped; unknown from the chosen option's tag; "
                              "name-proxy items as separate rows)")
    return out


def _bbq_seeds(f: RunFacts) -> str:
    b = f.bbq
    assert b is not None                  # called for a run with BBQ records only
    boot = (f"bootstrap {b.bootstrap.resamples} resamples, seed {b.bootstrap.seed}")
    if not f.asked:
        return f"BBQ: how the answers were sampled is not known to this run; {boot}."
    cons = b.consistency
    return (f"BBQ: answer sampling seed {b.seed}; {boot}"
            + (f"; consistency sample drawn with seed {cons.seed}"
               if cons is not None and cons.seed is not None else "") + ".")


def _bbq_samples(f: RunFacts) -> str:
    b = f.bbq
    assert b is not None                  # called for a run with BBQ records only
    c = b.consistency
    return (f"BBQ: one answer per item ({b.n_items} items)"
            + (f"; {c.repeats} repeated answers for each of the {c.n_items} consistency-sample "
               "items" if c is not None else "")
            + f"; {ROTATIONS_TEXT[b.rotations_mode]}.")


def _generative(f: RunFacts) -> dict[str, Any]:
    g = f.gen
    assert g is not None                  # called for a run with generative records only
    out: dict[str, Any] = {
        "suite_name": g.suite, "rubric": g.rubric, "rubric_semantics": g.rubric_semantics,
        "n_generations": g.n_generations, "n_error": g.n_error,
        "n_refused_by_provider": g.n_refused_by_provider, "seeds": list(g.seeds),
        "refusal_handling": g.refusal_handling,
        "bootstrap": asdict(g.bootstrap)}
    for key in ("suite_hash", "system_prompt", "max_new_tokens", "n_grid_full", "compare_rubric",
                "rubric_sha256"):
        if getattr(g, key) is not None:
            out[key] = getattr(g, key)
    if f.asked:                    # reductions of this package's grid: none for someone's outputs
        out["reductions"] = list(g.reductions)
    return out
