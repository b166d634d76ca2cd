"""Winogender on the card's evaluation protocol (:meth:`WinogenderFamily.card_protocol
<fairness_tests.pipeline.benchmark.Family.card_protocol>`): its prompt (lm-evaluation-
harness's ``winogender_*``: the sentence, "'<Pronoun>' refers to the", then each choice
scored), its decoding (none: a log-likelihood samples nothing), what counts as invalid,
how an answer is chosen, and its record under ``evaluation_protocol.winogender``
(schema: ``card_schema.yaml`` beside this module)."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fairness_tests.pipeline.views import CardProtocol

KEY = "winogender"
#: the continuations scored after the recorded context (lm-eval's target delimiter " ")
CONTINUATION = " {occupation | participant}"


def card_protocol(f: Any, card: CardProtocol) -> None:
    """Winogender's statements; ``total_prompts`` adds the distinct prompts asked
    (context x continuation: two per sentence)."""
    w = f.meta.infos.get(KEY)
    if w is None:
        return
    fam = {"id": w.prompt_id or KEY, "name": "Winogender coreference (log-likelihood choice)",
           "description": (f"{w.prompt}. Each sentence is two loglikelihood requests sharing "
                           "the context: the continuations ' <occupation>' and "
                           "' <participant>'.")}
    card.add_family(f, fam, w.prompt_template and w.prompt_template + CONTINUATION,
                    f"run metadata {KEY}.prompt_template")
    card.add_prompts(f, w.n_prompts,
                     f"run metadata {KEY}.n_prompts (the distinct prompts Winogender asked)")
    card.reads_loglikelihoods(KEY, "Winogender", "each choice")
    card.refusal.append(
        "Winogender: a log-likelihood cannot refuse; a sentence is invalid when either of "
        "its two requests failed (no log-likelihood): it has no answer, counts as not "
        f"correct and is counted as invalid_answers ({w.invalid_answers} of {w.n_items}).")
    card.scorer_notes.append(
        "Winogender answers chosen by log-likelihood comparison: the choice (occupation or "
        "participant) whose continuation has the larger summed log-probability, the first "
        "on a tie, no length normalisation (lm-evaluation-harness's acc); correct when it "
        "is the gold referent.")
    card.record[KEY] = record(w)
    b = w.bootstrap
    card.seeds[KEY] = (f"Winogender: nothing sampled (log-likelihoods); bootstrap "
                       f"{b.resamples} resamples over {b.cluster}s, seed {b.seed}.")
    card.samples[KEY] = (f"Winogender: one log-likelihood per choice, two choices per "
                         f"sentence ({w.n_items} sentences, {w.n_templates} templates).")


def record(w: Any) -> dict[str, Any]:
    """What ``evaluation_protocol.winogender`` records of the run (its warnings are the
    card's run notes)."""
    out: dict[str, Any] = {
        "repository": w.repository, "commit": w.commit,
        "data_sha256": dict(sorted(w.sha256.items())), "release": dict(w.release),
        "official": w.official, "request_kind": w.request_kind,
        "prompt_template": w.prompt_template, "n_items": w.n_items,
        "n_templates": w.n_templates, "counts": dict(w.counts), "n_answers": w.n_answers,
        "invalid_answers": w.invalid_answers, "bootstrap": asdict(w.bootstrap)}
    for key in ("data_dir", "prompt_id", "limit", "n_prompts"):
        if getattr(w, key) not in (None, ""):
            out[key] = getattr(w, key)
    return out
