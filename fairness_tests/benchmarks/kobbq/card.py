"""KoBBQ on the card's evaluation protocol (:meth:`KoBBQFamily.card_protocol
<fairness_tests.pipeline.benchmark.Family.card_protocol>`): its prompt (the authors'
evaluation prompt N of 5, in Korean, with its id), its decoding (the answer letter's
probabilities), what counts as out of choice, how answers are read (the authors'
parser), and its record under ``evaluation_protocol.kobbq`` (schema:
``card_schema.yaml`` beside this module). A run scored from predictions made elsewhere
(``fairness-tests kobbq score``) knows the prompt they are said to answer, not how they
were decoded: that is listed as missing."""
from __future__ import annotations

from typing import Any

from fairness_tests.pipeline.views import CardProtocol

KEY = "kobbq"


def card_protocol(f: Any, card: CardProtocol) -> None:
    """KoBBQ's statements; ``total_prompts`` adds the distinct prompts asked (samples x
    the three option orders)."""
    k = f.meta.infos.get(KEY)
    if k is None:
        return
    _prompt(f, k, card)
    _decoding(f, k, card)
    card.refusal.append(
        "KoBBQ: an answer that is not one of the three choices shown is out of choice (a "
        "reply the authors' raw2prediction maps to no letter; a refusal is one): kept, "
        "counted in kobbq_ooc_rate and left out of the other metrics, as the authors' "
        "5_evaluation.py does; with letter probabilities every answer is a letter"
        + (f"; a failed request has no answer and is in no metric ({k.n_failed} of "
           f"{k.n_answers + k.n_failed})." if f.asked else
           ". The predictions file's texts are read as given."))
    card.scorer_notes.append(f"KoBBQ answers read as {k.answer_rule}; metrics as the authors' "
                             "evaluation script (5_evaluation.py) computes them.")
    card.record[KEY] = record(k)
    card.seeds[KEY] = (("KoBBQ: nothing sampled (the most probable letter); " if f.asked else
                        "KoBBQ: how the predictions were decoded is not known to this run; ")
                       + f"bootstrap {k.n_boot} resamples over {k.cluster}s, seed {k.seed}.")
    card.samples[KEY] = (f"KoBBQ: one answer per sample and option order ({k.n_samples} "
                         f"samples; {k.orders}).")


def _prompt(f: Any, k: Any, card: CardProtocol) -> None:
    fam = {"id": f"kobbq-prompt-{k.prompt_id}",
           "name": f"KoBBQ, the authors' evaluation prompt {k.prompt_id} of 5 (Korean)"}
    if f.asked:
        fam["description"] = (
            "The prompt is the one user turn; the model's turn opens with "
            f"{k.answer_prefix!r} and the answer letter is read from the next token's "
            f"probabilities. Unknown choice: {k.unknown!r}. Options shown in {k.orders}.")
    else:
        fam["description"] = (
            f"The answers are predictions made elsewhere ({f.meta.source.file}), read as "
            f"answers to this prompt (--prompt-id {k.prompt_id}); whether they were made "
            "with it is not known to this run.")
    card.add_family(f, fam, k.prompt, f"run metadata {KEY}.prompt")
    card.add_prompts(f, k.n_prompts,
                     f"run metadata {KEY}.n_prompts (the distinct prompts KoBBQ asked)" if f.asked
                     else "the prompts that produced KoBBQ predictions made elsewhere: not "
                     "known to a scored run")


def _decoding(f: Any, k: Any, card: CardProtocol) -> None:
    reg: dict[str, Any] = {"name": "kobbq-letters", "protocol": KEY}
    if f.asked:
        reg["sampling"] = ("none: the answer is the most probable of the three letters (the "
                           "authors decode greedily); the temperature scales the recorded "
                           "letter probabilities only")
    for key in ("temperature", "top_p"):
        value = getattr(k, key)
        if value is not None:
            reg[key] = value
        else:
            f.lack(f"decoding.regimes[{len(card.regimes)}].{key}", "evaluation_protocol",
                   f"run metadata {KEY}.{key}" if f.asked else
                   f"the {key} of KoBBQ predictions made elsewhere: not known to a scored run")
    card.regimes.append(reg)
    if card.seeds_per_prompt is None and f.asked:
        card.seeds_per_prompt = 1
    if card.post_processing is None:
        card.post_processing = ("None: KoBBQ reads the answer letter's probabilities." if f.asked
                                else "Not known to this run: the predictions file gives the "
                                "answers' text.")


def record(k: Any) -> dict[str, Any]:
    """What ``evaluation_protocol.kobbq`` records of the run (its notes and warnings are
    the card's run notes)."""
    out: dict[str, Any] = {
        "source": k.source, "data_dir": k.data_dir,
        "data_sha256": dict(sorted(k.sha256.items())), "release": dict(k.release),
        "official": bool(k.release) and all(v == "official" for v in k.release.values()),
        "prompt_id": k.prompt_id, "prompt": k.prompt, "unknown": k.unknown,
        "answer_rule": k.answer_rule, "orders": k.orders, "n_samples": k.n_samples,
        "n_answers": k.n_answers, "n_failed": k.n_failed,
        "bootstrap": {"cluster": k.cluster, "resamples": k.n_boot, "seed": k.seed}}
    for key in ("answer_prefix", "subset"):
        if getattr(k, key):
            out[key] = getattr(k, key)
    for key in ("mean_letter_mass", "limit", "n_prompts", "temperature", "top_p"):
        if getattr(k, key) is not None:
            out[key] = getattr(k, key)
    return out
