"""How the litellm backend asks one unit (one request, or the repeats of one prompt):
bounded retries, the features a server does not support, and what each reply billed.

Limits (all bounded, nothing can loop for ever): ``timeout_s`` per attempt (litellm's
timeout, and an asyncio deadline a bit longer as a backstop); ``max_retries`` per
request, with exponential backoff ``min(backoff_max_s, backoff_base_s * 2**attempt)``
times a jitter factor in [0.5, 1.0), or the server's ``Retry-After`` when it gives one
(capped at ``max_retry_after_s``); ``retry_budget``: retries over the whole life of the
backend; once spent, a failure is final at once. What is retried:
:mod:`.litellm_errors`. A request that finally fails becomes
``Response(status="error")`` with the (scrubbed) error text.

An error naming a feature the request used as not supported: the first unit of a repeat
mode raises :class:`~fairness_tests.models.requests.repeat_modes.RepeatModeUnsupported` at once
(the audit falls back to ``calls``), and the fact is remembered per model and server; an
error naming a ``top_logprobs`` limit is asked again at once with that limit (not
counted as a retry). A mode or reasoning setting litellm itself would drop for the model
fails before any request (:meth:`UnitCalls._check_params`).
"""
from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Literal

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.backends.litellm_clients import TextClients
from fairness_tests.models.backends.litellm_errors import (
    LimitExceeded,
    Permanent,
    Refused,
    Retryable,
    Unsupported,
    classify,
)
from fairness_tests.models.backends.litellm_replies import Reply, read_loglik, read_reply
from fairness_tests.models.backends.litellm_request import call_kwargs
from fairness_tests.models.backends.ratelimit import RateLimiter, estimate_tokens
from fairness_tests.models.info import Usage
from fairness_tests.models.requests import prompt_format as PF
from fairness_tests.models.requests.kinds import split_pair
from fairness_tests.models.requests.repeat_modes import (
    LOGPROBS_MAX_TOKENS,
    MIN_LETTER_MASS,
    RepeatModeUnsupported,
)
from fairness_tests.models.requests.request import Request, Response
from fairness_tests.models.store.capabilities import CapabilityRecord
from fairness_tests.models.store.scrub import scrub_text


class UnitCalls:
    """The per-unit asking of :class:`~.litellm_backend.LiteLLMBackend` (its state is
    the backend's: options, limiter, usage, what it knows about servers)."""

    timeout_s: float
    max_retries: int
    retry_budget: int
    backoff_base_s: float
    backoff_max_s: float
    max_retry_after_s: float
    limiter: RateLimiter | None
    parse_choice: Callable[[Request, str], int | None] | None
    extra: dict[str, Any]
    sleeps: list[float]
    _api_key: str | None
    _lock: threading.Lock
    _rng: random.Random
    _usage: Usage
    _clients: TextClients
    _modes_seen: set[tuple[str, str | None, str]]
    _known: dict[tuple[str, str, str], CapabilityRecord]

    if TYPE_CHECKING:  # provided by LiteLLMBackend
        def secrets(self) -> list[str]: ...

        def provider_name(self, req: Request) -> str: ...

        def _model_and_base(self, req: Request) -> tuple[str, str | None]: ...

        def _server(self, base: str | None) -> str: ...

        def _learn(self, model: str, base: str | None, feature: str, supported: bool | None,
                   value: int | None = None, reason: str = "") -> None: ...

        def _top_k(self, model: str, base: str | None) -> int: ...

        def _prompt_of(self, req: Request, model: str) -> tuple[str, str]: ...

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
                        f"vLLM server)",
                        key="--reasoning-effort" if param == "reasoning_effort"
                        else "--thinking-budget")

    async def _one(self, litellm: Any, reqs: list[Request],
                   probe: bool = False) -> list[Response]:
        """The responses to one unit (one request, or the repeats of one prompt)."""
        req = reqs[0]
        model, base = self._model_and_base(req)
        t0 = time.monotonic()
        last_error = ""
        attempt = 0
        chars = sum(len(m.content) for m in req.messages) + len(req.context or "") \
            + len(req.continuation or "")
        tokens = estimate_tokens(chars, req.decoding.max_tokens * len(reqs))
        while True:
            if self.limiter is not None:
                await self.limiter.wait(tokens, scope=model)
            with self._lock:
                self._usage.attempts += 1
            try:
                resps = await self._call(litellm, reqs, model, base)
                for r in resps:
                    r.latency_s = time.monotonic() - t0
                if self.limiter is not None and resps and resps[0].prompt_tokens is not None:
                    used = sum((r.prompt_tokens or 0) + (r.completion_tokens or 0)
                               for r in resps)
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
                    can = (attempt < self.max_retries
                           and self._usage.retries < self.retry_budget)
                    if can:
                        self._usage.retries += 1
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
        if req.kind == "loglikelihood":
            raise ConfigError(self._no_echo(req, str(exc)), key="model")
        feature = exc.feature or req.repeat_mode
        self._learn(model, base, feature, False, reason=str(exc))
        if probe and feature == req.repeat_mode:
            raise RepeatModeUnsupported(req.repeat_mode, self.provider_name(req),
                                        str(exc)) from None
        what = (f"repeat mode {req.repeat_mode!r}" if feature == req.repeat_mode
                else f"{feature}")
        return [self._error(r, f"{what} not honoured: {exc}", t0) for r in reqs]

    def _no_echo(self, req: Request, why: str) -> str:
        """The one line that says a server cannot score a loglikelihood request."""
        why = " ".join(why.split())[:300]
        return (f"{self.provider_name(req)} does not return prompt logprobs (echo) ({why}); "
                f"loglikelihood requests need the transformers backend or a vLLM / "
                f"llama.cpp (llama-cpp-python, logits_all) server's /v1/completions")

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry ``attempt + 1``: the server's ``Retry-After``
        (capped), else ``min(backoff_max_s, backoff_base_s * 2**attempt)`` times a jitter
        factor in [0.5, 1.0)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after_s)
        base = min(self.backoff_max_s, self.backoff_base_s * (2 ** attempt))
        with self._lock:
            return base * (0.5 + 0.5 * self._rng.random())

    def _error(self, req: Request, message: str, t0: float,
               status: Literal["error", "refused"] = "error") -> Response:
        """A final failure of ``req`` as its response (the message scrubbed)."""
        return Response(key=req.key(), status=status,
                        error=scrub_text(message, self.secrets()),
                        latency_s=time.monotonic() - t0)

    async def _call(self, litellm: Any, reqs: list[Request], model: str,
                    base: str | None) -> list[Response]:
        """One attempt at the unit ``reqs``: the request shaped by its repeat mode, sent,
        its reply read and tallied; a failure raised as what it means
        (:func:`~.litellm_errors.classify`)."""
        req = reqs[0]
        kw = call_kwargs(req, model, base, timeout_s=self.timeout_s, api_key=self._api_key,
                         extra=self.extra)
        if req.kind == "loglikelihood":
            return await self._call_loglik(litellm, reqs, model, base, kw)
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
                client = self._clients.get(model, base, kw)
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
        reply = read_reply(litellm, reqs, raw, text_mode, kw["max_tokens"], rendered,
                           self.secrets(), self.parse_choice)
        self._tally(reply)
        return reply.responses

    async def _call_loglik(self, litellm: Any, reqs: list[Request], model: str,
                           base: str | None, kw: dict[str, Any]) -> list[Response]:
        """One attempt at a loglikelihood unit: ``/v1/completions`` of ``context +
        continuation`` (lm-eval's split, :func:`~fairness_tests.models.requests.kinds.split_pair`)
        with ``echo``, ``logprobs=1``, ``max_tokens=1``, ``temperature=0``; the
        continuation's characters ``[len(context), len(prompt))`` read from the reply
        (:func:`~.litellm_replies.read_loglik`)."""
        req = reqs[0]
        if not model.startswith("text-completion"):
            raise ConfigError(f"loglikelihood requests are scored through /v1/completions "
                              f"with echo; {model!r} is a chat endpoint (use "
                              f"text-completion-openai/<model>)", key="model")
        ctx, cont = split_pair(str(req.context), str(req.continuation))
        kw.update(echo=True, logprobs=1, max_tokens=1, temperature=0.0)
        client = self._clients.get(model, base, kw)
        if client is not None:
            kw["client"] = client
        try:
            raw = await asyncio.wait_for(litellm.atext_completion(prompt=ctx + cont, **kw),
                                         timeout=self.timeout_s + 5.0)
        except asyncio.TimeoutError:
            raise Retryable(f"timed out after {self.timeout_s:g}s") from None
        except Exception as exc:
            classify(litellm, exc, {"logprobs", "echo"}, self.secrets())
        reply = read_loglik(litellm, reqs, raw, len(ctx), len(ctx) + len(cont))
        self._tally(reply)
        return reply.responses

    def _tally(self, reply: Reply) -> None:
        """Add what ``reply`` billed and read to the backend's usage."""
        u = self._usage
        with self._lock:
            u.calls += 1
            u.prompt_tokens += reply.prompt_tokens or 0
            u.completion_tokens += reply.completion_tokens or 0
            u.reasoning_tokens += reply.reasoning_tokens or 0
            if reply.cost_usd is None:
                u.cost_unknown_calls += 1
            else:
                u.cost_known_usd += reply.cost_usd
            u.truncated += sum(r.status == "truncated" for r in reply.responses)
            if reply.letters is not None:
                u.letter_prompts += 1
                u.low_mass_prompts += reply.letters.mass < MIN_LETTER_MASS
                u.top_logprobs_returned = max(u.top_logprobs_returned, reply.letters.returned)
