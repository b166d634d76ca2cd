"""WinoBias on the card's evaluation protocol (:meth:`WinoBiasFamily.card_protocol
<fairness_tests.pipeline.benchmark.Family.card_protocol>`): its prompt (the sentence,
"'<Pronoun>' refers to the", then each of its two occupations scored), its decoding
(none: a log-likelihood samples nothing), what counts as invalid, how an answer is
chosen, and its record under ``evaluation_protocol.winobias`` (schema:
``card_schema.yaml`` beside this module)."""
from __future__ import annotations

from typing import Any

from fairness_tests.pipeline.views import CardProtocol

KEY = "winobias"
#: the continuations scored after the recorded context
CONTINUATION = " {first occupation | second occupation}"


def card_protocol(f: Any, card: CardProtocol) -> None:
    """WinoBias' statements; ``total_prompts`` adds the distinct prompts asked (context x
    continuation: two per sentence, a sentence the dev and test files share asked once)."""
    w = f.meta.infos.get(KEY)
    if w is None:
        return
    fam = {"id": w.prompt_id, "name": "WinoBias coreference (log-likelihood choice)",
           "description": (f"{w.prompt}. Each sentence is two loglikelihood requests sharing "
                           "the context, one per occupation it names.")}
    card.add_family(f, fam, w.prompt_template and w.prompt_template + CONTINUATION,
                    f"run metadata {KEY}.prompt_template")
    card.add_prompts(f, w.n_prompts,
                     f"run metadata {KEY}.n_prompts (the distinct prompts WinoBias asked)")
    card.reads_loglikelihoods(KEY, "WinoBias", "each occupation")
    card.refusal.append(
        "WinoBias: a log-likelihood cannot refuse; a sentence is invalid when either of its "
        "two requests failed (no log-likelihood): it has no answer, counts as not correct "
        f"and is reported as wb_invalid_rate ({w.n_invalid} of {w.n_sentences}).")
    card.scorer_notes.append(
        "WinoBias answers chosen by log-likelihood comparison: the occupation whose "
        "continuation has the larger log-probability, the first in sentence order on a tie; "
        "correct when it is the gold (bracketed) occupation.")
    card.record[KEY] = record(w)
    card.seeds[KEY] = (f"WinoBias: nothing sampled (log-likelihoods); bootstrap {w.n_boot} "
                       f"resamples over {w.cluster}s, seed {w.seed}.")
    card.samples[KEY] = (f"WinoBias: one log-likelihood per occupation, two per sentence "
                         f"({w.n_sentences} sentences, splits {', '.join(w.splits)}).")


def record(w: Any) -> dict[str, Any]:
    """What ``evaluation_protocol.winobias`` records of the run (its warnings are the
    card's run notes)."""
    out: dict[str, Any] = {
        "source": w.source, "data_dir": w.data_dir, "release": dict(w.release),
        "official": w.official, "prompt_id": w.prompt_id, "request_kind": w.request_kind,
        "splits": list(w.splits), "n_sentences": w.n_sentences, "n_pairs": w.n_pairs,
        "n_unpaired": w.n_unpaired, "n_invalid": w.n_invalid,
        "bootstrap": {"cluster": w.cluster, "resamples": w.n_boot, "seed": w.seed}}
    if w.sha256:
        out["data_sha256"] = dict(sorted(w.sha256.items()))
    for key in ("prompt_template", "limit", "n_prompts"):
        if getattr(w, key) not in (None, ""):
            out[key] = getattr(w, key)
    return out
