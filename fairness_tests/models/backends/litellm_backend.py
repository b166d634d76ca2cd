"""The litellm backend: any provider litellm supports, and any OpenAI-compatible
server (vLLM, Ollama, llama.cpp server, ``transformers serve``) through ``api_base``.

Model strings are litellm's: ``openai/<model>`` for an OpenAI-compatible chat
endpoint, ``text-completion-openai/<model>`` for plain ``/v1/completions``, or any
provider prefix (``anthropic/...``, ``gemini/...``). A bare model name with an
``api_base`` is sent as ``openai/<model>``.

Prompt format (``prompt_format``, ``answer_prefix``; :mod:`.prompt_format`): by default
(``auto``) a chat endpoint gets the messages as given and a completion endpoint the
local backend's prompt: the turns in Gemma's format (a model id naming
Gemma) or as ``role: content`` lines, the model turn opened, and for a multiple-choice
request the answer prefix ``"Answer: ("`` with ``stop`` at ``")"`` and newline, so a
base model answers with the letter. The resolved format and a non-default prefix are
part of the request key (:meth:`LiteLLMBackend.request_fields`, applied by the runner).

Where the rest is (each module says it in full): the limits, retries and unsupported
features of one unit (:mod:`.litellm_calls`), what a failure means
(:mod:`.litellm_errors`), how a reply is read and its tokens and cost shared among a
unit's responses (:mod:`.litellm_replies`), what is sent and the provider seed of each
(seed, repeat) pair (:mod:`.litellm_request`), the HTTP clients (:mod:`.litellm_clients`).

Concurrency: ``max_concurrency`` units in flight (an asyncio semaphore); ``rpm`` /
``tpm``: at most this many request starts / tokens per minute, for every attempt
(:class:`~fairness_tests.models.backends.ratelimit.RateLimiter`); with ``rate_limit_path`` the
caps hold across every process that uses that file (the audit puts it beside the store).

Repeat modes (``Request.repeat_mode``, :mod:`fairness_tests.models.requests.repeat_modes`): the
requests of one prompt that differ only in ``repeat`` are one *unit*: ``calls`` asks
each on its own; ``n`` asks the unit once with ``n`` = its size; ``logprobs`` asks it
once with ``logprobs``/``top_logprobs`` and draws every repeat from the letter
distribution. The first unit of a mode the backend has not yet seen honoured (in this
process, or in the store's capability records the runner hands it) goes alone; a reply
that does not honour it raises
:class:`~fairness_tests.models.requests.repeat_modes.RepeatModeUnsupported` before anything else
is asked or stored, and the fact is remembered (:meth:`LiteLLMBackend.learned_capabilities`).

Log-likelihood (``kind="loglikelihood"``): ``/v1/completions`` of ``context +
continuation`` with ``echo``, ``logprobs`` and ``max_tokens=1``; the continuation's
log-probability is the sum of the echoed prompt tokens' from the context's character
offset on (:func:`~.litellm_replies.read_loglik`), which vLLM and llama-cpp-python's
server (``logits_all``) give. Before the first such request to a model and server, one
tiny probe (``"Hello"`` / ``" world"``) asks whether the server echoes them; the answer
is kept for the backend's life. A server that does not (or a chat endpoint) is a
:class:`ConfigError` in one line naming the alternatives, before any request is asked.

Fingerprint (:meth:`LiteLLMBackend.fingerprint`): the backend, how messages are sent
when the request's key names no prompt format, the provider-seed scheme, and a hash of
any extra provider parameters. Keys come from ``api_key`` or the environment; they are
handed only to litellm, never put in a response, the store or a log line.

Budget: with ``max_cost_usd`` no new request starts once the cost so far (litellm's
``completion_cost`` of each reply) reaches it; requests in flight finish and are
reported, the rest are not asked, and :meth:`answer` raises
:class:`~fairness_tests.models.backends.cost.BudgetReached` (a re-run resumes). The cost can pass
the budget by at most the replies in flight. :meth:`LiteLLMBackend.totals`: the usage
(:class:`~.base.Usage`; ``cost_usd`` None when any reply's cost was unknown).

litellm is imported lazily, with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (its
bundled price map, never the network) and ``LITELLM_OFFLINE_MODE=true`` (its
bundled tokenizers only), so that importing it never touches the network.
"""
from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Callable

from fairness_tests.core.errors import ConfigError
from fairness_tests.core.io import sha256_text
from fairness_tests.models.backends.base import Capabilities, unknown_option
from fairness_tests.models.backends.cost import BudgetReached
from fairness_tests.models.backends.litellm_calls import UnitCalls
from fairness_tests.models.backends.litellm_clients import TextClients
from fairness_tests.models.backends.litellm_import import load_litellm
from fairness_tests.models.backends.litellm_request import (
    PROVIDER_SEED,
    model_and_base,
    provider_seed,
)
from fairness_tests.models.backends.ratelimit import RateLimiter
from fairness_tests.models.info import BackendInfo, Usage
from fairness_tests.models.requests import prompt_format as PF
from fairness_tests.models.requests.repeat_modes import MIN_LETTER_MASS, TOP_LOGPROBS, units
from fairness_tests.models.requests.request import Request, Response, canonical_json
from fairness_tests.models.store.capabilities import CapabilityRecord
from fairness_tests.models.store.scrub import scrub, scrub_text

__all__ = ["LiteLLMBackend", "provider_seed"]


_OPTIONS = ("model", "api_base", "api_key", "max_concurrency", "rpm", "tpm", "rate_limit_path",
            "timeout_s", "max_retries", "retry_budget", "backoff_base_s", "backoff_max_s",
            "max_retry_after_s", "parse_choice", "seed", "extra", "max_cost_usd",
            "top_logprobs", "prompt_format", "answer_prefix")


class LiteLLMBackend(UnitCalls):
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
        self._clients = TextClients(self.timeout_s)                  # text-completion clients
        self._prefill_cache: dict[str, bool] = {}
        self._echo_ok: set[tuple[str, str | None]] = set()           # (model, base) probed
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._usage = Usage(cost_usd=None)       # over the backend's life (see totals())
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
                            prefix_sharing=False, replay=False, remote=True,
                            structured_output=known("structured_output"))

    def secrets(self) -> list[str]:
        """Values the store must mask if they ever show up (the API key)."""
        return [self._api_key] if self._api_key else []

    def fingerprint(self) -> dict[str, str]:
        fp = {"backend": self.name,
              "prompt_format": "chat: messages as given; text-completion: message contents "
                               "joined by a blank line",
              "provider_seed": PROVIDER_SEED}
        if self.extra:
            fp["extra_params_sha256"] = sha256_text(canonical_json(scrub(self.extra)))
        return fp

    def request_fields(self, req: Request) -> dict[str, str | None]:
        """``{prompt_format, answer_prefix}``: this backend's options where they are not
        the defaults (None where they are; the runner puts them into requests that do
        not name their own, :func:`~fairness_tests.models.asking.runner.stamp_requests`, so the
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

    def info(self) -> BackendInfo:
        """Backend name and litellm's version; ``model`` / ``api_base``: the constructor's,
        else what was asked (one model: its id; several: the sorted list); the prompt
        options and the format each model was sent with."""
        with self._lock:
            seen = dict(self._seen_models)
        models = sorted(seen)
        model = self.model or (models[0] if len(models) == 1 else (models or None))
        bases = sorted({scrub_text(b, self.secrets()) for b in seen.values() if b})
        base = scrub_text(self.api_base, self.secrets()) if self.api_base else \
            (bases[0] if len(bases) == 1 else (bases or None))
        formats = {}
        for m in models:
            try:
                formats[m] = PF.resolve(self.prompt_format, m)
            except ConfigError:
                formats[m] = "?"
        return BackendInfo(backend=self.name, version=_litellm_version(), model=model,
                           api_base=base, prompt_format=self.prompt_format,
                           answer_prefix=self.answer_prefix, prompt_formats=formats,
                           top_logprobs=self.top_logprobs, min_letter_mass=MIN_LETTER_MASS)

    def totals(self) -> Usage:
        """What the backend spent over its life (:class:`~.base.Usage`): ``cost_usd`` is
        None when any reply's cost was unknown (a model litellm has no price for), never
        a 0 standing for unknown."""
        with self._lock:
            u = self._usage
            return replace(u, cost_usd=None if u.cost_unknown_calls else u.cost_known_usd)

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
            await self._clients.close(litellm)

    async def _answer_units(self, litellm: Any, requests: list[Request],
                            on_response: Callable[[Request, Response], None] | None
                            ) -> list[Response]:
        with self._lock:
            for r in requests:
                model, base = self._model_and_base(r)
                self._seen_models.setdefault(model, base)
        self._check_params(litellm, requests)
        await self._probe_echo(litellm, requests)
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
            for i, q, r in zip(unit, reqs, resps, strict=True):
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
            raise BudgetReached(self._usage.cost_known_usd, self.max_cost_usd or 0.0,
                                len(not_asked))
        return out  # type: ignore[return-value]  # every slot filled by now

    async def _probe_echo(self, litellm: Any, requests: list[Request]) -> None:
        """Before the first loglikelihood request to each model and server: one tiny
        request (context ``"Hello"``, continuation ``" world"``, not stored) whose reply
        must echo the prompt's log-probabilities; one that does not raises the
        :class:`ConfigError` of :meth:`_no_echo` (a chat endpoint: the one of
        :meth:`_call_loglik`). A probe that fails for another reason (the server down)
        proves nothing: the requests are asked and each says what happened."""
        for r in requests:
            if r.kind != "loglikelihood":
                continue
            where = self._model_and_base(r)
            if where in self._echo_ok:
                continue
            probe = Request(messages=(), kind="loglikelihood", context="Hello",
                            continuation=" world", backend=r.backend, model=r.model,
                            api_base=r.api_base)
            [resp] = await self._one(litellm, [probe])
            if resp.status == "ok":
                self._echo_ok.add(where)
            else:
                return

    def _budget_spent(self) -> bool:
        with self._lock:
            return (self.max_cost_usd is not None
                    and self._usage.cost_known_usd >= self.max_cost_usd)

    def provider_name(self, req: Request) -> str:
        """``<provider> (<model> at <api_base>)``, as litellm resolves it; secrets scrubbed."""
        model, base = self._model_and_base(req)
        try:
            provider = load_litellm().get_llm_provider(model)[1]
        except Exception:
            provider = model.split("/", 1)[0]
        where = f" at {scrub_text(base, self.secrets())}" if base else ""
        return f"{provider} ({model}{where})"

    def _model_and_base(self, req: Request) -> tuple[str, str | None]:
        return model_and_base(req, self.model, self.api_base)


def _litellm_version() -> str:
    try:
        return version("litellm")
    except PackageNotFoundError:  # pragma: no cover - litellm is what this backend asks
        return "?"
