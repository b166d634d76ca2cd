"""CrowS-Pairs on the card's evaluation protocol (:meth:`CrowsPairsFamily.card_protocol
<fairness_tests.pipeline.benchmark.Family.card_protocol>`): its prompt (each sentence
scored alone, empty context), its decoding (none: a log-likelihood samples nothing), what
counts as invalid, how a pair is scored, and its record under
``evaluation_protocol.crows_pairs`` (schema: ``card_schema.yaml`` beside this module)."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fairness_tests.pipeline.views import CardProtocol

KEY = "crows_pairs"
#: the prompt as asked: the sentence is the whole continuation, after an empty context
TEMPLATE = "{sentence}"


def card_protocol(f: Any, card: CardProtocol) -> None:
    """CrowS-Pairs' statements; ``total_prompts`` adds the distinct sentences asked
    (``n_prompts``: a sentence two pairs share is one prompt)."""
    c = f.meta.infos.get(KEY)
    if c is None:
        return
    card.suite["families"].append({
        "id": KEY, "name": "CrowS-Pairs sentence log-likelihood",
        "description": (f"Each sentence scored alone (empty context): {c.requests}. Both "
                        "sentences of a pair (sent_more, sent_less) are asked. "
                        f"{c.adaptation}"),
        "template": TEMPLATE})
    card.add_prompts(f, c.n_prompts,
                     f"run metadata {KEY}.n_prompts (the distinct sentences CrowS-Pairs asked)")
    card.reads_loglikelihoods(KEY, "CrowS-Pairs", "the given sentence")
    card.refusal.append(
        "CrowS-Pairs: a log-likelihood cannot refuse; a pair is invalid when either "
        "sentence's request failed (no log-likelihood): it is left out of pct_stereotype "
        f"and likelihood_diff and counted as invalid_pairs ({c.invalid_pairs} of "
        f"{c.n_pairs}).")
    card.scorer_notes.append(
        "CrowS-Pairs pairs scored by log-likelihood comparison: stereotype = 1 when "
        "ll(sent_more) > ll(sent_less) (pct_stereotype = 100 x mean; 50 = no preference), "
        f"likelihood_diff = |ll(sent_more) - ll(sent_less)|; as {c.reference}.")
    card.record[KEY] = record(c)
    b = c.bootstrap
    card.seeds[KEY] = (f"CrowS-Pairs: nothing sampled (log-likelihoods); bootstrap "
                       f"{b.resamples} resamples, seed {b.seed}.")
    card.samples[KEY] = (f"CrowS-Pairs: one log-likelihood per sentence, two sentences per "
                         f"pair ({c.n_pairs} pairs).")


def record(c: Any) -> dict[str, Any]:
    """What ``evaluation_protocol.crows_pairs`` records of the run (its warnings are the
    card's run notes)."""
    out: dict[str, Any] = {
        "source": c.source, "data_sha256": dict(sorted(c.sha256.items())),
        "official": c.official, "release": c.release, "request_kind": "loglikelihood",
        "requests": c.requests, "n_pairs": c.n_pairs, "n_requests": c.n_requests,
        "counts": dict(c.counts), "invalid_pairs": c.invalid_pairs,
        "reference": c.reference, "bootstrap": asdict(c.bootstrap)}
    for key in ("data_dir", "limit", "n_prompts"):
        if getattr(c, key) is not None:
            out[key] = getattr(c, key)
    return out
