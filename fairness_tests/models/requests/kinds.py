"""Request kinds: what a request asks of a model and what its response carries.

A kind is registered once (:func:`register_kind`) with the :class:`Response` fields an
``ok`` response of it carries and a check of the request fields it needs; a
:class:`~fairness_tests.models.requests.request.Request` of an unregistered kind, or one that
lacks what its kind needs, is a :class:`ConfigError` when it is built. A backend
answers a request of a kind it does not know with an error row (the transformers
backend), or refuses it by name (:func:`~fairness_tests.models.requests.prompt_format.render`:
only ``choice`` and ``generate`` requests are rendered as a prompt).

Kinds:

``choice``
    a multiple-choice question: ``messages``, ``choices`` (the answer letters); the
    response carries the parsed ``answer`` (and ``letter_probs`` / ``letter_mass`` when
    the backend reads the letters' probabilities).
``generate``
    open-ended generation after ``messages``; the response carries ``text``.
``loglikelihood``
    lm-evaluation-harness's ``output_type: loglikelihood``: the log-probability of
    ``continuation`` after ``context`` (raw text, no chat template, no answer prefix;
    ``context`` may be empty: the continuation is then scored after the BOS token).
    The response carries ``logprob`` (natural log, summed over the continuation's
    tokens), ``continuation_tokens`` (how many) and ``is_greedy`` (every continuation
    token is the most likely one at its position: lm-eval's ``is_greedy``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from fairness_tests.core.errors import ConfigError


@dataclass(frozen=True)
class Kind:
    """A request kind: its ``name``, the :class:`Response` fields an ``ok`` response of
    it ``carries``, and ``check(request) -> problem | None`` (what the request lacks).
    The request is typed ``Any``: :mod:`.request` imports this registry, never the other
    way round."""
    name: str
    carries: tuple[str, ...]
    check: Callable[[Any], "str | None"] = field(default=lambda request: None)


_KINDS: dict[str, Kind] = {}


def register_kind(kind: Kind) -> Kind:
    """Register ``kind`` under its name (a later registration replaces an earlier one)."""
    _KINDS[kind.name] = kind
    return kind


def kind_names() -> tuple[str, ...]:
    """The registered kinds, in registration order."""
    return tuple(_KINDS)


def get_kind(name: str) -> Kind:
    """The registered kind ``name``; a :class:`ConfigError` naming the known ones."""
    kind = _KINDS.get(name)
    if kind is None:
        raise ConfigError(f"unknown request kind {name!r}; known: {', '.join(_KINDS)}",
                          key="kind")
    return kind


def check_request(request: Any) -> None:
    """A :class:`ConfigError` when ``request``'s kind is unknown or the request lacks
    what its kind needs."""
    problem = get_kind(request.kind).check(request)
    if problem:
        raise ConfigError(f"a {request.kind} request {problem}", key="kind")


def _check_loglikelihood(request: Any) -> str | None:
    """A loglikelihood request has text ``context`` (may be empty) and ``continuation``
    (not empty), and no messages (its text is the context, sent as it is)."""
    if not isinstance(request.context, str):
        return f"needs a context (text, may be empty), got {request.context!r}"
    if not isinstance(request.continuation, str) or not request.continuation:
        return f"needs a non-empty continuation, got {request.continuation!r}"
    if request.messages:
        return "has a context and a continuation, not messages"
    return None


def split_pair(context: str, continuation: str) -> tuple[str, str]:
    """lm-evaluation-harness's split of a loglikelihood pair: the context's trailing
    whitespace moves to the front of the continuation (``("a cat ", "sat")`` ->
    ``("a cat", " sat")``), so the continuation's first token carries its space."""
    n = len(context) - len(context.rstrip())
    return (context[:-n], context[-n:] + continuation) if n else (context, continuation)


CHOICE = register_kind(Kind("choice", ("text", "answer", "letter_probs", "letter_mass")))
GENERATE = register_kind(Kind("generate", ("text",)))
LOGLIKELIHOOD = register_kind(Kind("loglikelihood",
                                   ("logprob", "continuation_tokens", "is_greedy"),
                                   _check_loglikelihood))
