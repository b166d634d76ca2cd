"""What a server can do, learned from its own answers and remembered in the store.

An API backend learns a server's capabilities by asking (the first grouped request of
a repeat mode goes alone, :mod:`.repeat_modes`) and reads the answer:

- ``n``: the reply has as many choices as asked (supported), or fewer, or an error
  naming the parameter (unsupported);
- ``logprobs``: the reply carries log-probabilities (supported), or none, or an error
  naming them (llama.cpp: ``HTTP 500 "logprobs is not supported for models created
  with logits_all=False"``) (unsupported);
- ``top_logprobs``: the most candidates the server gives per position, from an error
  that names the limit (OpenAI: ``"Invalid 'top_logprobs': integer above maximum
  value. Expected a value <= 20, but got 25 instead."``; vLLM: ``"Requested sample
  logprobs of 25, which is greater than max allowed: 20"``): ``value`` is the limit;
- ``structured_output``: an error naming ``response_format`` / ``json_schema``
  (unsupported; this backend sends it only when asked to through ``extra``);
- ``echo``: an error naming it, for a loglikelihood request (whose server must echo
  the prompt's log-probabilities; the backend then stops with a one-line error, and
  keeps no record).

Each fact is a :class:`CapabilityRecord` keyed by (model, server, feature): the
litellm model string (the endpoint is part of it: ``openai/x`` and
``text-completion-openai/x`` are different endpoints) and the server's ``api_base``
(credentials masked; ``""`` for the provider's own endpoint). The runner hands a
backend the records of the store before it asks and stores what the backend learned
after (``store.capabilities()`` / ``store.remember_capabilities()``), so a re-run
against a server that rejected ``n`` falls back at once, without probing again.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

Feature = Literal["n", "logprobs", "top_logprobs", "structured_output"]
FEATURES: tuple[Feature, ...] = get_args(Feature)


@dataclass(frozen=True)
class CapabilityRecord:
    """One fact about a server: ``supported`` (None: only a ``value`` is known),
    ``value`` (the ``top_logprobs`` limit), ``reason`` (the server's words, or what the
    reply lacked), ``updated_at`` (seconds since the epoch)."""
    model: str
    server: str
    feature: str
    supported: bool | None
    value: int | None = None
    reason: str = ""
    updated_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- reading a server's error -----------------------------------------------------

_UNSUPPORTED_WORDS = re.compile(
    r"not (?:yet )?supported|unsupported|not available|not allowed|does not support|"
    r"doesn't support|cannot be used|can not be used|not enabled|disabled|only supports?|"
    r"must be 1\b|is ignored|not implemented|invalid|unknown (?:parameter|field|argument)|"
    r"unrecognized|unexpected", re.IGNORECASE)
_NAMES: dict[str, re.Pattern] = {
    "top_logprobs": re.compile(r"\btop_logprobs\b|\bsample logprobs\b", re.IGNORECASE),
    "logprobs": re.compile(r"\blogprobs?\b|\blog[- ]?probabilit", re.IGNORECASE),
    "n": re.compile(r"['\"`]n['\"`]|\bparameter n\b|\bn\s*(?:must|should|can ?not|>|=|"
                    r"is not|not supported)|\bn > 1\b|\bmultiple (?:choices|completions)\b",
                    re.IGNORECASE),
    "echo": re.compile(r"\becho\b", re.IGNORECASE),
    "structured_output": re.compile(r"response_format|json_schema|structured output|"
                                    r"guided_json|guided_decoding|json mode", re.IGNORECASE),
}
_LIMIT = re.compile(r"(?:<=|less than or equal to|at most|no more than|max(?:imum)?"
                    r"(?: value)?(?: allowed)?(?: is| of)?:?|between \d+ and)\s*(\d+)",
                    re.IGNORECASE)


def named_feature(message: str, sent: set[str]) -> str | None:
    """The feature among ``sent`` (:data:`FEATURES`) that the error ``message`` names, or
    None. ``top_logprobs`` is reported for a limit on the number of candidates (OpenAI's
    and vLLM's wording), ``logprobs`` for log-probabilities as such."""
    if "top_logprobs" in sent and _NAMES["top_logprobs"].search(message) \
            and limit_in(message) is not None:
        return "top_logprobs"
    for feature in ("logprobs", "n", "structured_output", "echo"):
        if feature in sent and _NAMES[feature].search(message):
            if feature == "logprobs" and "top_logprobs" in sent and limit_in(message) is not None:
                return "top_logprobs"
            return feature
    return None


def says_unsupported(message: str) -> bool:
    """Whether ``message`` says something is not supported (or not valid) rather than
    failing for a passing reason."""
    return bool(_UNSUPPORTED_WORDS.search(message)) or limit_in(message) is not None


def limit_in(message: str) -> int | None:
    """The upper limit a server names in ``message`` (``<= 20``, ``max allowed: 20``), or None."""
    m = _LIMIT.search(message)
    return int(m.group(1)) if m else None
