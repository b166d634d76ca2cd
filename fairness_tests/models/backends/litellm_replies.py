"""Reading a litellm reply: each choice's response, a logprobs reply's letter distribution
and draws, and the billed tokens shared among a unit's responses.

A provider refusal (``finish_reason == "content_filter"`` or a ``refusal`` message)
becomes ``status="refused"``; an empty answer with ``finish_reason == "length"``
``status="truncated"``, not retried, its ``error`` saying what happened
(:func:`truncated_error`: the budget went to reasoning only when the reply shows
reasoning tokens or reasoning content; else the tokens it used and what it wrote); an
empty string content is a valid (empty) answer. In the ``logprobs`` repeat mode every
repeat is drawn from the letter distribution at the answer position
(:func:`from_logprobs`); a prompt whose letter mass is below
:data:`~fairness_tests.models.requests.repeat_modes.MIN_LETTER_MASS` is invalid. Tokens and cost
of a unit are billed once and shared among its responses (:func:`share`: remainders to
the first), so sums over responses are what the provider billed.

A loglikelihood reply (:func:`read_loglik`: ``/v1/completions`` asked with ``echo``,
``logprobs`` and the prompt ``context + continuation``) gives the log-probabilities of
the prompt's own tokens, each at its character offset (``text_offset``): the
continuation is every token at or after the context's length and before the prompt's
end (tokens past it are the completion's). ``logprob`` is the sum of their
``token_logprobs``, ``is_greedy`` whether each is the largest of its ``top_logprobs``
(lm-evaluation-harness's reading of such a reply; None when the reply has no top
log-probabilities), ``continuation_tokens`` how many there were. A reply with no token
in that span (a server that does not echo the prompt) is :class:`Unsupported`
(``echo``); a continuation token without a log-probability (the first token of a prompt
whose server puts nothing before it) is an error row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from fairness_tests.models.backends.litellm_errors import Retryable, Unsupported
from fairness_tests.models.requests import prompt_format as PF
from fairness_tests.models.requests.answers import REASONING_SPENT
from fairness_tests.models.requests.letters import draw_letter, letter_distribution
from fairness_tests.models.requests.repeat_modes import (
    MIN_LETTER_MASS,
    answer_position,
    letter_scores,
)
from fairness_tests.models.requests.request import Request, Response
from fairness_tests.models.store.scrub import scrub_text


@dataclass(frozen=True)
class Reply:
    """One reply read: a response per request of the unit, and what the provider billed
    for it (None where the reply does not say; ``cost_usd`` None when litellm cannot
    price the model), and for a logprobs reply what was read at the answer position."""
    responses: list[Response]
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    letters: LetterRead | None


@dataclass(frozen=True)
class LetterRead:
    """What a logprobs reply gave at its answer position: the letters' probability mass
    and how many candidates it listed."""
    mass: float
    returned: int


def read_reply(litellm: Any, reqs: list[Request], raw: Any, text_mode: bool,
               max_tokens: int, rendered: PF.Rendered, secrets: list[str],
               parse_choice: Callable[[Request, str], int | None] | None) -> Reply:
    """The responses to the unit ``reqs`` from litellm's reply ``raw``, each with its
    share of the billed tokens and cost (:func:`share`). A reply without choices is
    :class:`Retryable`; fewer choices than ``n`` asked, or a logprobs reply without
    log-probabilities, :class:`Unsupported`."""
    choices = _choices(raw)
    mode = reqs[0].repeat_mode
    if mode == "n" and len(choices) < len(reqs):
        raise Unsupported(f"returned {len(choices)} choice(s) for n={len(reqs)}", "n")
    _, ct, rt = _usage(raw)
    budget = Budget(max_tokens, ct, rt)
    read = None
    if mode == "logprobs":
        out, read = from_logprobs(reqs, choices[0], text_mode, budget, rendered, secrets)
    else:
        out = [from_choice(q, c, text_mode, budget, rendered.cut, secrets, parse_choice)
               for q, c in zip(reqs, choices[:len(reqs)], strict=True)]
    return _billed(litellm, raw, out, read)


def _choices(raw: Any) -> list[Any]:
    """The reply's choices by index; a reply without any is :class:`Retryable`."""
    try:
        choices = sorted(raw.choices, key=lambda c: getattr(c, "index", 0) or 0)
        choices[0]
    except (AttributeError, IndexError, TypeError):
        raise Retryable("reply without choices") from None
    return choices


def _usage(raw: Any) -> tuple[int | None, int | None, int | None]:
    """The reply's prompt, completion and reasoning tokens (None where not reported)."""
    usage = getattr(raw, "usage", None)
    pt = getattr(usage, "prompt_tokens", None) if usage is not None else None
    ct = getattr(usage, "completion_tokens", None) if usage is not None else None
    details = getattr(usage, "completion_tokens_details", None) if usage is not None else None
    rt = getattr(details, "reasoning_tokens", None) if details is not None else None
    return pt, ct, rt


def _billed(litellm: Any, raw: Any, out: list[Response], read: LetterRead | None) -> Reply:
    """The :class:`Reply` of the responses ``out`` read from ``raw``: the billed tokens
    and cost, shared among them (:func:`share`)."""
    pt, ct, rt = _usage(raw)
    try:
        cost: float | None = float(litellm.completion_cost(completion_response=raw))
    except Exception:  # unknown model price: no cost
        cost = None
    k = len(out)
    for i, r in enumerate(out):
        r.prompt_tokens = pt if (i == 0 or pt is None) else 0
        r.completion_tokens = share(ct, k, i)
        r.reasoning_tokens = share(rt, k, i)
        r.cost_usd = None if cost is None else cost / k
    return Reply(out, pt, ct, rt, cost, read)


def read_loglik(litellm: Any, reqs: list[Request], raw: Any, start: int, end: int) -> Reply:
    """The responses to the loglikelihood unit ``reqs`` from an echoed completion
    ``raw`` of a prompt whose continuation spans characters ``[start, end)`` (see the
    module docstring)."""
    choice = _choices(raw)[0]
    lp = getattr(choice, "logprobs", None)
    tokens = list(_get(lp, "tokens") or []) if lp is not None else []
    offsets = list(_get(lp, "text_offset") or []) if lp is not None else []
    values = list(_get(lp, "token_logprobs") or []) if lp is not None else []
    tops = list(_get(lp, "top_logprobs") or []) if lp is not None else []
    span = [j for j, o in enumerate(offsets[:len(tokens)])
            if o is not None and start <= int(o) < end]
    if not span or len(values) < len(tokens):
        raise Unsupported("the reply does not echo the prompt's tokens with their "
                          "log-probabilities and offsets", "echo")
    finish = getattr(choice, "finish_reason", None)
    if any(values[j] is None for j in span):
        err = (f"no log-probability for the continuation's token {tokens[span[0]]!r} "
               f"(the first of the prompt: the server puts no token before it)")
        return _billed(litellm, raw, [Response(key=q.key(), status="error", error=err,
                                               finish_reason=finish) for q in reqs], None)
    logprob = sum(float(values[j]) for j in span)
    greedy: bool | None = None
    if len(tops) >= len(tokens) and all(tops[j] for j in span):
        greedy = all(float(values[j]) >= max(float(v) for v in dict(tops[j]).values())
                     for j in span)
    out = [Response(key=q.key(), logprob=logprob, continuation_tokens=len(span),
                    is_greedy=greedy, finish_reason=finish, status="ok") for q in reqs]
    return _billed(litellm, raw, out, None)


@dataclass(frozen=True)
class Budget:
    """The ``max_tokens`` a reply was asked with and what its usage reports (None
    where it does not): completion tokens (reasoning included) and reasoning tokens."""
    max_tokens: int
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None


#: where a reply may carry its reasoning text (litellm's name, and the providers')
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking_blocks")


def shows_reasoning(choice: Any, budget: Budget) -> bool:
    """Whether a reply shows reasoning: reasoning tokens in its usage, or reasoning
    content in the choice's message (:data:`REASONING_FIELDS`)."""
    if (budget.reasoning_tokens or 0) > 0:
        return True
    msg = getattr(choice, "message", None)
    return msg is not None and any(_nonempty(_get(msg, f)) for f in REASONING_FIELDS)


def _nonempty(x: Any) -> bool:
    """A text with more than white space, or a non-empty list of blocks."""
    if isinstance(x, str):
        return bool(x.strip())
    return isinstance(x, (list, tuple, dict)) and bool(x)


def content_of(choice: Any, text_mode: bool) -> tuple[str | None, str | None, str | None]:
    """``(content, refusal, finish_reason)`` of one choice (a completion's ``text``)."""
    finish = getattr(choice, "finish_reason", None)
    if text_mode:
        return getattr(choice, "text", None), None, finish
    msg = getattr(choice, "message", None)
    content = getattr(msg, "content", None) if msg is not None else None
    refusal = getattr(msg, "refusal", None) if msg is not None else None
    return content, refusal, finish


def from_choice(req: Request, choice: Any, text_mode: bool, budget: Budget,
                stop: list[str] | None, secrets: list[str],
                parse_choice: Callable[[Request, str], int | None] | None) -> Response:
    """The response of one choice: refused (``content_filter`` or a refusal), truncated
    (``length`` with no answer), else ok with the text cut where ``stop`` would have cut
    it; a multiple-choice answer parsed by ``parse_choice``. No content at all (and no
    refusal) in a chat reply is :class:`Retryable`."""
    content, refusal, finish = content_of(choice, text_mode)
    common: dict[str, Any] = dict(key=req.key(), finish_reason=finish)
    if finish == "content_filter" or refusal:
        return Response(text=content or "", status="refused",
                        error=scrub_text(refusal or f"finish_reason={finish}",
                                         secrets), **common)
    if finish == "length" and not (content or "").strip():
        err = truncated_error(budget, shows_reasoning(choice, budget), content, logprobs=False)
        return Response(text="", status="truncated", error=err, **common)
    if content is None and not text_mode:
        raise Retryable("reply with no content and no refusal")
    # a server that ignores `stop` runs on after the letter: cut where it would stop
    resp = Response(text=PF.cut_at_stop(content or "", stop), status="ok", **common)
    if req.kind == "choice" and parse_choice is not None and resp.text:
        resp.answer = parse_choice(req, resp.text)
    return resp


def from_logprobs(reqs: list[Request], choice: Any, text_mode: bool, budget: Budget,
                  rendered: PF.Rendered, secrets: list[str]
                  ) -> tuple[list[Response], LetterRead | None]:
    """Every repeat of the unit drawn from the letter distribution of the reply's
    answer position; a prompt whose letter mass is below :data:`MIN_LETTER_MASS`
    is invalid (see :mod:`fairness_tests.models.requests.repeat_modes`). With the responses, what
    was read at the answer position (None for a refusal or a truncated reply)."""
    content, refusal, finish = content_of(choice, text_mode)
    first = reqs[0]
    if finish == "content_filter" or refusal:
        err = scrub_text(refusal or f"finish_reason={finish}", secrets)
        return [Response(key=q.key(), text=content or "", status="refused", error=err,
                         finish_reason=finish) for q in reqs], None
    if finish == "length" and not (content or "").strip():
        err = truncated_error(budget, shows_reasoning(choice, budget), content, logprobs=True)
        return [Response(key=q.key(), status="truncated", error=err,
                         finish_reason=finish) for q in reqs], None
    positions = logprob_positions(getattr(choice, "logprobs", None), text_mode)
    if positions is None or (not positions and (content or "").strip()):
        raise Unsupported("no logprobs in the reply", "logprobs")
    j = answer_position([tok for tok, _ in positions], rendered.after_open_bracket)
    if j is None:
        scores, mass, returned = None, 0.0, 0
    else:
        returned = len(positions[j][1])
        scores, mass = letter_scores(positions[j][1], first.choices,
                                     rendered.after_open_bracket)
    read = LetterRead(mass, returned)
    if scores is None or mass < MIN_LETTER_MASS:
        where = ("the first token after the answer prefix" if rendered.after_open_bracket
                 else "the answer position")
        if mass <= 0.0:
            note = (f"no answer letter among the {returned} log-probabilities at {where} "
                    f"(reply {(content or '')[:40]!r})")
        else:
            note = (f"letter mass {mass:.3f} below {MIN_LETTER_MASS:g} at {where} among "
                    f"{returned} log-probabilities (reply {(content or '')[:40]!r}): the "
                    f"letter distribution is unusable, the answer invalid")
        return [Response(key=q.key(), text="", status="ok", letter_mass=mass, error=note,
                         finish_reason=finish) for q in reqs], read
    probs = letter_distribution(scores, first.decoding.temperature, first.decoding.top_p)
    lp = [float(x) for x in probs]
    out = []
    for q in reqs:
        a = draw_letter(probs, q.seed, q.prompt_key(), q.repeat)
        out.append(Response(key=q.key(), text=q.choices[a], answer=a, letter_probs=list(lp),
                            letter_mass=mass, finish_reason=finish, status="ok"))
    return out, read


def share(total: int | None, k: int, i: int) -> int | None:
    """Response ``i``'s share of ``total`` split over ``k`` (remainders to the first)."""
    if total is None:
        return None
    base, rem = divmod(int(total), k)
    return base + (1 if i < rem else 0)


def truncated_error(budget: Budget, reasoning: bool, content: str | None,
                    logprobs: bool) -> str:
    """What happened to an answer cut by ``max_tokens`` (finish_reason ``length``) before
    it began. The budget "went to reasoning" only when the reply shows it
    (``reasoning``: :func:`shows_reasoning`); otherwise the message says how many
    tokens the reply used and what it wrote (blank text). ``logprobs``: the logprobs
    repeat mode, which asks for at most a few tokens, so --max-tokens cannot help."""
    ct, rt, m = budget.completion_tokens, budget.reasoning_tokens, budget.max_tokens
    if reasoning:
        spent = (f"{rt} of the reply's {ct} completion tokens were reasoning"
                 if rt and ct is not None else "the reply holds reasoning content")
        fix = ("a reasoning model needs --repeat-mode n or calls" if logprobs else
               "raise --max-tokens or lower the reasoning effort")
        return (f"finish_reason=length with no answer: {REASONING_SPENT} ({spent}; "
                f"max_tokens {m}); {fix}")
    used = f"after {ct} completion token(s)" if ct is not None else "(no token count reported)"
    wrote = f"it wrote only blank text {content!r}" if content else "it wrote nothing"
    fix = (f"the logprobs mode reads the answer letter within its first {m} tokens; a model "
           "that does not begin with it needs --repeat-mode n or calls" if logprobs else
           f"raise --max-tokens (now {m}) if the model needs room before its answer")
    return (f"finish_reason=length {used} with max_tokens {m} and no answer: {wrote}; no "
            f"reasoning tokens or content in the reply; {fix}")


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def logprob_positions(logprobs: Any, text_mode: bool
                      ) -> list[tuple[str, list[tuple[str, float]]]] | None:
    """``[(token, [(candidate, logprob), ...]), ...]`` per generated position (the
    chosen token included among the candidates); None when the reply has no logprobs.

    Chat: ``choices[i].logprobs.content[j] = {token, logprob, top_logprobs: [{token,
    logprob}]}``; completions: ``choices[i].logprobs = {tokens, token_logprobs,
    top_logprobs: [{token: logprob}]}``."""
    if logprobs is None:
        return None
    out: list[tuple[str, list[tuple[str, float]]]] = []
    if text_mode:
        tokens = _get(logprobs, "tokens") or []
        chosen = _get(logprobs, "token_logprobs") or []
        tops = _get(logprobs, "top_logprobs") or []
        for j, tok in enumerate(tokens):
            top = tops[j] if j < len(tops) and tops[j] else {}
            cands = [(str(t), float(v)) for t, v in dict(top).items()]
            if tok not in dict(cands) and j < len(chosen) and chosen[j] is not None:
                cands.append((str(tok), float(chosen[j])))
            out.append((str(tok), cands))
    else:
        content = _get(logprobs, "content")
        for entry in content or []:
            tok = str(_get(entry, "token"))
            cands = [(str(_get(t, "token")), float(_get(t, "logprob")))
                     for t in (_get(entry, "top_logprobs") or [])]
            if tok not in dict(cands) and _get(entry, "logprob") is not None:
                cands.append((tok, float(_get(entry, "logprob"))))
            out.append((tok, cands))
    return out
