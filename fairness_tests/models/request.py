"""One request/response model for both protocols.

A :class:`Request` is everything that can change a model's output; its
:meth:`Request.key` (sha256 of a canonical JSON of those fields) is the response
store's primary key. ``meta`` carries the protocol's columns (dataset, item id,
slice, family, ...) so records can be joined back; it is NOT part of the key.

Kinds:
- ``"choice"``: a multiple-choice question; ``choices`` are the answer letters
  (e.g. ``("a", "b", "c")``); the response carries the parsed answer index and,
  when the backend can give them, the letters' probabilities.
- ``"generate"``: open-ended generation; the response carries the text.

``repeat_mode`` (see :mod:`fairness_tests.models.repeat_modes`) says how the
repeats of one prompt are asked of an API: ``"calls"`` (one request each),
``"n"`` (one request with ``n`` choices) or ``"logprobs"`` (one request whose
``top_logprobs`` give the letter distribution the repeats are drawn from). It
changes how an answer is produced, so it is part of the key; like the reasoning
settings of :class:`Decoding` it enters the key only when not at its default,
so the keys of requests that do not use it are unchanged.

Statuses: ``ok``; ``error`` (asked again on a re-run); ``refused`` (the
provider refused); ``truncated`` (an empty answer with finish reason
``length``: the token budget went to reasoning; a re-run with a larger
``max_tokens`` is a different request).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["ok", "error", "refused", "truncated"]
STATUSES = ("ok", "error", "refused", "truncated")


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class Decoding:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    reasoning_effort: str | None = None   # litellm's reasoning_effort ("low", "medium", "high")
    thinking_budget: int | None = None    # litellm's thinking={"type": "enabled", "budget_tokens": N}

    def label(self) -> str:
        """Readable id, e.g. ``t0.7_p0.95``."""
        return f"t{self.temperature:g}_p{self.top_p:g}"

    def key_fields(self) -> dict[str, Any]:
        """The decoding as hashed into a request key: the reasoning settings only when set."""
        d = asdict(self)
        for name in ("reasoning_effort", "thinking_budget"):
            if d[name] is None:
                del d[name]
        return d


@dataclass(frozen=True)
class Request:
    messages: tuple[Message, ...]
    decoding: Decoding = Decoding()
    seed: int = 0
    repeat: int = 0
    backend: str = "replay"
    model: str = ""
    api_base: str | None = None
    kind: Literal["choice", "generate"] = "generate"
    choices: tuple[str, ...] = ()
    repeat_mode: str = "calls"
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def key_fields(self) -> dict[str, Any]:
        """The fields hashed into the key: all that can change the output."""
        fields = {
            "backend": self.backend,
            "model": self.model,
            "api_base": self.api_base or None,
            "kind": self.kind,
            "messages": [[m.role, m.content] for m in self.messages],
            "choices": list(self.choices),
            "decoding": self.decoding.key_fields(),
            "seed": int(self.seed),
            "repeat": int(self.repeat),
        }
        if self.repeat_mode != "calls":
            fields["repeat_mode"] = self.repeat_mode
        return fields

    def key(self) -> str:
        # computed once per request (the request is frozen; meta is not part of the key)
        cached = self.__dict__.get("_key")
        if cached is None:
            blob = json.dumps(self.key_fields(), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            cached = hashlib.sha256(blob.encode("utf-8")).hexdigest()
            object.__setattr__(self, "_key", cached)
        return cached

    def prompt_key(self) -> str:
        """Key of the prompt without the repeat index (and seed): requests that differ
        only in repeat share one forward pass in the transformers backend."""
        cached = self.__dict__.get("_prompt_key")
        if cached is None:
            f = self.key_fields()
            f.pop("repeat")
            f.pop("seed")
            blob = json.dumps(f, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            cached = hashlib.sha256(blob.encode("utf-8")).hexdigest()
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
    letter_mass: float | None = None            # P(any letter) over the full vocabulary at T=1, when known
    prompt_tokens: int | None = None
    completion_tokens: int | None = None     # includes reasoning_tokens (as providers bill them)
    reasoning_tokens: int | None = None      # of completion_tokens, spent reasoning (when reported)
    finish_reason: str | None = None         # the provider's, when one was given
    latency_s: float | None = None
    cost_usd: float | None = None
    status: Status = "ok"
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Response":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)
