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
    one request per prompt with ``logprobs`` and ``top_logprobs`` =
    :data:`TOP_LOGPROBS` and at most :data:`LOGPROBS_MAX_TOKENS` new tokens. The
    answer position is the first generated token that is not only whitespace or
    punctuation; its ``top_logprobs`` are mapped to answer letters (a token is
    letter ``l`` when, with whitespace, brackets, quotes, ``*``, ``.`` and ``:``
    stripped and lower-cased, it is ``l``; case variants add up):
    ``s_l = log sum_{t -> l} exp(logprob_t)``, ``-inf`` for a letter not among
    them; ``letter_mass = sum_l exp(s_l)``. The server's log-probabilities are
    taken as the model's raw ones (OpenAI's and vLLM's default); temperature and
    top-p are applied here and the repeats are drawn exactly as the local
    backends draw theirs (:mod:`fairness_tests.models.letters`): every
    multiple-choice answer of the run, repeated or not, comes from the letter
    distribution, and ``letter_probs`` gives the exact expectations. No letter
    among the top log-probabilities: every repeat is invalid (``answer`` None).

With ``n`` and ``logprobs`` the repeats of a prompt share one server-side forward
pass, so between-call nondeterminism is not measured (:data:`NOTES`, for the card).

A provider that ignores ``n`` (fewer choices than asked) or returns no
log-probabilities is detected on the first grouped response
(:class:`RepeatModeUnsupported`, naming the provider) before anything of that
mode is stored; the audit then asks the same prompts with ``calls`` and records
the fallback (:func:`record`). Never silently wrong.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from fairness_tests.core.errors import ConfigError, FairnessTestsError
from fairness_tests.models.request import Request

REPEAT_MODES = ("calls", "n", "logprobs")
DEFAULT_REPEAT_MODE = "calls"
TOP_LOGPROBS = 5            # the most /v1/completions allows; chat allows 20
LOGPROBS_MAX_TOKENS = 3     # room for "(b" or "**b" before the letter; the letter is usually first

NOTES = {
    "calls": "one request per repeat: between-call nondeterminism of the provider is measured",
    "n": "one request per prompt with n = repeats choices: the repeats share one server-side "
         "forward pass (the prompt is billed once), so between-call nondeterminism is not measured",
    "logprobs": "one request per prompt with top_logprobs: the repeats are drawn from the letter "
                "distribution of one server-side forward pass (as the local backends draw them), "
                "so between-call nondeterminism is not measured",
}

_STRIP = " \t\r\n()[]{}\"'`*.:"


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
    multiple-choice prompt, ``calls`` to none (the requests are returned as given)."""
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
    return [r.with_(repeat_mode="logprobs") if r.kind == "choice" else r for r in requests]


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

def _token_letter(token: str, letters: Sequence[str]) -> int | None:
    t = str(token).strip(_STRIP).lower()
    return letters.index(t) if t in letters else None


def answer_position(tokens: Sequence[str]) -> int | None:
    """Index of the first generated token that is not only whitespace/punctuation."""
    for j, t in enumerate(tokens):
        if str(t).strip(_STRIP):
            return j
    return None


def letter_scores(top: Iterable[tuple[str, float]], choices: Sequence[str]):
    """``(s, mass)``: per-letter log-probability ``s_l`` (numpy, ``-inf`` for a letter
    not among ``top``) and ``letter_mass``, from ``(token, logprob)`` pairs."""
    import numpy as np
    letters = [c.lower() for c in choices]
    p = np.zeros(len(letters))
    for token, logprob in top:
        i = _token_letter(token, letters)
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
