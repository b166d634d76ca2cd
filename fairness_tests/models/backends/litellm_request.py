"""What the litellm backend sends: the model and server of a request, litellm's keyword
arguments, and the provider seed.

Provider seeds: repeat ``r`` of a request with seed ``s`` is sent with the seed
:func:`provider_seed` ``(s, r)`` (Cantor's pairing of ``zigzag(s)`` and ``r``), one
distinct provider seed for each (seed, repeat) pair. Reasoning
(``Decoding.reasoning_effort`` / ``thinking_budget``) is passed as litellm's
``reasoning_effort`` / ``thinking={"type": "enabled", "budget_tokens": N}``, which litellm
maps to the provider's parameters.
"""
from __future__ import annotations

import json
import os
from typing import Any

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.requests.request import Request

PROVIDER_SEED = "cantor(zigzag(seed), repeat)"
_MAX_SEED = 2 ** 63 - 1


def provider_seed(seed: int, repeat: int) -> int:
    """The seed sent to the provider for repeat ``repeat`` of a request with ``seed``:
    Cantor's pairing ``(a + r)(a + r + 1) / 2 + r`` of ``a = zigzag(seed)`` (``2s`` for
    ``s >= 0``, ``-2s - 1`` below) and ``r = repeat``: a bijection, so no two
    (seed, repeat) pairs share a provider seed (``seed + repeat`` made (0, 1) and (1, 0)
    the same request)."""
    if repeat < 0:
        raise ConfigError(f"repeat must be >= 0, got {repeat}")
    a = 2 * seed if seed >= 0 else -2 * seed - 1
    value = (a + repeat) * (a + repeat + 1) // 2 + repeat
    if value > _MAX_SEED:
        raise ConfigError(f"seed {seed} with repeat {repeat} gives a provider seed above "
                          f"2**63 - 1; use a smaller seed")
    return value


def model_and_base(req: Request, model: str | None, api_base: str | None
                   ) -> tuple[str, str | None]:
    """The litellm model string and server ``req`` goes to: its own, else the backend's
    (``model``, ``api_base``); a bare model name with a server is ``openai/<name>``."""
    name = req.model or model or ""
    base = req.api_base or api_base
    if base and "/" not in name:
        name = f"openai/{name}"
    return name, base


def call_kwargs(req: Request, model: str, base: str | None, *, timeout_s: float,
                api_key: str | None, extra: dict[str, Any]) -> dict[str, Any]:
    """litellm's keyword arguments for ``req`` sent to ``model`` at ``base``: decoding,
    the provider seed of (seed, repeat), no retries of litellm's own (this backend
    retries), parameters litellm cannot send dropped, the reasoning settings, the key
    (a placeholder for a local OpenAI-compatible server), then ``extra``."""
    kw: dict[str, Any] = {
        "model": model, "temperature": req.decoding.temperature,
        "top_p": req.decoding.top_p, "max_tokens": req.decoding.max_tokens,
        "seed": provider_seed(req.seed, req.repeat), "timeout": timeout_s,
        "num_retries": 0, "max_retries": 0, "drop_params": True,
    }
    if req.decoding.reasoning_effort is not None:
        kw["reasoning_effort"] = req.decoding.reasoning_effort
    if req.decoding.thinking_budget is not None:
        kw["thinking"] = {"type": "enabled",
                          "budget_tokens": int(req.decoding.thinking_budget)}
    if base:
        kw["api_base"] = base
    if api_key:
        kw["api_key"] = api_key
    elif base and model.startswith(("openai/", "text-completion-openai/")) \
            and not os.environ.get("OPENAI_API_KEY"):
        kw["api_key"] = "not-needed"          # local servers ignore it; the client wants one
    if req.response_format is not None:
        kw["response_format"] = json.loads(req.response_format)
    kw.update(extra)
    return kw
