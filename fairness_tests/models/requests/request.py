"""One request/response model for both protocols.

A :class:`Request` is everything that can change a model's output; its
:meth:`Request.key` is the response store's primary key:

    key = sha256(canonical_json(key_fields))

with ``key_fields = {backend, model, kind, messages, choices, decoding, seed,
repeat}`` (and ``context`` / ``continuation`` for a ``loglikelihood`` request) and
:func:`canonical_json` the one encoding of a key: object keys
sorted, no spaces, UTF-8, and every number in one form (an integral value as an
integer, so ``1 == 1.0``; numpy scalars as the Python number they print as;
NaN and infinities refused). A field whose value is ``None`` is left out, so a
field added later (with a ``None`` default) leaves every existing key as it is.

Not in the key:

- ``meta``: the protocol's columns (dataset, item id, slice, ...), kept so
  records can be joined back;
- ``api_base``: transport (where the request is sent). A port change keeps the
  key; what answers is identified by the model id (in the key) and by the
  backend's :meth:`~fairness_tests.models.backends.base.Backend.fingerprint`,
  which the store keeps beside every row and checks on replay.

Kinds (:mod:`fairness_tests.models.requests.kinds`, a registry: a kind added later needs no
edit here):
- ``"choice"``: a multiple-choice question; ``choices`` are the answer letters
  (e.g. ``("a", "b", "c")``); the response carries the parsed answer index and,
  when the backend can give them, the letters' probabilities.
- ``"generate"``: open-ended generation; the response carries the text.
- ``"loglikelihood"``: the log-probability of ``continuation`` after ``context`` (both
  raw text; no messages); the response carries ``logprob``, ``continuation_tokens``
  and ``is_greedy``. ``context`` and ``continuation`` are ``None`` for every other
  kind, so they are left out of those keys (every existing key is unchanged).

````response_format`` (a judge's structured output, see
:mod:`fairness_tests.scoring.judge`) is the provider's ``response_format`` object as
canonical JSON text; it enters the key only when set.

``repeat_mode`` (see :mod:`fairness_tests.models.requests.repeat_modes`) says how the
repeats of one prompt are asked of an API: ``"calls"`` (one request each),
``"n"`` (one request with ``n`` choices) or ``"logprobs"`` (one request whose
``top_logprobs`` give the letter distribution the repeats are drawn from). It
changes how an answer is produced, so it is part of the key; like the reasoning
settings of :class:`Decoding` it enters the key only when not at its default,
so the keys of requests that do not use it are unchanged.

``prompt_format`` and ``answer_prefix`` (see :mod:`fairness_tests.models.requests.prompt_format`)
say how an API backend turns the messages into the model's input (a turn format for a
``/v1/completions`` endpoint, an answer prefix that makes the next token the answer
letter); ``None`` means the default (``auto``, ``"Answer: ("``). The key holds the
*concrete* format a ``litellm`` request is sent in when it is not ``chat`` (messages
as given), so a ``text-completion-*`` request's key names its format even when the
request leaves it at the default (:func:`~.prompt_format.request_key_fields`),
and a chat request's key is unchanged. ``letter_rule`` (set with the ``logprobs``
repeat mode) names how answer letters are read from log-probabilities, so answers read
under an earlier rule are never served for it.

Statuses: ``ok``; ``error`` (asked again on a re-run); ``refused`` (the
provider refused); ``truncated`` (an empty answer with finish reason
``length``: the token budget went to reasoning; a re-run with a larger
``max_tokens`` is a different request).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

from fairness_tests.core.errors import ConfigError
from fairness_tests.core.io import sha256_text
from fairness_tests.models.requests.kinds import check_request
from fairness_tests.models.requests.prompt_format import Message, request_key_fields

Status = Literal["ok", "error", "refused", "truncated"]
#: how the repeats of a prompt are asked (:mod:`.repeat_modes`)
RepeatMode = Literal["calls", "n", "logprobs"]
STATUSES = ("ok", "error", "refused", "truncated")


# ----------------------------------------------------------------------------- canonical form

def canonical(value: Any, where: Any = "request") -> Any:
    """``value`` as plain JSON data in its one canonical form: dicts with string keys
    (entries whose value is ``None`` dropped), lists for tuples, ``bool`` kept, every
    other number as an ``int`` when integral (``1.0 -> 1``) else the shortest ``float``;
    a numpy scalar counts as the number it prints as (``float32(0.7) -> 0.7``).
    NaN and infinities are a :class:`ConfigError` naming ``where``.

    One pass, dispatching on the exact type first (str, int, float, list, dict: the
    types of a request's fields); the place named in an error (``request.decoding.x``,
    ``request.messages[0]``) is built only when there is an error."""
    t = type(value)
    if t is str or t is bool or value is None:
        return value
    if t is int:
        return value
    if t is dict:
        return _canonical_dict(value, where)
    if t is list or t is tuple:
        return [v if type(v) is str else canonical(v, (where, i)) for i, v in enumerate(value)]
    if isinstance(value, (str, bool)):
        return value
    if isinstance(value, dict):
        return _canonical_dict(value, where)
    if isinstance(value, (list, tuple)):
        return [canonical(v, (where, i)) for i, v in enumerate(value)]
    number = _number(value, where)
    if number is not None:
        return number
    raise ConfigError(f"{_where(where)}: {type(value).__name__} {value!r} cannot be part of "
                      "a request key")


def _canonical_dict(value: dict, where: Any) -> dict:
    """:func:`canonical` of a dict: string keys, ``None`` values dropped."""
    out = {}
    for k, v in value.items():
        if type(k) is not str and not isinstance(k, str):
            raise ConfigError(f"{_where(where)}: non-string key {k!r}")
        if v is not None:
            out[k] = v if type(v) is str else canonical(v, (where, k))
    return out


def _plain_canonical(fields: dict[str, Any]) -> dict[str, Any] | None:
    """:func:`canonical` of a request's key fields when they hold the plain types a
    request is built with (strings, lists of strings, a decoding of floats and ints,
    int seed and repeat), in one cheap pass: ``None`` values dropped, an integral float
    as an int. None when anything else is there (then :func:`canonical` decides)."""
    out: dict[str, Any] = {}
    for k, v in fields.items():
        t = type(v)
        if v is None:
            continue
        if t is str or t is int:
            out[k] = v
        elif k == "decoding" and t is dict:
            d = {}
            for dk, dv in v.items():
                dt = type(dv)
                if dt is float and math.isfinite(dv):
                    d[dk] = int(dv) if dv.is_integer() else dv
                elif dt is int or dt is str:
                    d[dk] = dv
                elif dv is not None:
                    return None
            out[k] = d
        elif t is list and all(type(x) is str for x in v):
            out[k] = v
        elif k == "messages" and t is list and all(
                type(m) is list and len(m) == 2 and type(m[0]) is str and type(m[1]) is str
                for m in v):
            out[k] = v
        else:
            return None
    return out


def _where(where: Any) -> str:
    """The readable place of a (parent, step) chain: ``request.messages[0]`` (a string
    step is a key, an int an index)."""
    steps = []
    while isinstance(where, tuple):
        where, step = where
        steps.append(f"[{step}]" if type(step) is int else f".{step}")
    return str(where) + "".join(reversed(steps))


def _number(value: Any, where: str) -> int | float | None:
    """The canonical number for ``value`` (None when it is not a number)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        x = value
    elif type(value).__module__ == "numpy" and hasattr(value, "dtype"):
        kind = value.dtype.kind
        if kind in "iu":
            return int(value)
        if kind != "f":
            return None
        x = float(str(value))        # the shortest repr in the scalar's own precision
    else:
        return None
    if not math.isfinite(x):
        raise ConfigError(f"{_where(where)}: {x} is not a finite number")
    return int(x) if x.is_integer() else x


def canonical_json(value: Any) -> str:
    """The one serialisation of a key: :func:`canonical` data, keys sorted, no spaces."""
    return _dumps(canonical(value))


def _dumps(data: Any) -> str:
    """JSON of data already in :func:`canonical` form: keys sorted, no spaces."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def key_of(key_fields: dict[str, Any]) -> str:
    """sha256 of :func:`canonical_json` of a request's key fields (hex)."""
    return sha256_text(canonical_json(key_fields))


def _float(value: Any, where: str) -> float:
    x = _number(value, where)
    if x is None:
        raise ConfigError(f"{where} must be a number, got {value!r}")
    return float(x)


def _int(value: Any, where: str) -> int:
    x = _number(value, where)
    if x is None or not float(x).is_integer():
        raise ConfigError(f"{where} must be an integer, got {value!r}")
    return int(x)


# ----------------------------------------------------------------------------- requests

def decoding_label(temperature: float, top_p: float) -> str:
    """``t0.2_p0.9``: the one id of a decoding regime (tables, cards, test ids)."""
    return f"t{float(temperature):g}_p{float(top_p):g}"


@dataclass(frozen=True)
class Decoding:
    """Decoding settings; numbers are normalised on construction (``temperature=1``
    and ``temperature=1.0`` are the same decoding, a numpy scalar a plain number)."""
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    reasoning_effort: str | None = None   # litellm's reasoning_effort ("low", "medium", "high")
    #: litellm's thinking={"type": "enabled", "budget_tokens": N}
    thinking_budget: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperature", _float(self.temperature, "temperature"))
        object.__setattr__(self, "top_p", _float(self.top_p, "top_p"))
        object.__setattr__(self, "max_tokens", _int(self.max_tokens, "max_tokens"))

    def key_fields(self) -> dict[str, Any]:
        """The decoding as hashed into a request key: the reasoning settings only when set."""
        d = {"temperature": self.temperature, "top_p": self.top_p,
             "max_tokens": self.max_tokens}
        for name in ("reasoning_effort", "thinking_budget"):
            if getattr(self, name) is not None:
                d[name] = getattr(self, name)
        return d


@dataclass(frozen=True)
class Request:
    messages: tuple[Message, ...]
    decoding: Decoding = Decoding()
    seed: int = 0
    repeat: int = 0
    backend: str = "replay"
    model: str = ""
    # transport: where to send it (None: the backend's own); not part of the key
    api_base: str | None = field(default=None, compare=False, hash=False)
    kind: str = "generate"                  # a registered kind (models.requests.kinds)
    choices: tuple[str, ...] = ()
    repeat_mode: RepeatMode = "calls"
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    prompt_format: str | None = None       # None: the default (auto)
    answer_prefix: str | None = None       # None: the default ("Answer: (")
    letter_rule: str | None = None         # logprobs mode: how letters are read (repeat_modes)
    #: structured output asked of the provider: the ``response_format`` object as
    #: canonical JSON text (a judge's JSON schema); None: free text, left out of the key
    response_format: str | None = None
    #: a loglikelihood request's text: the continuation scored after the context
    #: (None for every other kind, and then left out of the key)
    context: str | None = None
    continuation: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", _int(self.seed, "seed"))
        object.__setattr__(self, "repeat", _int(self.repeat, "repeat"))
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "choices", tuple(self.choices))
        check_request(self)

    def key_fields(self) -> dict[str, Any]:
        """The fields hashed into the key (canonical form): all that can change the
        output and is asked for, not how or where it is sent. Reasoning settings and a
        repeat mode other than ``calls``, a ``letter_rule``, a prompt format other than
        ``chat`` and an answer prefix other than the default (where one is used) enter
        only when set, so keys of runs that use none of them are unchanged."""
        fields = {
            "backend": self.backend,
            "model": self.model,
            "kind": self.kind,
            "messages": [[m.role, m.content] for m in self.messages],
            "choices": list(self.choices),
            "decoding": self.decoding.key_fields(),
            "seed": self.seed,
            "repeat": self.repeat,
            "repeat_mode": None if self.repeat_mode == "calls" else self.repeat_mode,
            **self._format_fields(),
            "letter_rule": self.letter_rule,
            "response_format": self.response_format,
            "context": self.context,
            "continuation": self.continuation,
        }
        return _plain_canonical(fields) or canonical(fields)

    def _format_fields(self) -> dict[str, Any]:
        """``{prompt_format, answer_prefix}`` as the key holds them (None: left out)."""
        return request_key_fields(self)

    def key(self) -> str:
        # computed once per request (the request is frozen; meta is not part of the key)
        cached = self.__dict__.get("_key")
        if cached is None:
            cached = sha256_text(_dumps(self.key_fields()))   # key_fields is canonical
            object.__setattr__(self, "_key", cached)
        return cached

    def prompt_key(self) -> str:
        """Identity of the prompt without the repeat index and seed: requests that
        differ only in those share one forward pass in the transformers backend, which
        also seeds its sampling streams with it.

        Its formula is frozen, because every sampled answer of a recording depends on
        it: sha256 of ``json.dumps(f, sort_keys=True, separators=(",", ":"),
        ensure_ascii=False)`` with ``f = {api_base: None, backend, choices, decoding:
        {max_tokens (int), temperature, top_p (floats)}, kind, messages, model}`` (the
        layout of the schema-1 request key without seed and repeat). The numbers are
        :class:`Decoding`'s normalised ones, so ``temperature=1`` samples as ``1.0``.
        Reasoning settings, a repeat mode other than ``calls``, and the key's
        ``prompt_format``, ``answer_prefix``, ``letter_rule``, ``response_format``,
        ``context`` and ``continuation`` are added only when set."""
        cached = self.__dict__.get("_prompt_key")
        if cached is None:
            f = {"api_base": None, "backend": self.backend, "choices": list(self.choices),
                 "decoding": self.decoding.key_fields(), "kind": self.kind,
                 "messages": [[m.role, m.content] for m in self.messages],
                 "model": self.model}
            if self.repeat_mode != "calls":
                f["repeat_mode"] = self.repeat_mode
            extra = {**self._format_fields(), "letter_rule": self.letter_rule,
                     "response_format": self.response_format, "context": self.context,
                     "continuation": self.continuation}
            f.update({k: v for k, v in extra.items() if v is not None})
            blob = json.dumps(f, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            cached = sha256_text(blob)
            object.__setattr__(self, "_prompt_key", cached)
        return cached

    def with_(self, **changes: Any) -> "Request":
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d.update(changes)
        return Request(**d)


def chat(system: str | None, user: str) -> tuple[Message, ...]:
    """Messages for a system prompt (optional) and one user turn."""
    msgs = [] if not system else [Message("system", system)]
    msgs.append(Message("user", user))
    return tuple(msgs)


@dataclass
class Response:
    key: str
    text: str = ""
    answer: int | None = None                   # parsed choice index; None = invalid / n.a.
    letter_probs: list[float] | None = None     # P(letter) for each choice, when known
    #: P(any letter) over the full vocabulary at T=1, when known
    letter_mass: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None     # includes reasoning_tokens (as providers bill them)
    reasoning_tokens: int | None = None      # of completion_tokens, spent reasoning (when reported)
    finish_reason: str | None = None         # the provider's, when one was given
    latency_s: float | None = None
    cost_usd: float | None = None
    status: Status = "ok"
    error: str = ""
    #: a loglikelihood response: ln P(continuation | context), summed over its tokens
    logprob: float | None = None
    continuation_tokens: int | None = None   # the continuation's tokens (as scored)
    is_greedy: bool | None = None            # every one the most likely at its position

    #: fields stored only when set (added with a request kind: a row of another kind,
    #: and every row stored before they existed, stays as it was)
    SPARSE: ClassVar[tuple[str, ...]] = ("logprob", "continuation_tokens", "is_greedy")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Response":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)
