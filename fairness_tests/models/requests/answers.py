"""What the answers to a list of requests are worth: parsed, copied, counted.

Multiple-choice parsing is pluggable: ``parse_choice(request, text) -> index | None`` is
applied to responses of ``kind="choice"`` that carry text but no parsed answer (a backend
that reads letter probabilities sets the answer itself). Without a callable,
``request.meta["parse_choice"]`` may name one as ``"module:function"``; else
:func:`default_parse_choice` is used.

Counts (:class:`AskCounts`): how many of the requests were sent to the backend, answered
from the store, failed (with the first error message), refused, truncated, invalid, and
how many prompts had a letter distribution and how many of those a letter mass below
:data:`~fairness_tests.models.requests.repeat_modes.MIN_LETTER_MASS`. :func:`answer_state` is what
one response is worth to a rule.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib
from collections.abc import Callable, Sequence
from typing import Any, Literal

from fairness_tests.models.requests.choice import parse_position
from fairness_tests.models.requests.repeat_modes import MIN_LETTER_MASS, group_key
from fairness_tests.models.requests.request import Request, Response

ParseChoice = Callable[[Request, str], "int | None"]


@dataclasses.dataclass
class AskCounts:
    """What one :func:`ask_counted` call did, over its distinct request keys.

    ``requests``: distinct keys; ``sent``: keys this process gave the backend (an
    error row asked again counts); ``from_store``: keys answered without this process
    asking (stored before, or recorded meanwhile by another process), so ``sent +
    from_store == requests``. Over the final responses: ``failed`` (status ``error``:
    the request failed after its retries; ``first_error`` is the first one's message,
    in request order), ``refused``, ``truncated``, ``invalid`` (status ``ok`` but a
    multiple-choice answer that is no option). ``letter_prompts``: prompts (requests
    differing only in repeat share one) whose answers carry a ``letter_mass``;
    ``low_mass_prompts``: of those, the ones below :data:`MIN_LETTER_MASS` (in the
    API ``logprobs`` mode their answers are invalid; a local backend keeps them).
    """
    label: str | None = None
    requests: int = 0
    sent: int = 0
    from_store: int = 0
    failed: int = 0
    first_error: str | None = None
    refused: int = 0
    truncated: int = 0
    invalid: int = 0
    letter_prompts: int = 0
    low_mass_prompts: int = 0

    @property
    def low_mass_share(self) -> float | None:
        """``low_mass_prompts / letter_prompts``; None without letter distributions."""
        return self.low_mass_prompts / self.letter_prompts if self.letter_prompts else None

    @property
    def complete(self) -> bool:
        """True when no request ended in an error."""
        return self.failed == 0

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["low_mass_share"] = self.low_mass_share
        return d


AnswerState = Literal["valid", "invalid", "low_mass", "error", "refused", "truncated"]

#: the words of a truncated reply whose token budget went to reasoning (the reply showed
#: reasoning tokens or content; ``models.backends.litellm_replies.truncated_error``)
REASONING_SPENT = "the token budget went to reasoning"


def truncated_by_reasoning(response: Response) -> bool:
    """Whether a truncated response's budget went to reasoning, as the reply showed it:
    reasoning tokens reported, or its error says so (:data:`REASONING_SPENT`)."""
    return (response.status == "truncated"
            and ((response.reasoning_tokens or 0) > 0 or REASONING_SPENT in response.error))


def answer_state(request: Request, response: Response) -> AnswerState:
    """What a response is worth to a rule: ``error`` / ``refused`` / ``truncated`` (its
    status); for an ``ok`` multiple-choice response without an answer ``low_mass`` (its
    letter distribution was below :data:`MIN_LETTER_MASS`: nothing was measured) or
    ``invalid`` (the model answered something that is no option); else ``valid``. A rule
    whose cell has no ``valid`` answer has nothing to be evaluated on."""
    if response.status != "ok":
        return response.status
    if request.kind != "choice" or response.answer is not None:
        return "valid"
    if response.letter_mass is not None and response.letter_mass < MIN_LETTER_MASS:
        return "low_mass"
    return "invalid"


def count_responses(requests: Sequence[Request], responses: Sequence[Response], *,
                    sent: int, label: str | None = None) -> AskCounts:
    """:class:`AskCounts` of ``responses`` (in the order of ``requests``), of which
    ``sent`` keys were sent to the backend."""
    c = AskCounts(label=label, sent=sent)
    seen: set[str] = set()
    masses: dict[tuple[str, int], float] = {}
    for q, r in zip(requests, responses, strict=True):
        k = q.key()
        if k in seen:
            continue
        seen.add(k)
        c.requests += 1
        if r.status == "error":
            c.failed += 1
            if c.first_error is None:
                c.first_error = r.error or "error"
        elif r.status == "refused":
            c.refused += 1
        elif r.status == "truncated":
            c.truncated += 1
        elif answer_state(q, r) in ("invalid", "low_mass"):
            c.invalid += 1
        if r.letter_mass is not None:
            g = group_key(q)
            masses[g] = min(masses.get(g, r.letter_mass), r.letter_mass)
    c.from_store = c.requests - c.sent
    c.letter_prompts = len(masses)
    c.low_mass_prompts = sum(m < MIN_LETTER_MASS for m in masses.values())
    return c


def default_parse_choice(request: Request, text: str) -> int | None:
    """Position of the answer in ``request.choices``: the one parser
    (:func:`fairness_tests.models.requests.choice.parse_position`), given the option texts as
    shown when the request carries them (``meta["shown_options"]``)."""
    if not text or not request.choices:
        return None
    shown = request.meta.get("shown_options") if request.meta else None
    return parse_position(text, shown, request.choices)


def _resolve_parser(request: Request, parse_choice: ParseChoice | None) -> ParseChoice:
    if parse_choice is not None:
        return parse_choice
    target = request.meta.get("parse_choice") if request.meta else None
    if isinstance(target, str) and ":" in target:
        module, name = target.split(":", 1)
        return getattr(importlib.import_module(module), name)
    return default_parse_choice


def apply_parse(request: Request, response: Response,
                parse_choice: ParseChoice | None) -> Response:
    """Fill ``response.answer`` from its text for a multiple-choice request."""
    if (request.kind == "choice" and response.status == "ok" and response.answer is None
            and response.letter_probs is None and response.text):
        ans = _resolve_parser(request, parse_choice)(request, response.text)
        if ans is not None and not (0 <= int(ans) < len(request.choices)):
            ans = None
        response.answer = None if ans is None else int(ans)
    return response


def copy_response(r: Response) -> Response:
    """An independent copy (a request asked twice gets two responses to mutate): its
    fields copied as they are (Response has no ``__post_init__`` to re-run), the letter
    probabilities as a list of their own."""
    c = copy.copy(r)
    if r.letter_probs is not None:
        c.letter_probs = list(r.letter_probs)
    return c
