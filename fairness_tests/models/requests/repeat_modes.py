"""How the repeats of one multiple-choice prompt are asked of an API model.

Three modes (``--repeat-mode``; the request's ``repeat_mode`` field, part of its key):

``calls`` (default, the study's protocol)
    one request per repeat. Between-call nondeterminism of the provider is part
    of what the repeats measure.
``n``
    one request with ``n`` = the number of repeats asked: the prompt is billed
    once, the completions ``n`` times. Choice ``i`` answers the ``i``-th repeat
    (in repeat order). Applied to prompts asked more than once; a prompt asked
    once is a plain call.
``logprobs``
    one request per prompt with ``logprobs`` and ``top_logprobs`` = the most the
    provider allows (:data:`TOP_LOGPROBS`, OpenAI's limit for chat; a server that
    names a lower limit in its error is asked again with that limit, which is
    remembered) and at most :data:`LOGPROBS_MAX_TOKENS` new tokens. The letters are
    read at the *answer position* as the prompt makes them appear
    (:func:`letter_index`): when the prompt ends with an open bracket (the answer
    prefix ``"Answer: ("``) the answer position is the first generated token and
    letter ``l`` is the token ``l`` (or ``l)``) exactly; without a prefix it is the
    first generated token that is not only whitespace, ``(``, ``*`` or quotes, and
    letter ``l`` is that token with leading whitespace, one ``(`` before and one
    ``)`` after removed. Letters are matched as the prompt shows them, case included:
    ``"A"`` (a sentence-starting article) is not option ``a``. Then
    ``q_l = sum_{t -> l} exp(logprob_t)`` over the returned candidates,
    ``letter_mass = sum_l q_l`` (a lower bound of the true mass: only the top
    candidates are returned) and ``s_l = log q_l`` (``-inf`` for a letter not among
    them). When ``letter_mass < MIN_LETTER_MASS`` (0.5) the distribution is
    unusable: the model mostly does not answer with a letter there, and renormalising
    the little mass left would turn noise into a confident answer; every repeat of
    that prompt is then an invalid answer (``answer`` None, ``letter_mass`` kept, the
    reason in ``error``), never a guess. Otherwise the server's log-probabilities are
    taken as the model's raw ones (OpenAI's and vLLM's default); temperature and
    top-p are applied here and the repeats are drawn exactly as the local backends
    draw theirs (:mod:`fairness_tests.models.requests.letters`): every multiple-choice answer
    of the run, repeated or not, comes from the letter distribution, and
    ``letter_probs`` gives the exact expectations.

With ``n`` and ``logprobs`` the repeats of a prompt share one server-side forward
pass, so between-call nondeterminism is not measured (:data:`NOTES`, for the card).

A provider that ignores ``n`` (fewer choices than asked), returns no
log-probabilities, or answers with an error that names the parameter (llama.cpp's
``HTTP 500 "logprobs is not supported for models created with logits_all=False"``)
is detected on the first grouped response (:class:`RepeatModeUnsupported`, naming
the provider and the reason; such an error is not retried) before anything of that
mode is stored; the audit then asks the same prompts with ``calls`` and records
the fallback (:func:`record`). What was learned is kept in the store per model and
server (:mod:`fairness_tests.models.store.capabilities`): a re-run falls back at once,
without asking the server again. Never silently wrong.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence, get_args

import numpy as np

from fairness_tests.core.errors import ConfigError, FairnessTestsError
from fairness_tests.models.requests.request import RepeatMode, Request

REPEAT_MODES: tuple[RepeatMode, ...] = get_args(RepeatMode)
TOP_LOGPROBS = 20           # the most OpenAI's chat API allows; a lower server limit is learned
LOGPROBS_MAX_TOKENS = 3     # room for "(b" or "**b" before the letter; the letter is usually first
MIN_LETTER_MASS = 0.5       # below it a prompt's letter distribution is unusable (invalid)
#: ``Request.letter_rule`` of a logprobs-mode request (part of its key): letters matched
#: exactly at the answer position, distributions below MIN_LETTER_MASS invalid. Requests
#: asked before the rule existed (case-folded letters, any mass) have other keys.
LETTER_RULE = f"exact;min_mass={MIN_LETTER_MASS:g}"

NOTES = {
    "calls": "one request per repeat: between-call nondeterminism of the provider is measured",
    "n": "one request per prompt with n = repeats choices: the repeats share one server-side "
         "forward pass (the prompt is billed once), so between-call nondeterminism is not measured",
    "logprobs": "one request per prompt with top_logprobs: the repeats are drawn from the letter "
                "distribution of one server-side forward pass (as the local backends draw them), "
                "so between-call nondeterminism is not measured",
}

_SKIP = set(" \t\r\n(*\"'`")      # a token made only of these is not the answer position

class RepeatModeUnsupported(FairnessTestsError):
    """The provider does not honour a repeat mode (seen on its first grouped response)."""

    def __init__(self, mode: str, provider: str, reason: str):
        super().__init__(f"{provider} does not support repeat mode {mode!r}: {reason}")
        self.mode, self.provider, self.reason = mode, provider, reason


def check_mode(mode: str) -> str:
    if mode not in REPEAT_MODES:
        raise ConfigError(f"repeat mode must be one of {', '.join(REPEAT_MODES)}, got {mode!r}",
                          key="--repeat-mode")
    return mode


def group_key(request: Request) -> tuple[str, int]:
    """Requests with the same group key differ only in their repeat index."""
    return request.prompt_key(), int(request.seed)


def apply_mode(requests: Sequence[Request], mode: str) -> list[Request]:
    """``requests`` with ``repeat_mode`` set where ``mode`` applies: ``n`` to
    multiple-choice prompts asked with more than one repeat, ``logprobs`` to every
    multiple-choice prompt (with ``letter_rule`` = :data:`LETTER_RULE`), ``calls`` to
    none (the requests are returned as given)."""
    check_mode(mode)
    if mode == "calls":
        return list(requests)
    if mode == "n":
        repeats: dict[tuple[str, int], set[int]] = {}
        for r in requests:
            if r.kind == "choice":
                repeats.setdefault(group_key(r), set()).add(int(r.repeat))
        return [r.with_(repeat_mode="n") if r.kind == "choice" and len(repeats[group_key(r)]) > 1
                else r for r in requests]
    return [r.with_(repeat_mode="logprobs", letter_rule=LETTER_RULE) if r.kind == "choice"
            else r for r in requests]


def units(requests: Sequence[Request]) -> list[list[int]]:
    """Indices of ``requests`` asked together: one unit per group of an ``n`` or
    ``logprobs`` request (in repeat order), one per ``calls`` request."""
    out: list[list[int]] = []
    where: dict[tuple[str, str, int], int] = {}
    for i, r in enumerate(requests):
        if r.repeat_mode == "calls":
            out.append([i])
            continue
        k = (r.repeat_mode, *group_key(r))
        if k not in where:
            where[k] = len(out)
            out.append([])
        out[where[k]].append(i)
    for u in out:
        u.sort(key=lambda i: int(requests[i].repeat))
    return out


def batches(keys: Sequence[str], requests: dict[str, Request], size: int) -> list[list[str]]:
    """``keys`` cut into batches of about ``size`` that never split a repeat group
    (requests differing only in repeat): a group is asked in one call (``n`` /
    ``logprobs``) or one forward pass (transformers). Groups keep the order of
    their first key; a group larger than ``size`` is a batch of its own."""
    groups: dict[tuple[str, int], list[str]] = {}
    for k in keys:
        groups.setdefault(group_key(requests[k]), []).append(k)
    out: list[list[str]] = []
    cur: list[str] = []
    for members in groups.values():
        if cur and len(cur) + len(members) > size:
            out.append(cur)
            cur = []
        cur.extend(members)
    if cur:
        out.append(cur)
    return out


# ----------------------------------------------------------------------------- logprobs

def letter_index(token: str, letters: Sequence[str], after_open_bracket: bool) -> int | None:
    """Position in ``letters`` of the answer letter ``token`` is, or None.

    After an open bracket (the prompt ends with ``"("``) the token must be the bare
    letter, optionally with its closing bracket (``b``, ``b)``); elsewhere leading
    whitespace, one ``(`` before and one ``)`` after the letter are allowed (``b``,
    `` b``, ``(b``, ``(b)``). Case-sensitive: a letter is matched as the prompt shows it."""
    t = str(token)
    if not after_open_bracket:
        t = t.lstrip()
        if t.startswith("("):
            t = t[1:]
    if t.endswith(")"):
        t = t[:-1]
    return letters.index(t) if t in letters else None


def answer_position(tokens: Sequence[str], after_open_bracket: bool = False) -> int | None:
    """Index of the generated token that holds the answer letter: the first one after an
    open bracket; else the first that is not only whitespace, ``(``, ``*`` or quotes."""
    if after_open_bracket:
        return 0 if len(tokens) else None
    for j, t in enumerate(tokens):
        if not set(str(t)) <= _SKIP:
            return j
    return None


def letter_scores(top: Iterable[tuple[str, float]], choices: Sequence[str],
                  after_open_bracket: bool = False):
    """``(s, mass)``: per-letter log-probability ``s_l = log sum_{t -> l} exp(logprob_t)``
    (numpy, ``-inf`` for a letter not among ``top``) and ``letter_mass = sum_l exp(s_l)``,
    from the ``(token, logprob)`` candidates at the answer position (:func:`letter_index`;
    a log-probability at or below -9999, OpenAI's "very unlikely" marker, counts as 0)."""
    letters = list(choices)
    p = np.zeros(len(letters))
    for token, logprob in top:
        i = letter_index(token, letters, after_open_bracket)
        if i is not None and logprob is not None and logprob > -9999.0:
            p[i] += math.exp(float(logprob))
    with np.errstate(divide="ignore"):
        s = np.log(p)
    return s, float(p.sum())


# ----------------------------------------------------------------------------- records

@dataclass
class ModeRecord:
    """What a run records about its repeat mode (``metadata["bbq"]["repeat_mode"]``)."""
    requested: str
    used: str
    note: str
    fallback: str | None = None       # why the run fell back to calls, naming the provider

    def to_dict(self) -> dict[str, Any]:
        return {"requested": self.requested, "used": self.used,
                "shared_forward_pass": self.used in ("n", "logprobs"), "note": self.note,
                "fallback": self.fallback}


def record(requested: str, fallback: RepeatModeUnsupported | None = None) -> ModeRecord:
    used = "calls" if fallback is not None else requested
    why = None
    if fallback is not None:
        why = (f"{fallback}; fell back to 'calls' (one request per repeat): "
               f"nothing asked with {requested!r} was kept")
    return ModeRecord(requested=requested, used=used, note=NOTES[used], fallback=why)
