"""The litellm backend: any provider litellm supports, and any OpenAI-compatible
server (vLLM, Ollama, llama.cpp server, ``transformers serve``) through ``api_base``.

Model strings are litellm's: ``openai/<model>`` for an OpenAI-compatible chat
endpoint, ``text-completion-openai/<model>`` for plain ``/v1/completions``, or any
provider prefix (``anthropic/...``, ``gemini/...``). A bare model name with an
``api_base`` is sent as ``openai/<model>``.

Prompt format (``prompt_format``, ``answer_prefix``; :mod:`~fairness_tests.models.prompt_format`):
by default (``auto``) a chat endpoint gets the messages as given and a completion
endpoint the local backend's prompt: the turns in Gemma's format (a model id naming
Gemma) or as ``role: content`` lines, the model turn opened, and for a multiple-choice
request the answer prefix ``"Answer: ("`` with ``stop`` at ``")"`` and newline, so a
base model answers with the letter. The resolved format and a non-default prefix are
part of the request key (:meth:`LiteLLMBackend.request_fields`, applied by the runner).

Limits (all bounded, nothing can loop for ever):

- ``max_concurrency`` requests in flight (an asyncio semaphore);
- ``rpm`` / ``tpm``: at most this many request starts / tokens per minute, for
  every attempt (:class:`~fairness_tests.models.ratelimit.RateLimiter`: starts
  spaced ``60/rpm`` seconds apart); with ``rate_limit_path`` the caps hold across
  every process that uses that file (the audit puts it beside the store);
- ``timeout_s`` per attempt (litellm's timeout, and an asyncio deadline a bit
  longer as a backstop);
- ``max_retries`` per request, with exponential backoff
  ``min(backoff_max_s, backoff_base_s * 2**attempt)`` times a jitter factor in
  [0.5, 1.0), or the server's ``Retry-After`` when it gives one (capped at
  ``max_retry_after_s``);
- ``retry_budget``: retries over the whole life of the backend; once spent,
  a failure is final at once.

Retried: 429, 5xx, timeouts, connection errors, malformed replies, and a reply
with no content at all (``null`` content, no refusal). Not retried: other 4xx, and
an error (any status but 408/429) that names a parameter the request sent as not
supported (``logprobs``, ``n``, ``response_format``; :mod:`~fairness_tests.models.capabilities`):
the first unit of a repeat mode then raises
:class:`~fairness_tests.models.repeat_modes.RepeatModeUnsupported` at once (the audit
falls back to ``calls``), and the fact is remembered per model and server; an error
naming a ``top_logprobs`` limit is asked again at once with that limit (not counted
as a retry).
A request that finally fails becomes ``Response(status="error")`` with the
(scrubbed) error text; a provider refusal (``finish_reason ==
"content_filter"``, a ``refusal`` message, or litellm's
``ContentPolicyViolationError``) becomes ``status="refused"``. An empty string
content is a valid (empty) answer: ``status="ok"``, ``text=""``.

Provider seeds: repeat ``r`` of a request with seed ``s`` is sent with the seed
:func:`provider_seed` ``(s, r)`` (Cantor's pairing of ``zigzag(s)`` and ``r``), one
distinct provider seed for each (seed, repeat) pair.

Fingerprint (:meth:`LiteLLMBackend.fingerprint`): the backend, how messages are
sent when the request's key names no prompt format (chat: as given;
``text-completion-*``: contents joined by a blank line; any other format is named in
the key), the provider-seed scheme, and a hash of any extra provider parameters. The
server's own chat template and weights are the provider's: the model id in the
key names them.

Keys come from ``api_key`` or the environment (litellm reads the provider's
variable, e.g. ``OPENAI_API_KEY``); they are handed only to litellm, never put
in a response, the store or a log line (error texts are scrubbed).

Repeat modes (``Request.repeat_mode``, :mod:`fairness_tests.models.repeat_modes`):
the requests of one prompt that differ only in ``repeat`` are one *unit*:
``calls`` asks each on its own; ``n`` asks the unit once with ``n`` = its size
(choice ``i`` answers its ``i``-th repeat); ``logprobs`` asks it once with
``logprobs``/``top_logprobs`` and draws every repeat from the letter
distribution (a prompt whose letter mass is below ``MIN_LETTER_MASS`` is invalid).
The first unit of a mode the backend has not yet seen honoured (in this process, or
in the store's capability records the runner hands it) goes alone; a reply with fewer
choices than ``n``, without log-probabilities, or an error naming the parameter,
raises :class:`~fairness_tests.models.repeat_modes.RepeatModeUnsupported`
(naming the provider and the reason) before anything else is asked or stored, and
the fact is remembered (:meth:`LiteLLMBackend.learned_capabilities`): a later run
raises it before any request. A mode litellm itself would not send for the model
(``get_supported_openai_params``) raises the same before any request. Tokens and cost of a unit are billed once and
shared among its responses (``prompt_tokens`` on the first; completion tokens
and cost split evenly, remainders to the first), so sums over responses are
what the provider billed.

Reasoning (``Decoding.reasoning_effort`` / ``thinking_budget``) is passed as
litellm's ``reasoning_effort`` / ``thinking={"type": "enabled", "budget_tokens":
N}``, which litellm maps to the provider's parameters; a model for which litellm
would drop them is a :class:`~fairness_tests.core.errors.ConfigError`, not a silent
no-op. ``usage.completion_tokens_details.reasoning_tokens`` is kept as
``Response.reasoning_tokens`` (and in :meth:`totals`). An empty answer with
``finish_reason == "length"`` becomes ``status="truncated"`` (the budget went to
reasoning), not retried.

Budget: with ``max_cost_usd`` no new request starts once the cost so far
(litellm's ``completion_cost`` of each reply) reaches it; requests in flight
finish and are reported, the rest are not asked, and :meth:`answer` raises
:class:`~fairness_tests.models.cost.BudgetReached` (everything reported is
already stored by the runner, so a re-run resumes). The cost can pass the
budget by at most the replies in flight (``max_concurrency``).

Cost: litellm's ``completion_cost`` of each reply; a model litellm has no price for
costs ``None`` (unknown, never 0), and :meth:`LiteLLMBackend.totals` reports
``cost_usd`` None when any reply's cost was unknown (``cost_unknown_calls``).

HTTP clients: ``text-completion-openai/`` requests go through an ``AsyncOpenAI``
client this backend owns, one per event loop and server, closed when
:meth:`LiteLLMBackend.answer` returns (litellm 1.110 builds a new, never-closed
aiohttp session for each such request otherwise: the ``Unclosed client session``
warnings); litellm's cached clients of the loop are closed too.

litellm is imported lazily, with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (its
bundled price map, never the network) and ``LITELLM_OFFLINE_MODE=true`` (its
bundled tokenizers only), so that importing it never touches the network.
"""
from __future__ import annotations

import asyncio
import hashlib
import os
import random
import threading
import time
from typing import Any, Callable

from fairness_tests.core.errors import ConfigError
from fairness_tests.models import prompt_format as PF
from fairness_tests.models.backends.base import Capabilities, unknown_option
from fairness_tests.models.backends.litellm_errors import (
    LimitExceeded,
    Permanent,
    Refused,
    Retryable,
    Unsupported,
    classify,
)
from fairness_tests.models.backends.litellm_replies import from_choice, from_logprobs, share
from fairness_tests.models.capabilities import (
    CapabilityRecord,
)
from fairness_tests.models.cost import BudgetReached
from fairness_tests.models.litellm_import import load_litellm
from fairness_tests.models.ratelimit import RateLimiter, estimate_tokens
from fairness_tests.models.repeat_modes import (
    LOGPROBS_MAX_TOKENS,
    MIN_LETTER_MASS,
    TOP_LOGPROBS,
    RepeatModeUnsupported,
    units,
)
from fairness_tests.models.request import Request, Response, canonical_json
from fairness_tests.models.scrub import scrub, scrub_text

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


_OPTIONS = ("model", "api_base", "api_key", "max_concurrency", "rpm", "tpm", "rate_limit_path",
            "timeout_s", "max_retries", "retry_budget", "backoff_base_s", "backoff_max_s",
            "max_retry_after_s", "parse_choice", "seed", "extra", "max_cost_usd",
            "top_logprobs", "prompt_format", "answer_prefix")


class LiteLLMBackend:
    """See the module docstring. Options (all keyword except the first three):
    ``model``, ``api_base``, ``api_key``; limits ``max_concurrency``, ``rpm``, ``tpm``,
    ``rate_limit_path``, ``timeout_s``, ``max_retries``, ``retry_budget``,
    ``backoff_base_s``, ``backoff_max_s``, ``max_retry_after_s``, ``max_cost_usd``;
    answers ``parse_choice``, ``seed`` (backoff jitter), ``extra`` (provider
    parameters), ``top_logprobs`` (asked in the logprobs mode: :data:`TOP_LOGPROBS`,
    lowered to a server's named limit), ``prompt_format`` (:data:`PF.PROMPT_FORMATS`)
    and ``answer_prefix``. An unknown option is a :class:`ConfigError` naming it."""
    name = "litellm"

    def __init__(self, model: str | None = None, api_base: str | None = None,
                 api_key: str | None = None, *, max_concurrency: int = 8,
                 rpm: float | None = None, tpm: float | None = None,
                 rate_limit_path: str | os.PathLike | None = None,
                 timeout_s: float = 60.0, max_retries: int = 4,
                 retry_budget: int = 200, backoff_base_s: float = 0.5,
                 backoff_max_s: float = 30.0, max_retry_after_s: float = 60.0,
                 parse_choice: Callable[[Request, str], int | None] | None = None,
                 seed: int | None = None, extra: dict[str, Any] | None = None,
                 max_cost_usd: float | None = None, top_logprobs: int = TOP_LOGPROBS,
                 prompt_format: PF.PromptFormat = PF.DEFAULT_PROMPT_FORMAT,
                 answer_prefix: str = PF.DEFAULT_ANSWER_PREFIX,
                 **unknown: Any):
        unknown_option(self.name, unknown, _OPTIONS)
        self.model = model
        self.api_base = api_base
        self._api_key = api_key
        self.max_concurrency = max(1, int(max_concurrency))
        self.rpm = float(rpm) if rpm else None
        self.tpm = float(tpm) if tpm else None
        self.limiter = RateLimiter(rpm, tpm, rate_limit_path) if (rpm or tpm) else None
        self.timeout_s = float(timeout_s)
        self.max_retries = max(0, int(max_retries))
        self.retry_budget = max(0, int(retry_budget))
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_max_s = float(backoff_max_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self.parse_choice = parse_choice
        self.extra = dict(extra or {})
        self.max_cost_usd = float(max_cost_usd) if max_cost_usd is not None else None
        if isinstance(top_logprobs, bool) or not isinstance(top_logprobs, int) \
                or top_logprobs < 1:
            raise ConfigError(f"top_logprobs must be a positive integer, got {top_logprobs!r}",
                              key="top_logprobs")
        self.top_logprobs = int(top_logprobs)
        self.prompt_format = PF.check_format(prompt_format)
        self.answer_prefix = PF.check_prefix(answer_prefix)
        self._modes_seen: set[tuple[str, str | None, str]] = set()   # (model, base, mode) honoured
        self._known: dict[tuple[str, str, str], CapabilityRecord] = {}  # (model, server, feature)
        self._learned: list[CapabilityRecord] = []
        self._seen_models: dict[str, str | None] = {}                # model -> api_base asked
        self._clients: dict[tuple[int, str | None, str], Any] = {}   # (loop, base, key): client
        self._prefill_cache: dict[str, bool] = {}
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        # totals over the life of the backend
        self.retries_used = 0
        self.attempts = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.reasoning_tokens = 0
        self.cost_usd = 0.0                     # of the replies whose cost is known
        self.cost_unknown_calls = 0             # replies litellm could not price
        self.calls = 0                          # replies received (one per unit asked)
        self.truncated = 0
        self.letter_prompts = 0                 # logprobs units read
        self.low_mass_prompts = 0               # ... of which below MIN_LETTER_MASS (invalid)
        self.top_logprobs_returned = 0          # most candidates a reply gave at a position
        self.sleeps: list[float] = []          # backoff waits taken (for tests / logs)

    # -- interface ------------------------------------------------------------
    @property
    def capabilities(self) -> Capabilities:
        """``n`` / ``logprobs``: as learned for ``model`` at ``api_base`` (None: not yet
        known, detected on first use); no provider batch jobs, no prefix sharing, not a
        replay; a remote server."""
        def known(feature: str) -> bool | None:
            if not self.model:
                return None
            model, base = self._model_and_base(Request(messages=(), model=self.model))
            rec = self._known.get((model, self._server(base), feature))
            return None if rec is None else rec.supported
        return Capabilities(n=known("n"), logprobs=known("logprobs"), batch=False,
                            prefix_sharing=False, replay=False, remote=True)

    def secrets(self) -> list[str]:
        """Values the store must mask if they ever show up (the API key)."""
        return [self._api_key] if self._api_key else []

    def fingerprint(self) -> dict[str, str]:
        fp = {"backend": self.name,
              "prompt_format": "chat: messages as given; text-completion: message contents "
                               "joined by a blank line",
              "provider_seed": PROVIDER_SEED}
        if self.extra:
            fp["extra_params_sha256"] = hashlib.sha256(
                canonical_json(scrub(self.extra)).encode("utf-8")).hexdigest()
        return fp

    def request_fields(self, req: Request) -> dict[str, str | None]:
        """``{prompt_format, answer_prefix}``: this backend's options where they are not
        the defaults (None where they are; the runner puts them into requests that do
        not name their own, :func:`~fairness_tests.models.runner.stamp_requests`, so the
        key says how the prompt is sent). Checks the format against the request's model:
        a :class:`ConfigError` naming ``prompt_format`` for a completion format on a chat
        endpoint, ``chat-prefill`` on a completion endpoint or for a provider litellm
        does not know to continue an assistant turn."""
        model, _ = self._model_and_base(req)
        fmt = PF.resolve(req.prompt_format or self.prompt_format, model)
        if fmt == "chat-prefill" and not self._prefill_ok(model):
            raise ConfigError(f"prompt_format 'chat-prefill' needs a provider that continues "
                              f"an assistant turn; litellm does not know {model!r} to (use "
                              f"prompt_format chat, or a completion endpoint with "
                              f"completion-gemma / completion-plain)", key="prompt_format")
        return {"prompt_format": None if self.prompt_format == PF.DEFAULT_PROMPT_FORMAT
                else self.prompt_format,
                "answer_prefix": None if self.answer_prefix == PF.DEFAULT_ANSWER_PREFIX
                else self.answer_prefix}

    def _prompt_of(self, req: Request, model: str) -> tuple[str, str]:
        """The concrete prompt format and the answer prefix ``req`` is sent with: the
        request's own, else this backend's options (checked: :meth:`request_fields`)."""
        self.request_fields(req)
        fmt = PF.resolve(req.prompt_format or self.prompt_format, model)
        return fmt, req.answer_prefix or self.answer_prefix

    def _prefill_ok(self, model: str) -> bool:
        """litellm's ``supports_assistant_prefill`` for ``model`` (cached)."""
        if model not in self._prefill_cache:
            try:
                ok = bool(load_litellm().utils.supports_assistant_prefill(model))
            except Exception:
                ok = False
            self._prefill_cache[model] = ok
        return self._prefill_cache[model]

    def info(self) -> dict[str, Any]:
        """Backend name and litellm version; ``model`` / ``api_base``: the constructor's,
        else what was asked (one model: its id; several: the sorted list); the prompt
        options and the format each model was sent with."""
        try:
            from importlib.metadata import version
            v = version("litellm")
        except Exception:  # pragma: no cover
            v = "?"
        with self._lock:
            seen = dict(self._seen_models)
        models = sorted(seen)
        model = self.model or (models[0] if len(models) == 1 else (models or None))
        bases = sorted({b for b in seen.values() if b})
        base = self.api_base or (bases[0] if len(bases) == 1 else (bases or None))
        if isinstance(base, list):
            base = [scrub_text(b, self.secrets()) for b in base]
        elif base:
            base = scrub_text(base, self.secrets())
        formats = {}
        for m in models:
            try:
                formats[m] = PF.resolve(self.prompt_format, m)
            except ConfigError:
                formats[m] = "?"
        return {"backend": "litellm", "litellm_version": v, "model": model,
                "api_base": base or None, "prompt_format": self.prompt_format,
                "answer_prefix": self.answer_prefix, "prompt_formats": formats,
                "top_logprobs": self.top_logprobs, "min_letter_mass": MIN_LETTER_MASS}

    def totals(self) -> dict[str, Any]:
        """Usage over the backend's life. ``cost_usd``: None when any reply's cost was
        unknown (a model litellm has no price for), never a 0 standing for unknown;
        ``cost_known_usd``: the sum over the replies whose cost is known."""
        with self._lock:
            unknown = self.cost_unknown_calls
            return {"attempts": self.attempts, "retries": self.retries_used,
                    "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens,
                    "reasoning_tokens": self.reasoning_tokens,
                    "cost_usd": None if unknown else self.cost_usd,
                    "cost_known_usd": self.cost_usd, "cost_unknown_calls": unknown,
                    "calls": self.calls, "truncated": self.truncated,
                    "letter_prompts": self.letter_prompts,
                    "low_mass_prompts": self.low_mass_prompts,
                    "top_logprobs_returned": self.top_logprobs_returned}

    # -- capabilities (what the store remembers about servers) -----------------
    def load_capabilities(self, records) -> None:
        """Take what the store remembers (:class:`CapabilityRecord` s); a remembered
        unsupported repeat mode raises :class:`RepeatModeUnsupported` before any request,
        a supported one is not probed again, a ``top_logprobs`` limit is asked within."""
        with self._lock:
            for r in records:
                self._known[(r.model, r.server, r.feature)] = r

    def learned_capabilities(self) -> list[CapabilityRecord]:
        """What this backend learned since the last call (the runner stores it)."""
        with self._lock:
            out, self._learned = self._learned, []
        return out

    def _server(self, base: str | None) -> str:
        return scrub_text(base or "", self.secrets())

    def _learn(self, model: str, base: str | None, feature: str, supported: bool | None,
               value: int | None = None, reason: str = "") -> None:
        rec = CapabilityRecord(model, self._server(base), feature, supported, value,
                               scrub_text(reason, self.secrets())[:500], time.time())
        key = (rec.model, rec.server, feature)
        with self._lock:
            old = self._known.get(key)
            if old is not None and (old.supported, old.value) == (supported, value):
                return
            self._known[key] = rec
            self._learned.append(rec)

    def _top_k(self, model: str, base: str | None) -> int:
        """``top_logprobs`` to ask: :attr:`top_logprobs`, within a limit the server named."""
        rec = self._known.get((model, self._server(base), "top_logprobs"))
        if rec is not None and rec.value is not None:
            return max(1, min(self.top_logprobs, int(rec.value)))
        return self.top_logprobs

    def answer(self, requests: list[Request],
               on_response: Callable[[Request, Response], None] | None = None) -> list[Response]:
        if not requests:
            return []
        coro_factory = lambda: self._answer_all(requests, on_response)  # noqa: E731
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro_factory())
        # called from inside a running loop (e.g. an async test): use a private thread
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["out"] = asyncio.run(coro_factory())
            except BaseException as exc:  # re-raised below
                box["exc"] = exc
        t = threading.Thread(target=target, name="litellm-backend")
        t.start()
        t.join()
        if "exc" in box:
            raise box["exc"]
        return box["out"]

    # -- async core -------------------------------------------------------------
    async def _answer_all(self, requests: list[Request],
                          on_response: Callable[[Request, Response], None] | None
                          ) -> list[Response]:
        litellm = load_litellm()
        try:
            return await self._answer_units(litellm, requests, on_response)
        finally:
            await self._close_clients(litellm)

    async def _answer_units(self, litellm: Any, requests: list[Request],
                            on_response: Callable[[Request, Response], None] | None
                            ) -> list[Response]:
        with self._lock:
            for r in requests:
                model, base = self._model_and_base(r)
                self._seen_models.setdefault(model, base)
        self._check_params(litellm, requests)
        sem = asyncio.Semaphore(self.max_concurrency)
        out: list[Response | None] = [None] * len(requests)
        not_asked: list[Request] = []

        async def run(unit: list[int], probe: bool = False) -> None:
            reqs = [requests[i] for i in unit]
            async with sem:
                if self._budget_spent():
                    not_asked.extend(reqs)
                    return
                resps = await self._one(litellm, reqs, probe=probe)
            for i, q, r in zip(unit, reqs, resps):
                out[i] = r
                if on_response is not None:
                    on_response(q, r)

        todo = units(requests)
        # the first unit of each mode not yet seen honoured goes alone (detection)
        probed: set[tuple[str, str | None, str]] = set()
        for unit in list(todo):
            first = requests[unit[0]]
            mode = first.repeat_mode
            seen = (*self._model_and_base(first), mode)
            if mode == "calls" or seen in self._modes_seen or seen in probed \
                    or (mode == "n" and len(unit) < 2):
                continue
            probed.add(seen)
            todo.remove(unit)
            await run(unit, probe=True)
        if self.limiter is not None and todo:
            # the first call of an event loop sets the HTTP client up; requests started
            # meanwhile would leave together once it is ready, bunched above the cap
            await run(todo.pop(0))
        await asyncio.gather(*(run(u) for u in todo))
        if not_asked:
            raise BudgetReached(self.cost_usd, self.max_cost_usd or 0.0, len(not_asked))
        return out  # type: ignore[return-value]

    async def _close_clients(self, litellm: Any) -> None:
        """Close the HTTP clients of this event loop: ours (text completions) and the
        ones litellm cached for it (its cache key ends with the loop's token)."""
        loop = id(asyncio.get_running_loop())
        with self._lock:
            mine_slots = [k for k in self._clients if k[0] == loop]
            clients = [self._clients.pop(k) for k in mine_slots]
        for client in clients:
            try:
                await client.close()
            except Exception:
                pass
        try:
            from litellm.caching.evicted_client_closer import running_loop_token
            token = running_loop_token()
            cache = litellm.in_memory_llm_clients_cache
            mine = [k for k in list(getattr(cache, "cache_dict", {}))
                    if token is not None and str(k).endswith(f"-{token}")]
        except Exception:
            return
        for key in mine:
            client = cache.cache_dict.pop(key, None)
            getattr(cache, "ttl_dict", {}).pop(key, None)
            close = getattr(client, "close", None) or getattr(client, "aclose", None)
            if close is None:
                continue
            try:
                result = close()
                if asyncio.iscoroutine(result):
                    await result
            except Exception:
                pass

    def _budget_spent(self) -> bool:
        with self._lock:
            return self.max_cost_usd is not None and self.cost_usd >= self.max_cost_usd

    def provider_name(self, req: Request) -> str:
        """``<provider> (<model> at <api_base>)``, as litellm resolves it; secrets scrubbed."""
        model, base = self._model_and_base(req)
        try:
            provider = load_litellm().get_llm_provider(model)[1]
        except Exception:
            provider = model.split("/", 1)[0]
        where = f" at {scrub_text(base, self.secrets())}" if base else ""
        return f"{provider} ({model}{where})"

    def _check_params(self, litellm: Any, requests: list[Request]) -> None:
        """A repeat mode or reasoning setting litellm would drop for a model: fail before
        asking (RepeatModeUnsupported for a mode, so the audit can fall back)."""
        seen: set[tuple] = set()
        for r in requests:
            d = r.decoding
            k = (*self._model_and_base(r), r.repeat_mode, d.reasoning_effort is not None,
                 d.thinking_budget is not None)
            if k in seen or k[2:] == ("calls", False, False):
                continue
            seen.add(k)
            model = k[0]
            mode = r.repeat_mode
            if mode in ("n", "logprobs"):
                rec = self._known.get((model, self._server(k[1]), mode))
                if rec is not None and rec.supported is False:
                    raise RepeatModeUnsupported(
                        mode, self.provider_name(r),
                        f"{rec.reason} (remembered in the store from an earlier run; "
                        f"`fairness-tests store capabilities --forget` asks again)")
                if rec is not None and rec.supported:
                    self._modes_seen.add((model, k[1], mode))
            try:
                name, provider = litellm.get_llm_provider(model)[:2]
                supported = set(litellm.get_supported_openai_params(
                    model=name, custom_llm_provider=provider) or ())
            except Exception:
                continue                     # litellm cannot tell: the reply will show
            need = {"n": ["n"], "logprobs": ["logprobs"]}.get(r.repeat_mode, [])
            for param in need:
                if param not in supported:
                    raise RepeatModeUnsupported(
                        r.repeat_mode, self.provider_name(r),
                        f"litellm does not send {param!r} for this model")
            for param, on in (("reasoning_effort", k[3]), ("thinking", k[4])):
                if on and param not in supported:
                    raise ConfigError(
                        f"litellm would drop {param} for {self.provider_name(r)} (not among "
                        f"the parameters it supports for this model); use a model/provider "
                        f"prefix litellm knows as a reasoning model (e.g. hosted_vllm/ for a "
                        f"vLLM server)", key="--reasoning-effort" if param == "reasoning_effort"
                        else "--thinking-budget")

    def _model_and_base(self, req: Request) -> tuple[str, str | None]:
        model = req.model or self.model or ""
        base = req.api_base or self.api_base
        if base and "/" not in model:
            model = f"openai/{model}"
        return model, base

    async def _one(self, litellm: Any, reqs: list[Request],
                   probe: bool = False) -> list[Response]:
        """The responses to one unit (one request, or the repeats of one prompt)."""
        req = reqs[0]
        model, base = self._model_and_base(req)
        t0 = time.monotonic()
        last_error = ""
        attempt = 0
        tokens = estimate_tokens(sum(len(m.content) for m in req.messages),
                                 req.decoding.max_tokens * len(reqs))
        while True:
            if self.limiter is not None:
                await self.limiter.wait(tokens, scope=model)
            with self._lock:
                self.attempts += 1
            try:
                resps = await self._call(litellm, reqs, model, base)
                for r in resps:
                    r.latency_s = time.monotonic() - t0
                if self.limiter is not None and resps and resps[0].prompt_tokens is not None:
                    used = sum((r.prompt_tokens or 0) + (r.completion_tokens or 0) for r in resps)
                    self.limiter.settle(tokens, used, scope=model)
                if req.repeat_mode != "calls":
                    self._modes_seen.add((model, base, req.repeat_mode))
                    self._learn(model, base, req.repeat_mode, True,
                                reason=f"honoured ({len(reqs)} repeats in one request)")
                return resps
            except LimitExceeded as exc:
                asked = self._top_k(model, base)
                if 1 <= exc.limit < asked:      # ask again at once within the named limit
                    self._learn(model, base, "top_logprobs", None, value=exc.limit,
                                reason=str(exc))
                    continue
                unsupported = Unsupported(str(exc), "logprobs")
                return self._unsupported(req, reqs, model, base, unsupported, probe, t0)
            except Unsupported as exc:
                return self._unsupported(req, reqs, model, base, exc, probe, t0)
            except Refused as exc:
                return [self._error(r, str(exc), t0, status="refused") for r in reqs]
            except Permanent as exc:
                return [self._error(r, str(exc), t0) for r in reqs]
            except Retryable as exc:
                last_error = str(exc)
                with self._lock:
                    can = attempt < self.max_retries and self.retries_used < self.retry_budget
                    if can:
                        self.retries_used += 1
                if not can:
                    why = ("retry budget spent" if attempt < self.max_retries
                           else f"gave up after {attempt + 1} attempts")
                    return [self._error(r, f"{last_error} ({why})", t0) for r in reqs]
                delay = self._delay(attempt, exc.retry_after)
                self.sleeps.append(delay)
                await asyncio.sleep(delay)
                attempt += 1

    def _unsupported(self, req: Request, reqs: list[Request], model: str, base: str | None,
                     exc: Unsupported, probe: bool, t0: float) -> list[Response]:
        """A feature the unit used is not supported: remembered; the first unit of a repeat
        mode raises :class:`RepeatModeUnsupported` (nothing of it is stored), any other
        unit becomes error rows (asked again on a re-run)."""
        feature = exc.feature or req.repeat_mode
        self._learn(model, base, feature, False, reason=str(exc))
        if probe and feature == req.repeat_mode:
            raise RepeatModeUnsupported(req.repeat_mode, self.provider_name(req),
                                        str(exc)) from None
        what = (f"repeat mode {req.repeat_mode!r}" if feature == req.repeat_mode
                else f"{feature}")
        return [self._error(r, f"{what} not honoured: {exc}", t0) for r in reqs]

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after_s)
        base = min(self.backoff_max_s, self.backoff_base_s * (2 ** attempt))
        with self._lock:
            return base * (0.5 + 0.5 * self._rng.random())

    def _error(self, req: Request, message: str, t0: float, status: str = "error") -> Response:
        return Response(key=req.key(), status=status,  # type: ignore[arg-type]
                        error=scrub_text(message, self.secrets()),
                        latency_s=time.monotonic() - t0)

    def _kwargs(self, req: Request, model: str, base: str | None) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "model": model, "temperature": req.decoding.temperature,
            "top_p": req.decoding.top_p, "max_tokens": req.decoding.max_tokens,
            "seed": provider_seed(req.seed, req.repeat), "timeout": self.timeout_s,
            "num_retries": 0, "max_retries": 0, "drop_params": True,
        }
        if req.decoding.reasoning_effort is not None:
            kw["reasoning_effort"] = req.decoding.reasoning_effort
        if req.decoding.thinking_budget is not None:
            kw["thinking"] = {"type": "enabled", "budget_tokens": int(req.decoding.thinking_budget)}
        if base:
            kw["api_base"] = base
        if self._api_key:
            kw["api_key"] = self._api_key
        elif base and model.startswith(("openai/", "text-completion-openai/")) \
                and not os.environ.get("OPENAI_API_KEY"):
            kw["api_key"] = "not-needed"          # local servers ignore it; the client wants one
        kw.update(self.extra)
        return kw

    async def _call(self, litellm: Any, reqs: list[Request], model: str,
                    base: str | None) -> list[Response]:
        req = reqs[0]
        kw = self._kwargs(req, model, base)
        text_mode = model.startswith("text-completion")
        fmt, prefix = self._prompt_of(req, model)
        rendered = PF.render(req.messages, fmt, prefix, req.kind, text_mode)
        if rendered.stop and "stop" not in self.extra:
            kw["stop"] = rendered.stop
        sent: set[str] = set()
        if req.repeat_mode == "n":
            kw["n"] = len(reqs)
            sent.add("n")
        elif req.repeat_mode == "logprobs":
            kw["max_tokens"] = min(int(req.decoding.max_tokens), LOGPROBS_MAX_TOKENS)
            k = self._top_k(model, base)
            if text_mode:
                kw["logprobs"] = k
            else:
                kw["logprobs"] = True
                kw["top_logprobs"] = k
            sent.update(("logprobs", "top_logprobs"))
        if kw.get("response_format") is not None:
            sent.add("structured_output")
        try:
            if text_mode:
                client = self._text_client(model, base, kw)
                if client is not None:
                    kw["client"] = client
                coro = litellm.atext_completion(prompt=rendered.prompt, **kw)
            else:
                coro = litellm.acompletion(messages=rendered.messages, **kw)
            raw = await asyncio.wait_for(coro, timeout=self.timeout_s + 5.0)
        except asyncio.TimeoutError:
            raise Retryable(f"timed out after {self.timeout_s:g}s") from None
        except Exception as exc:
            classify(litellm, exc, sent, self.secrets())
        return self._parse(litellm, reqs, raw, text_mode, kw["max_tokens"], rendered)

    def _text_client(self, model: str, base: str | None, kw: dict[str, Any]) -> Any:
        """This loop's ``AsyncOpenAI`` client for ``text-completion-openai/`` at ``base``
        (closed by :meth:`_close_clients`); None for other providers (litellm's own)."""
        if not model.startswith("text-completion-openai/"):
            return None
        key = kw.get("api_key") or os.environ.get("OPENAI_API_KEY") or "not-needed"
        slot = (id(asyncio.get_running_loop()), base,
                hashlib.sha256(key.encode("utf-8")).hexdigest())
        with self._lock:
            client = self._clients.get(slot)
            if client is None:
                from openai import AsyncOpenAI
                client = AsyncOpenAI(api_key=key, base_url=base, timeout=self.timeout_s,
                                     max_retries=0)
                self._clients[slot] = client
        return client

    def _parse(self, litellm: Any, reqs: list[Request], raw: Any, text_mode: bool,
               max_tokens: int, rendered: PF.Rendered) -> list[Response]:
        try:
            choices = sorted(raw.choices, key=lambda c: getattr(c, "index", 0) or 0)
            choices[0]
        except (AttributeError, IndexError, TypeError):
            raise Retryable("reply without choices") from None
        mode = reqs[0].repeat_mode
        if mode == "n" and len(choices) < len(reqs):
            raise Unsupported(f"returned {len(choices)} choice(s) for n={len(reqs)}", "n")
        usage = getattr(raw, "usage", None)
        pt = getattr(usage, "prompt_tokens", None) if usage is not None else None
        ct = getattr(usage, "completion_tokens", None) if usage is not None else None
        details = getattr(usage, "completion_tokens_details", None) if usage is not None else None
        rt = getattr(details, "reasoning_tokens", None) if details is not None else None
        cost = None
        try:
            cost = float(litellm.completion_cost(completion_response=raw))
        except Exception:  # unknown model price: no cost
            cost = None
        read = None
        if mode == "logprobs":
            out, read = from_logprobs(reqs, choices[0], text_mode, max_tokens, rendered,
                                      self.secrets())
        else:
            out = [from_choice(q, c, text_mode, max_tokens, rendered.cut, self.secrets(),
                               self.parse_choice)
                   for q, c in zip(reqs, choices[:len(reqs)], strict=True)]
        k = len(out)
        for i, r in enumerate(out):
            r.prompt_tokens = pt if (i == 0 or pt is None) else 0
            r.completion_tokens = share(ct, k, i)
            r.reasoning_tokens = share(rt, k, i)
            r.cost_usd = None if cost is None else cost / k
        with self._lock:
            self.calls += 1
            self.prompt_tokens += pt or 0
            self.completion_tokens += ct or 0
            self.reasoning_tokens += rt or 0
            if cost is None:
                self.cost_unknown_calls += 1
            else:
                self.cost_usd += cost
            self.truncated += sum(r.status == "truncated" for r in out)
            if read is not None:
                self.letter_prompts += 1
                self.low_mass_prompts += read.mass < MIN_LETTER_MASS
                self.top_logprobs_returned = max(self.top_logprobs_returned, read.returned)
        return out
