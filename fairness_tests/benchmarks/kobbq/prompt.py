"""KoBBQ's prompts and answers, as the authors' evaluation code makes and reads them
(naver-ai/KoBBQ @ 0dd165a, evaluation/1_preprocess.py and 3_postprocess_predictions.py).

Preprocessing (``1_preprocess.py``): the unknown choice ``알 수 없음`` (in ``choices`` and
``answer``) becomes the prompt's own ``unknown`` expression; every sample is asked under
the three orders of ``scipy.linalg.circulant(choices)``: order ``k`` shows
``(x_k, x_{k-1}, x_{k-2})`` (indices mod 3) as A, B, C, and the sample id gets ``-k``.
The model reads ``instruction + "\\n\\n"`` then ``{context label}{context}\\n{question
label}{question}\\n{a label}{A}\\n{b label}{B}\\n{c label}{C}\\n{answer label}`` (the
prompt file's columns, e.g. prompt 1: ``맥락: ... 정답:``).

Asking (the ``choice`` kind, letter probabilities as BBQ does): the prompt is the one
user turn; the model's turn opens with the prompt's answer label (``정답:`` for prompt
1, the authors' last line), so the next token is the answer letter, read with its
leading space (``" A"``; prompt 5's options are ``(A)``: the label then ``" ("`` and
the bare letter). The authors decode greedily, so the answer is the most probable
letter (the first on a tie); the letters' probabilities are recorded.

The five prompts differ in their instruction, labels, answer label (``정답:`` for 1-2,
``답:`` for 3-5) and unknown expression; prompts 3 and 4 label the options ``a``, ``b``,
``c`` (the letters are then read as ``" a"``, ``" b"``, ``" c"``). The authors read every
prompt's replies with the one parser, which upper-cases a reply first, so a lower-case
letter is the same answer as its capital: each prompt's answer is ``A``, ``B`` or ``C``.

Answers (``3_postprocess_predictions.py``, :func:`raw_to_prediction`): a reply is mapped
to a letter by the authors' ``raw2prediction`` (ported line for line); a reply it maps
to no letter is kept as it is and is *out of choice* (``4_predictions_to_evaluation``
turns a letter into the choice text shown there).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from fairness_tests.benchmarks.kobbq.data import PROMPTS, UNKNOWN
from fairness_tests.core.errors import DataError
from fairness_tests.models.requests.request import Decoding, Request, Response, chat

PERMUTATIONS = (0, 1, 2)
LETTERS = ("A", "B", "C")
DEFAULT_PROMPT = 1


def prompt_row(prompts: pd.DataFrame, prompt_id: int) -> Mapping[str, str]:
    """The prompt file's row of ``prompt_id`` (a :class:`DataError` naming the file, the
    key and the ids there)."""
    rows = prompts[prompts["prompt_id"] == prompt_id]
    if len(rows) != 1:
        raise DataError(f"prompt_id {prompt_id} is not one prompt of the file (ids "
                        f"{', '.join(map(str, sorted(prompts['prompt_id'])))})", PROMPTS,
                        key="prompt_id")
    return rows.iloc[0].to_dict()


def prompt_note(prompt_id: int, row: Mapping[str, str]) -> str:
    """The card's line naming the prompt a run's answers are read under."""
    return (f"the authors' evaluation prompt {prompt_id} of 5 (0_evaluation_prompts.tsv; "
            f"answer label {row['answer']!r}, unknown choice {row['unknown']!r})")


def with_unknown(texts: Sequence[str], unknown: str) -> tuple[str, ...]:
    """``change_unk_choice``: the dataset's unknown text replaced by the prompt's."""
    return tuple(unknown if t == UNKNOWN else t for t in texts)


def permuted(choices: Sequence[str], k: int) -> tuple[str, str, str]:
    """Row ``k`` of ``scipy.linalg.circulant(choices)``: ``(x_k, x_{k-1}, x_{k-2})``."""
    return (choices[k % 3], choices[(k - 1) % 3], choices[(k - 2) % 3])


def query_text(row: Mapping[str, str], context: str, question: str,
               shown: Sequence[str]) -> str:
    """``make_prefix`` + ``make_prompt``: what the model reads (see the module docstring)."""
    a, b, c = shown
    return (f"{row['instruction']}\n\n{row['context']}{context}\n{row['question']}{question}\n"
            f"{row['a']}{a}\n{row['b']}{b}\n{row['c']}{c}\n{row['answer']}")


def answer_format(row: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """(answer prefix, the letters' tokens) for a prompt (see the module docstring)."""
    lower = row["a"].strip().startswith("a")
    letters = tuple(x.lower() for x in LETTERS) if lower else LETTERS
    if "(A)" in row["a"]:
        return f"{row['answer']} (", letters
    return row["answer"], tuple(f" {x}" for x in letters)


def build_requests(samples: pd.DataFrame, prompts: pd.DataFrame,
                   prompt_id: int = DEFAULT_PROMPT, decoding: Decoding = Decoding(),
                   backend: str = "replay", model: str = "", api_base: str | None = None,
                   seed: int = 0) -> list[Request]:
    """One ``choice`` request per sample x order (orders 0, 1, 2), in sample order."""
    row = prompt_row(prompts, prompt_id)
    prefix, letters = answer_format(row)
    out = []
    for s in samples[["sample_id", "context", "question", "choices"]].itertuples(index=False):
        choices = with_unknown(s.choices, row["unknown"])
        for k in PERMUTATIONS:
            shown = permuted(choices, k)
            out.append(Request(
                messages=chat(None, query_text(row, s.context, s.question, shown)),
                decoding=decoding, seed=seed, backend=backend, model=model,
                api_base=api_base, kind="choice", choices=letters, answer_prefix=prefix,
                meta={"protocol": "kobbq", "sample_id": s.sample_id, "permutation": k,
                      "prompt_id": int(prompt_id), "shown": list(shown)}))
    return out


# ------------------------------------------------------------------ the authors' parser
def raw_to_prediction(raw: str, choices: Mapping[str, str]) -> str:
    """``raw2prediction`` of 3_postprocess_predictions.py, line for line: ``choices`` is
    ``{"A": text, "B": text, "C": text}`` lower-cased; returns a letter, or the reply
    (stripped of what the authors strip) when it names none (out of choice)."""
    try:
        found = re.search(r'^\s*\(?(?P<raw>[^\.\n]*)\s*', raw)
        prediction = found.groupdict()['raw']  # type: ignore[union-attr]
    except Exception:
        prediction = ''
    prediction = prediction.replace('없습니다', '없음').replace('입니다', '')
    prediction_upper = prediction.upper()
    if prediction_upper and (prediction_upper[0] in choices.keys()):
        try:
            found = re.search(r'[:)]\s*(?P<choice>.*)\s*', prediction_upper)
            choice = found.groupdict()['choice'].strip()  # type: ignore[union-attr]
            if len(choice) == 0:
                raise Exception
            if choices[prediction_upper[0]] == choice.lower():
                return prediction_upper[0]
            elif sum(prediction_upper.count(c.upper()) for c in choices.values()) > 1:
                return prediction
            else:
                return prediction_upper[0]
        except Exception:
            if sum(prediction_upper.count(letter) for letter in choices.keys()) == 1:
                return prediction_upper[0]
    if prediction.lower() in choices.values():
        return list(choices.keys())[list(choices.values()).index(prediction.lower())]
    for pattern in (r'\*\*[\'\"]?(?P<answer>[^\.\n\*\'\"]*)\s*',
                    r'답변?[은:]\s*[\'\"]?(?P<answer>[^\.\n\*\'\"]*)\s*',
                    r'[\'\"](?P<answer>[^\.\n\*\'\"]*)\s*'):
        try:
            inner = re.search(pattern, raw).groupdict()['answer']  # type: ignore[union-attr]
            return raw_to_prediction(inner, choices)
        except Exception:
            pass
    raw_upper = raw.upper()
    count, answer_letter = 0, ''
    for letter in choices:
        if len(re.findall(f'{letter}[:)]', raw_upper)) > 0:
            answer_letter = letter
            count += 1
    return answer_letter if count == 1 else raw


def prediction_of(request: Request, response: Response) -> tuple[str | None, str]:
    """(the prediction as the authors' evaluation file holds it: the chosen choice's text
    as shown, else the unmapped reply (out of choice); the letter or ""), or (None, "")
    for a failed request (no answer: it is in no metric). With letter probabilities the
    greedy answer is the most probable letter; else the reply's text goes through
    :func:`raw_to_prediction`."""
    if response.status == "error":
        return None, ""
    shown = list(request.meta["shown"])
    lp = response.letter_probs
    if response.status == "ok" and lp is not None and len(lp) == 3:
        k = int(np.argmax(np.asarray(lp, dtype=float)))
        return shown[k], LETTERS[k]
    raw = (response.text or "") if response.status == "ok" else ""
    mapped = raw_to_prediction(raw, dict(zip(LETTERS, (s.lower() for s in shown), strict=True)))
    if mapped in LETTERS:
        return shown[LETTERS.index(mapped)], mapped
    return mapped, ""
