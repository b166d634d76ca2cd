"""The generative audit on the card's results (:meth:`GenerativeFamily.card_results
<fairness_tests.pipeline.benchmark.Family.card_results>`): per-slice rates (with their
panels), the worst slice per metric (a selection of the run's rows,
:func:`worst_slices`), slice x family (with its heatmaps), slice x decoding, the summary,
the scorers' tables and the protocol-dependent verdicts."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import pandas as pd

from fairness_tests.benchmarks.generative.info import GenerativeInfo
from fairness_tests.core.fmt import finite
from fairness_tests.models.requests.request import decoding_label
from fairness_tests.pipeline.views import CardProtocol, Heatmaps, Panels, ProtocolView, View

#: the rates' panel order (other rates follow by name)
RATE_METRICS_ORDER = ("stereotype", "demeaning", "pilot_harm", "refusal", "deflection",
                      "identity_salience", "title_mention", "religion_mention")
HEATMAP_METRICS = ("stereotype", "pilot_harm", "refusal")

VIEWS = [
    View("Generative audit per slice", "res_by_slice", "generative_by_slice", prefer=("slice",),
         plots=(Panels("slice_rates", "Per-slice rates with 95% CIs", ("slice",),
                       RATE_METRICS_ORDER, others=True, unit="rate", sort=True),)),
    View("Worst slice per metric", "res_worst_slice", "worst_slice", source="results",
         prefer=("scope", "metric", "slice")),
    View("Generative audit per slice x family", "res_by_slice_family",
         "generative_by_slice_family", prefer=("family", "slice"),
         plots=(Heatmaps(HEATMAP_METRICS, "slice", "family",
                         "{metric} rate: slice x prompt family"),)),
    *(View(title, f"res_{name}", name) for name, title in (
        ("generative_by_slice_decoding", "Generative audit per slice x decoding"),
        ("generative_summary", "Worst slice, disparity and refusal gap"),
        ("scorer_sensitivity", "Scorer sensitivity (same outputs, two rubrics)"),
        ("scorer_agreement", "Scorer agreement: raw agreement and Cohen's kappa per label "
                             "and slice (95% CI)"),
        ("scorer_flips", "Verdicts that change with the scorer"),
        ("protocol_sensitivity", "Protocol-dependent verdicts"))),
]


def summaries(tables: Mapping[str, pd.DataFrame]) -> dict[str, Any]:
    """``worst_slice`` when the run has a per-slice table (:func:`worst_slices`)."""
    worst = worst_slices(tables)
    return {"worst_slice": worst} if worst else {}


def worst_slices(tables: Mapping[str, pd.DataFrame]) -> list[dict]:
    """Selection only: the row with the largest value per metric (overall, and per
    family from the slice x family table); numbers as the table holds them (the card
    rounds every number it writes)."""
    out = []
    for name, keys, scope in (("generative_by_slice", ["metric"], None),
                              ("generative_by_slice_family", ["metric", "family"], "family")):
        t = tables.get(name)
        if t is None or not len(t):
            continue
        t = t[pd.to_numeric(t["value"], errors="coerce").notna()]
        for key, g in t.groupby(keys, sort=True):
            top = g.sort_values(["value", "slice"], ascending=[False, True],
                                kind="mergesort").iloc[0]
            out.append({"metric": str(key[0]),
                        "scope": f"family {key[1]}" if scope else "overall",
                        "slice": str(top["slice"]), "value": top["value"],
                        "ci_low": top["ci_low"], "ci_high": top["ci_high"]})
    return out


# ---------------------------------------------------------------- the evaluation protocol

#: what two cards' generative records must share to measure the same thing (``card diff``)
COMPARABILITY = (
    ("prompt_suite.suite_hash", "generative suite hash"),
    ("evaluation_protocol.generative.rubric", "rubric"),
    ("evaluation_protocol.generative.seeds", "generative seeds"),
)


def card_protocol(f: Any, card: CardProtocol) -> None:
    """The generative audit's prompt suite, decoding regimes, refusal definition, scorer
    statements and record (:meth:`fairness_tests.pipeline.benchmark.Family.card_protocol`);
    ``total_prompts`` adds its distinct prompts (paraphrases x occupations x slices)."""
    g = f.meta.info("generative", GenerativeInfo)
    if g is None:
        return
    if g.seeds and card.sample_seeds is None:
        card.sample_seeds = sorted(g.seeds)
    card.total_samples += g.n_generations
    if g.system_prompt is not None and card.system_prompt is None:
        card.system_prompt = g.system_prompt
    _attributes(f, g, card)
    _suite(f, g, card)
    _decoding(f, g, card)
    where = g.rubric_file or "fairness_tests/data/rubrics"
    card.refusal.append(f"Generative: the output matches any refusal entry of the {g.rubric!r} "
                        f"rubric ({where}); {g.refusal_handling}.")
    card.refusal_fields["deflection_definition"] = (
        f"Generative: the output matches any deflection entry of the {g.rubric!r} rubric.")
    _scoring(f, g, card)
    card.record["generative"] = _record(f, g)
    card.seeds["generative"] = (
        f"Generative: one generation per seed in {g.seeds} for every prompt x decoding "
        "regime; the seed is part of each request's key." if f.asked else
        f"Generative: the outputs hold generations for seeds {g.seeds}; how they were "
        "sampled is not known to this run.")
    card.samples["generative"] = (
        f"Generative: {len(g.seeds)} sample(s) per prompt and decoding regime; seeds are a "
        "sampling dimension, reported as a spread (results.seed_spread), never counted as "
        "protocol cells.")


def _attributes(f: Any, g: Any, card: CardProtocol) -> None:
    """Its slices: the attribute combinations the suite declares, or (a run scored from
    someone's generations has no suite) the slice labels its outputs carry."""
    if g.slices:
        card.slices += [{"protocol": "generative", **{k: str(v) for k, v in s.items()}}
                        for s in g.slices]
    elif "generative_by_slice" in f.tables:
        card.slices += [{"protocol": "generative", "slice": sid} for sid in
                        sorted(f.tables["generative_by_slice"]["slice"].astype(str).unique())]
    if g.insertion_rule:
        card.operationalisation.append(
            "Generative audit: the attributes appear verbatim in the prompt, inserted as "
            f"{g.insertion_rule!r}; no post-hoc demographic inference.")
    else:
        card.operationalisation.append(
            "Generative audit: the slices are the attribute labels the outputs carry; how "
            "the attributes were put into the prompts is not recorded.")
        f.lack("prompt_suite.attribute_insertion_rule", "protected_attributes",
               "run metadata generative.insertion_rule" if f.asked
               else f.unknown("the attribute insertion rule"))


def _suite(f: Any, g: Any, card: CardProtocol) -> None:
    suite = card.suite
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
        card.total_prompts += (sum(len(fam["paraphrases"]) for fam in g.families)
                               * len(g.occupations) * len(g.slices))


def _decoding(f: Any, g: Any, card: CardProtocol) -> None:
    for d in g.decoding:        # the suite's regimes, or the (t, p) pairs of the outputs
        reg = {"protocol": "generative",
               "name": d.get("name") or decoding_label(d["temperature"], d["top_p"]),
               "temperature": d["temperature"], "top_p": d["top_p"]}
        tokens = d.get("max_new_tokens", g.max_new_tokens)
        if tokens is not None:
            reg["max_new_tokens"] = int(tokens)
        card.regimes.append(reg)
    if not g.decoding:
        f.lack("decoding.regimes", "evaluation_protocol", "run metadata generative.decoding")
    if g.seeds and card.seeds_per_prompt is None:
        card.seeds_per_prompt = len(g.seeds)
    if card.post_processing is None:
        card.post_processing = (
            "Leading/trailing whitespace stripped; nothing else." if f.asked else
            "Not known to this run: the generations are scored as given in "
            f"{f.meta.source.file}.")


def _scoring(f: Any, g: Any, card: CardProtocol) -> None:
    if g.rubric_file:
        card.scorer["patterns_file"] = g.rubric_file
    if g.rubric_sha256:
        card.scorer["patterns_sha256"] = g.rubric_sha256
    card.scorer_notes.append(
        f"Generative outputs scored by the lexical rubric {g.rubric!r} ({g.rubric_semantics})"
        + (f"; also scored by {g.compare_rubric!r} for scorer sensitivity"
           if g.compare_rubric else "") + ".")
    if g.scorers:
        _scorers(card.scorer, card.scorer_checks, g.scorers, f.tables.get("scorer_agreement"),
                 f.tables.get("scorer_flips"))
    flips = f.tables.get("rubric_flips")
    if flips is not None and "scorer_sensitivity" in f.tables:
        card.scorer_checks.append(f"Scorer sensitivity: {len(flips)} verdict(s) flip with the "
                                  "rubric (results.tables.rubric_flips).")
        card.scorer["sensitivity"] = "results.tables.scorer_sensitivity"


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


def _record(f: Any, g: Any) -> dict[str, Any]:
    """What ``evaluation_protocol.generative`` records of the run."""
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


def protocol_view(record: Mapping[str, Any]) -> ProtocolView:
    """The generative audit's record on the card: three lines of the protocol's summary
    (generations, rubric, the reductions from the default grid: "none" when the run
    made none), no subsection of its own."""
    reductions = record.get("reductions") or ("none" if "reductions" in record else None)
    return ProtocolView(summary=(("Generations", record.get("n_generations")),
                                 ("Rubric", record.get("rubric")),
                                 ("Reductions from the default grid", reductions)))
