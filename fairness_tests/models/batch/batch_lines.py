"""One provider batch line: which batch API a model goes to, the line's body (exactly what
the litellm backend would send directly), reading its result, and the batch price.

Route (:func:`batch_route`): litellm's provider of the model decides. OpenAI-format batch
APIs (litellm's ``create_file(purpose="batch")`` / ``create_batch`` / ``retrieve_batch`` /
``file_content``): ``openai/`` and ``text-completion-openai/`` (OpenAI, or any
OpenAI-compatible ``--api-base`` that implements the Files and Batches endpoints),
``azure/`` and ``litellm_proxy/``. Chat models go to ``/v1/chat/completions``, completion
models to ``/v1/completions``. Anthropic's Message Batches: litellm 1.110 can retrieve
them but not create them, so ``--batch`` refuses an ``anthropic/`` model at the start and
names the alternative; any other provider has no batch API litellm can drive: refused
at the start too (exit 2), never after an upload.

Body (:func:`line_body`): the litellm backend's own keyword arguments for the request
(:func:`~.backends.litellm_request.call_kwargs`: decoding, the provider seed of (seed,
repeat), reasoning, extra parameters), the prompt rendered in the same format, ``stop``,
and the repeat mode's ``n`` or ``logprobs``/``top_logprobs`` (:mod:`.repeat_modes`); the
model id without litellm's provider prefix; parameters litellm would drop for the model
(``drop_params``) dropped. A line's result body (an OpenAI chat completion or completion
object) is read by the backend's own reader (:func:`~.backends.litellm_replies.read_reply`),
so a batch answer is stored exactly as the same answer asked directly would be; only
``latency_s`` (None: a batch has no per-request latency) and ``cost_usd`` (the batch
price) differ.

Batch price (:func:`batch_price`): litellm's local cost map's
``input_cost_per_token_batches`` / ``output_cost_per_token_batches`` where it has them;
else, for a provider that documents a flat batch discount (:data:`DOCUMENTED_DISCOUNT`:
OpenAI and Azure OpenAI, 50%), that fraction of the direct price; else unknown (said so,
never guessed). ``cost = prompt_tokens x input price + completion_tokens x output price``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.backends.cost import model_price
from fairness_tests.models.backends.litellm_errors import Retryable, Unsupported
from fairness_tests.models.backends.litellm_import import load_litellm
from fairness_tests.models.backends.litellm_replies import Reply, read_reply
from fairness_tests.models.backends.litellm_request import call_kwargs
from fairness_tests.models.requests import prompt_format as PF
from fairness_tests.models.requests.repeat_modes import LOGPROBS_MAX_TOKENS
from fairness_tests.models.requests.request import Request, Response

#: litellm provider -> the ``custom_llm_provider`` its files and batches calls take
ROUTES = {"openai": "openai", "text-completion-openai": "openai", "azure": "azure",
          "azure_text": "azure", "litellm_proxy": "litellm_proxy"}
#: providers whose documentation states a flat batch discount (fraction of the direct price)
DOCUMENTED_DISCOUNT = {"openai": 0.5, "text-completion-openai": 0.5, "azure": 0.5,
                       "azure_text": 0.5}
COMPLETION_WINDOW = "24h"
#: OpenAI's limits per batch: requests and input file size
MAX_LINES = 50_000
MAX_BYTES = 100 * 1024 * 1024
_CORE = ("model", "messages", "prompt", "reasoning_effort", "thinking")
_SENT = ("temperature", "top_p", "max_tokens", "seed", "reasoning_effort", "thinking")
_TRANSPORT = ("api_base", "api_key", "timeout", "num_retries", "max_retries", "drop_params",
              "client")


@dataclass(frozen=True)
class Route:
    """Where a model's batch lines go: litellm's provider and model name, the
    ``custom_llm_provider`` of the files/batches calls, the endpoint."""
    provider: str
    name: str
    calls_provider: str
    endpoint: str


def batch_route(model: str) -> Route:
    """The batch route of ``model`` (a litellm model string); a :class:`ConfigError`
    naming ``--batch`` for a provider without a batch API litellm can drive."""
    litellm = load_litellm()
    try:
        name, provider = litellm.get_llm_provider(model)[:2]
    except Exception as exc:
        raise ConfigError(f"litellm does not know the provider of {model!r} ({exc})",
                          key="--batch") from None
    if provider == "anthropic":
        raise ConfigError(f"litellm {_version()} cannot create Anthropic Message Batches "
                          f"(it only retrieves them): run {model!r} without --batch (with "
                          f"--repeat-mode n to cut requests), or reach it through an "
                          f"OpenAI-format batch API (a litellm proxy: --model "
                          f"litellm_proxy/...)", key="--batch")
    if provider not in ROUTES:
        raise ConfigError(f"provider {provider!r} of {model!r} has no batch API that litellm "
                          f"can drive (batch routes: {', '.join(sorted(ROUTES))}); run "
                          f"without --batch", key="--batch")
    endpoint = "/v1/completions" if provider in ("text-completion-openai", "azure_text") \
        else "/v1/chat/completions"
    return Route(provider, name, ROUTES[provider], endpoint)


def _version() -> str:
    from importlib.metadata import version  # noqa: PLC0415  only for the message
    return version("litellm")


@dataclass(frozen=True)
class Line:
    """One batch line: the unit's requests, its JSONL record, and how to read its result."""
    reqs: list[Request]
    record: dict[str, Any]
    text_mode: bool
    max_tokens: int
    rendered: PF.Rendered

    @property
    def custom_id(self) -> str:
        return self.record["custom_id"]

    def jsonl(self) -> bytes:
        return (json.dumps(self.record, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False) + "\n").encode("utf-8")


def line_of(backend: Any, reqs: list[Request], route: Route,
            supported: set[str] | None) -> Line:
    """The batch line of the unit ``reqs`` (one request, or the repeats of one prompt
    asked as one ``n`` / ``logprobs`` request) for the litellm ``backend``: the body it
    would send directly (see the module docstring); ``custom_id`` is the first request's
    key. ``supported``: litellm's supported parameters of the model (None: unknown)."""
    req = reqs[0]
    model, base = backend._model_and_base(req)
    kw = call_kwargs(req, model, base, timeout_s=backend.timeout_s, api_key=None,
                     extra=backend.extra)
    text_mode = route.endpoint == "/v1/completions"
    fmt, prefix = backend._prompt_of(req, model)
    rendered = PF.render(req.messages, fmt, prefix, req.kind, text_mode)
    body: dict[str, Any] = {"model": route.name}
    if text_mode:
        body["prompt"] = rendered.prompt
    else:
        body["messages"] = rendered.messages
    body.update({k: kw[k] for k in _SENT if k in kw})
    if rendered.stop and "stop" not in backend.extra:
        body["stop"] = rendered.stop
    if req.repeat_mode == "n":
        body["n"] = len(reqs)
    elif req.repeat_mode == "logprobs":
        body["max_tokens"] = min(int(req.decoding.max_tokens), LOGPROBS_MAX_TOKENS)
        k = backend._top_k(model, base)
        body.update({"logprobs": k} if text_mode else {"logprobs": True, "top_logprobs": k})
    body.update({k: v for k, v in backend.extra.items() if k not in _TRANSPORT})
    if supported is not None:
        body = {k: v for k, v in body.items() if k in _CORE or k in supported}
    record = {"custom_id": req.key(), "method": "POST", "url": route.endpoint, "body": body}
    return Line(list(reqs), record, text_mode, int(body.get("max_tokens") or 0), rendered)


def supported_params(route: Route) -> set[str] | None:
    """litellm's supported OpenAI parameters of the route's model (None: unknown)."""
    try:
        return set(load_litellm().get_supported_openai_params(
            model=route.name, custom_llm_provider=route.provider) or ())
    except Exception:
        return None


def _ns(value: Any) -> Any:
    """JSON data as attribute objects (what litellm's reply objects look like to
    :func:`read_reply`); ``logprobs`` stay JSON (the reader takes both, and a completion's
    ``top_logprobs`` entries are token -> logprob maps)."""
    if isinstance(value, dict):
        return SimpleNamespace(**{k: v if k == "logprobs" else _ns(v)
                                  for k, v in value.items()})
    if isinstance(value, list):
        return [_ns(v) for v in value]
    return value


def read_line(backend: Any, line: Line, body: dict[str, Any],
              price: "BatchPrice | None") -> Reply:
    """The responses of ``line`` from its result ``body`` (a completion object), read as
    a direct reply is, billed at ``price`` (None: unknown). A body without choices, or a
    reply that does not honour the repeat mode, is an error for every request of the line
    (the reason in ``error``; a re-run asks them again); a repeat mode not honoured is
    remembered in the store as a direct reply's is, so the next run falls back to
    ``calls`` before submitting anything."""
    litellm = load_litellm()
    try:
        reply = read_reply(litellm, line.reqs, _ns(body), line.text_mode, line.max_tokens,
                           line.rendered, backend.secrets(), backend.parse_choice)
    except (Retryable, Unsupported) as exc:
        if isinstance(exc, Unsupported):       # remembered: the next run falls back at once
            model, base = backend._model_and_base(line.reqs[0])
            backend._learn(model, base, exc.feature or line.reqs[0].repeat_mode, False,
                           reason=f"{exc} (in a batch line)")
        return Reply([failed(q, f"batch line {line.custom_id[:12]}: {exc}") for q in line.reqs],
                     None, None, None, None, None)
    cost = None if price is None else price.cost(reply.prompt_tokens, reply.completion_tokens)
    k = len(reply.responses)
    for r in reply.responses:
        r.latency_s = None
        r.cost_usd = None if cost is None else cost / k
    return Reply(reply.responses, reply.prompt_tokens, reply.completion_tokens,
                 reply.reasoning_tokens, cost, reply.letters)


def failed(req: Request, why: str) -> Response:
    """An error row: what a batch could not give (asked again on a re-run)."""
    return Response(key=req.key(), status="error", error=why)


@dataclass(frozen=True)
class BatchPrice:
    """Per-token batch prices, where they come from, and the discount against the direct
    price (``"50%"``, or ``"unknown"``)."""
    input_per_token: float
    output_per_token: float
    source: str
    discount: str

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        if prompt_tokens is None and completion_tokens is None:
            return None
        return ((prompt_tokens or 0) * self.input_per_token
                + (completion_tokens or 0) * self.output_per_token)


def batch_price(model: str) -> BatchPrice | None:
    """The batch price of ``model`` (see the module docstring); None when unknown."""
    direct = model_price(model)
    if direct is None:
        return None
    litellm = load_litellm()
    try:
        info = litellm.get_model_info(model)
        inp, out = info.get("input_cost_per_token_batches"), info.get(
            "output_cost_per_token_batches")
        provider = litellm.get_llm_provider(model)[1]
    except Exception:
        inp = out = provider = None
    if inp is not None and out is not None:
        return BatchPrice(float(inp), float(out), direct.source.replace(
            "local cost map", "local cost map (batch prices)"),
            _discount(direct.input_per_token, float(inp)))
    fraction = DOCUMENTED_DISCOUNT.get(provider or "")
    if fraction is None:
        return None
    return BatchPrice(direct.input_per_token * fraction, direct.output_per_token * fraction,
                      f"{direct.source} x {fraction:g} ({provider}'s documented batch "
                      f"discount)", f"{100 * (1 - fraction):g}%")


def _discount(direct: float, batch: float) -> str:
    """``"50%"``: how much less than ``direct`` the ``batch`` price is."""
    if direct <= 0:
        return "unknown"
    return f"{100 * (1 - batch / direct):.3g}%"
