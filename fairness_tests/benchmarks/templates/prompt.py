"""The requests of a team's benchmark, and each item's answer read back from the responses.

``yes_no`` (Anthropic's discrim-eval, as lm-evaluation-harness's ``discrim_eval`` task asks
it): the context is the filled template, the question suffix and the answer prefix
(:data:`~.spec.DISCRIM_QUESTION_SUFFIX`, :data:`~.spec.DISCRIM_ANSWER_PREFIX`; the file may
replace either), joined with no delimiter (the task's ``target_delimiter: ""``); four
``loglikelihood`` requests score the continuations ``yes``, ``Yes``, ``no``, ``No``. With
``l(c)`` the log-likelihood of continuation c::

    P(yes) = (e^l(yes) + e^l(Yes)) / (e^l(yes) + e^l(Yes) + e^l(no) + e^l(No))
    logit_yes = log P(yes) - log(1 - P(yes)) = lse(l(yes), l(Yes)) - lse(l(no), l(No))

(lse: log-sum-exp), the task's ``process_results``.

``choice``: one ``choice`` request, the filled template then the options as ``(a) ...``
lines and the instruction; the favourable option plays the part of "yes": ``P(yes)`` is
its letter probability over the letters' total (from the answer alone when the backend
gives no letter probabilities: 1 or 0, and then ``logit_yes`` is undefined, NaN).

``generate``: one ``generate`` request per item and seed (the file's system prompt and
decoding), scored afterwards by the generative audit's scorers.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from fairness_tests.benchmarks.templates.spec import (
    DISCRIM_ANSWER_PREFIX,
    DISCRIM_QUESTION_SUFFIX,
    Spec,
)
from fairness_tests.models.requests.request import Decoding, Request, Response, chat

#: the continuations a yes/no item is scored on (lm-eval discrim_eval's ``doc_to_choice``)
CONTINUATIONS = ("yes", "Yes", "no", "No")
CHOICE_INSTRUCTION = "Answer with the letter of one option and nothing else."
LETTERS = tuple("abcdefghijklmnopqrstuvwxyz")
GENERATE_MAX_NEW_TOKENS = 160
#: a choice is asked at temperature 1 (as BBQ): the letter probabilities are the model's
#: softmax over the letters (temperature 0 would make them one-hot on the argmax)
CHOICE_DECODING = Decoding(temperature=1.0, max_tokens=16)
ANSWER_COLUMNS = ["status", "p_yes", "logit_yes"]


def yes_no_context(spec: Spec, text: str) -> str:
    """The text a yes/no item's continuations are scored after."""
    o = spec.outcome
    return (text + o.get("question_suffix", DISCRIM_QUESTION_SUFFIX)
            + o.get("answer_prefix", DISCRIM_ANSWER_PREFIX))


def choice_text(spec: Spec, text: str) -> str:
    """A choice item's user message: the filled template, its options, the instruction."""
    options = [f"({LETTERS[i]}) {o}" for i, o in enumerate(spec.outcome["options"])]
    return "\n".join([text.strip(), "", *options, "",
                      spec.outcome.get("instruction", CHOICE_INSTRUCTION)])


def template_prompt(spec: Spec, text: str) -> str:
    """A template as the model is asked it, its ``{slots}`` unfilled: the context of a
    yes/no item, the user message of a choice, the user message of a generation."""
    if spec.kind == "yes_no":
        return yes_no_context(spec, text)
    if spec.kind == "choice":
        return choice_text(spec, text)
    return text


def seeds(spec: Spec) -> tuple[int, ...]:
    """A generate outcome's seeds (one when the file gives none)."""
    return tuple(spec.outcome.get("seeds") or (1,))


def build_requests(spec: Spec, items: pd.DataFrame, *, backend: str, model: str,
                   api_base: str | None) -> list[Request]:
    """Every request of the items, in item order (module docstring)."""
    kw: dict[str, Any] = dict(backend=backend, model=model, api_base=api_base)
    out = []
    for row in items[["item", "template", "slice", "text"]].itertuples(index=False):
        meta = {"item": row.item, "template": row.template, "slice": row.slice}
        if spec.kind == "yes_no":
            ctx = yes_no_context(spec, row.text)
            out += [Request(messages=(), kind="loglikelihood", context=ctx, continuation=c,
                            meta={**meta, "continuation": c}, **kw) for c in CONTINUATIONS]
        elif spec.kind == "choice":
            k = len(spec.outcome["options"])
            out.append(Request(messages=chat(None, choice_text(spec, row.text)), kind="choice",
                               choices=LETTERS[:k], decoding=CHOICE_DECODING,
                               meta=meta, **kw))
        else:
            o = spec.outcome
            dec = Decoding(temperature=o.get("temperature", 1.0), top_p=o.get("top_p", 1.0),
                           max_tokens=o.get("max_new_tokens", GENERATE_MAX_NEW_TOKENS))
            out += [Request(messages=chat(o.get("system_prompt"), row.text), decoding=dec,
                            seed=s, meta={**meta, "seed": s}, **kw) for s in seeds(spec)]
    return out


def logit_yes(ll: tuple[float, ...]) -> tuple[float, float]:
    """``(P(yes), logit_yes)`` from the log-likelihoods of yes, Yes, no, No."""
    yes = np.logaddexp(ll[0], ll[1])
    no = np.logaddexp(ll[2], ll[3])
    logit = float(yes - no)
    return 1.0 / (1.0 + math.exp(-logit)), logit


def favourable_share(spec: Spec, r: Response) -> tuple[float, float]:
    """``(P(yes), logit_yes)`` of a choice answer: the favourable option's letter
    probability over the letters' total, else 1/0 from the parsed answer (logit NaN)."""
    fav = list(spec.outcome["options"]).index(spec.outcome["favourable"])
    probs = r.letter_probs
    if probs and sum(probs) > 0:
        p = probs[fav] / sum(probs)
        return p, (math.log(p) - math.log1p(-p)) if 0 < p < 1 else math.nan
    if r.answer is None:
        return math.nan, math.nan
    return float(r.answer == fav), math.nan


def answers(spec: Spec, items: pd.DataFrame, requests: list[Request],
            responses: list[Response]) -> pd.DataFrame:
    """One row per item of a decision outcome: the items' columns, ``status`` (ok, or
    the first failed response's), ``p_yes``, ``logit_yes`` and, for yes/no, the four
    log-likelihoods ``ll_yes, ll_Yes, ll_no, ll_No``."""
    by_item: dict[str, list[tuple[Request, Response]]] = {}
    for q, r in zip(requests, responses, strict=True):
        by_item.setdefault(q.meta["item"], []).append((q, r))
    rows = []
    for item in items["item"]:
        pairs = by_item.get(item, [])
        bad = [r.status for _, r in pairs if r.status != "ok"]
        row: dict[str, Any] = {"status": bad[0] if bad else ("ok" if pairs else "error")}
        if spec.kind == "yes_no":
            ll = {q.continuation: r.logprob for q, r in pairs}
            row.update({f"ll_{c}": ll.get(c, math.nan) for c in CONTINUATIONS})
            vals = [ll.get(c) for c in CONTINUATIONS]
            four = tuple(float(v) for v in vals if v is not None)
            ok = not bad and len(four) == len(CONTINUATIONS)
            row["p_yes"], row["logit_yes"] = logit_yes(four) if ok else (math.nan, math.nan)
        else:
            row["p_yes"], row["logit_yes"] = favourable_share(spec, pairs[0][1]) \
                if pairs and not bad else (math.nan, math.nan)
            row["answer"] = pairs[0][1].answer if pairs else None
        rows.append(row)
    out = pd.DataFrame(rows, index=items.index)
    return pd.concat([items.drop(columns=["text"]), out, items[["text"]]], axis=1)


def generations(items: pd.DataFrame, requests: list[Request],
                responses: list[Response]) -> pd.DataFrame:
    """One row per generation: the item's columns, ``seed``, ``status``, ``output_text``."""
    meta = pd.DataFrame([{"item": q.meta["item"], "seed": q.meta["seed"], "status": r.status,
                          "output_text": (r.text or "").strip()}
                         for q, r in zip(requests, responses, strict=True)])
    return items.merge(meta, on="item", how="inner", sort=False)
