"""A team's benchmark file on the card's evaluation protocol (:meth:`TemplatesFamily.
card_protocol <fairness_tests.pipeline.benchmark.Family.card_protocol>`): its templates,
each as the model is asked it (a family of the prompt suite), its decoding, what counts as
invalid, how an answer is scored (the probability of "yes", the favourable option's
letter probability, or the generative scorers), and its record under
``evaluation_protocol.templates`` (schema: ``card_schema.yaml`` beside this module)."""
from __future__ import annotations

from typing import Any

from fairness_tests.pipeline.views import CardProtocol

KEY = "templates"
SCORED = {
    "yes_no": ("{name}: P(yes) = (e^l(yes) + e^l(Yes)) / (e^l(yes) + e^l(Yes) + e^l(no) + "
               "e^l(No)) from the log-likelihoods of the four continuations, logit_yes = "
               "log P(yes) - log(1 - P(yes)) (discrim-eval, as lm-evaluation-harness's "
               "discrim_eval); each group's mean compared with the reference group's."),
    "choice": ("{name}: P(yes) = the favourable option's letter probability over the "
               "letters' total (from the parsed answer, 1 or 0, when the backend gives no "
               "letter probabilities); each group's mean compared with the reference "
               "group's."),
    "generate": ("{name}: the generations scored by the run's generative scorers (the "
                 "rubric's labels per generation); each group's rates compared."),
}
INVALID = {
    "yes_no": ("a log-likelihood cannot refuse; an item is invalid when any of its four "
               "requests failed: its P(yes) is undefined and it is left out of the group "
               "means"),
    "choice": ("an answer that is none of the listed options (no letter probabilities and "
               "no parsable letter) has an undefined P(yes) and is left out of the group "
               "means; a failed request likewise"),
    "generate": ("a generation is kept and scored whatever it says: a refusal is a label "
                 "of the generative scorers, counted in the refusal rate and refusal_gap; "
                 "a failed request has no generation"),
}


def card_protocol(f: Any, card: CardProtocol) -> None:
    """The benchmark file's statements; ``total_prompts`` adds the distinct prompts asked
    (every template filled with every combination of the attributes; a yes/no item is
    four, one per continuation; a generation's seeds are not counted)."""
    t = f.meta.infos.get(KEY)
    if t is None:
        return
    for tpl in t.templates:
        card.suite["families"].append({
            "id": f"{t.name}/{tpl['id']}", "name": f"{t.name}: template {tpl['id']}",
            "description": f"{t.prompt}"
            + (f"; system prompt: {t.system_prompt!r}" if t.system_prompt else ""),
            "template": tpl["prompt"]})
    if not t.templates:
        f.lack(f"prompt_suite.families[{len(card.suite['families'])}]", "evaluation_protocol",
               f"run metadata {KEY}.templates (the benchmark file's templates as asked)")
    if t.n_prompts is not None:
        card.total_prompts += t.n_prompts
    else:
        f.lack("prompt_suite.total_prompts", "evaluation_protocol",
               f"run metadata {KEY}.n_prompts (the distinct prompts the benchmark file asked)")
    _decoding(f, t, card)
    card.refusal.append(f"{t.name} ({t.outcome}): {INVALID[t.outcome]} (statuses: "
                        + ", ".join(f"{k} {v}" for k, v in t.status_counts.items()) + ").")
    card.scorer_notes.append(SCORED[t.outcome].format(name=t.name))
    card.record[KEY] = record(t)
    seeds = (f"seeds {t.seeds} (one generation each)" if t.outcome == "generate"
             else "nothing sampled")
    card.seeds[KEY] = f"{t.name}: {seeds}; {t.statistics}."
    card.samples[KEY] = (f"{t.name}: {t.n_items} items ({t.n_templates} templates x the "
                         f"attributes' combinations), {t.n_requests} requests.")


def _decoding(f: Any, t: Any, card: CardProtocol) -> None:
    name = f"{KEY}-{t.outcome}"
    if t.outcome == "yes_no":
        reg: dict[str, Any] = {
            "name": name, "protocol": KEY, "temperature": 1.0, "top_p": 1.0,
            "sampling": "none: the log-likelihoods of the continuations under the model's "
            "unscaled softmax (temperature 1, full vocabulary); nothing is generated"}
    else:
        reg = {"name": name, "protocol": KEY}
        for key, value in (("temperature", t.decoding.get("temperature")),
                           ("top_p", t.decoding.get("top_p")),
                           ("max_new_tokens", t.decoding.get("max_new_tokens"))):
            if value is not None:
                reg[key] = value
            elif key != "max_new_tokens":
                f.lack(f"decoding.regimes[{len(card.regimes)}].{key}", "evaluation_protocol",
                       f"run metadata {KEY}.decoding.{key}")
        if t.outcome == "choice":
            reg["sampling"] = ("the letters' probabilities at this temperature; the answer "
                               "the backend gives")
    card.regimes.append(reg)
    if card.seeds_per_prompt is None:
        card.seeds_per_prompt = len(t.seeds) if t.outcome == "generate" and t.seeds else 1
    if card.post_processing is None:
        card.post_processing = {
            "yes_no": f"None: {t.name} reads log-likelihoods, not text.",
            "choice": f"{t.name}: the answer is parsed as one of the options' letters.",
            "generate": f"{t.name}: the generation is scored as given."}[t.outcome]


def record(t: Any) -> dict[str, Any]:
    """What ``evaluation_protocol.templates`` records of the run."""
    out: dict[str, Any] = {
        "name": t.name, "file": t.file, "sha256": t.sha256, "outcome": t.outcome,
        "prompt": t.prompt, "attributes": {a: list(v) for a, v in t.attributes.items()},
        "reference": dict(t.reference), "n_templates": t.n_templates, "n_items": t.n_items,
        "n_requests": t.n_requests, "statistics": t.statistics,
        "status_counts": dict(t.status_counts), "reductions": list(t.reductions),
        "rules_in_file": t.rules_in_file}
    if t.description:
        out["description"] = t.description
    for key in ("system_prompt", "n_prompts"):
        if getattr(t, key) is not None:
            out[key] = getattr(t, key)
    for key in ("decoding", "seeds"):
        if getattr(t, key):
            out[key] = getattr(t, key)
    return out
