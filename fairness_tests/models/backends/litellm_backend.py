"""The litellm backend: any provider litellm supports, and any OpenAI-compatible
server (vLLM, Ollama, llama.cpp server, ``transformers serve``) through ``api_base``.

Model strings are litellm's: ``openai/<model>`` for an OpenAI-compatible chat
endpoint, ``text-completion-openai/<model>`` for plain ``/v1/completions`` (the
messages' contents are joined with blank lines into the prompt), or any
provider prefix (``anthropic/...``, ``gemini/...``). A bare model name with an
``api_base`` is sent as ``openai/<model>``.

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
with no content at all (``null`` content, no refusal). Not retried: other 4xx.
A request that finally fails becomes ``Response(status="error")`` with the
(scrubbed) error text; a provider refusal (``finish_reason ==
"content_filter"``, a ``refusal`` message, or litellm's
``ContentPolicyViolationError``) becomes ``status="refused"``. An empty string
content is a valid (empty) answer: ``status="ok"``, ``text=""``.

Provider seeds: repeat ``r`` of a request with seed ``s`` is sent with the seed
:func:`provider_seed` ``(s, r)`` (Cantor's pairing of ``zigzag(s)`` and ``r``), one
distinct provider seed for each (seed, repeat) pair.

Fingerprint (:meth:`LiteLLMBackend.fingerprint`): the backend, how messages are
sent (chat: as given; ``text-completion-*``: contents joined by a blank line),
the provider-seed scheme, and a hash of any extra provider parameters. The
server's own chat template and weights are the provider's: the model id in the
key names them.

Keys come from ``api_key`` or the environment (litellm reads the provider's
variable, e.g. ``OPENAI_API_KEY``); they are handed only to litellm, never put
in a response, the store or a log line (error texts are scrubbed).

litellm is imported lazily, with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so that
importing it never touches the network.
"""
from __future__ import annotations

import asyncio
import hashlib
import os
import random
import threading
import time
from typing import Any, Callable

from ...errors import ConfigError
from ..ratelimit import RateLimiter, estimate_tokens
from ..request import Request, Response, canonical_json
from ..store import scrub, scrub_text

_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}


def _litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm  # lazy: heavy, and must not run at import of this module
    litellm.suppress_debug_info = True
    return litellm


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


class _Permanent(Exception):
    """A failure not worth retrying."""


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class LiteLLMBackend:
    name = "litellm"

    def __init__(self, model: str | None = None, api_base: str | None = None,
                 api_key: str | None = None, *, max_concurrency: int = 8,
                 rpm: float | None = None, tpm: float | None = None,
                 rate_limit_path: str | os.PathLike | None = None,
                 timeout_s: float = 60.0, max_retries: int = 4,
                 retry_budget: int = 200, backoff_base_s: float = 0.5,
                 backoff_max_s: float = 30.0, max_retry_after_s: float = 60.0,
                 parse_choice: Callable[[Request, str], int | None] | None = None,
                 seed: int | None = None, extra: dict[str, Any] | None = None, **_ignored: Any):
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
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        # totals over the life of the backend
        self.retries_used = 0
        self.attempts = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self.sleeps: list[float] = []          # backoff waits taken (for tests / logs)

    # -- interface ------------------------------------------------------------
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

    def info(self) -> dict[str, Any]:
        try:
            from importlib.metadata import version
            v = version("litellm")
        except Exception:  # pragma: no cover
            v = "?"
        return {"backend": "litellm", "litellm_version": v, "model": self.model,
                "api_base": scrub_text(self.api_base or "") or None}

    def totals(self) -> dict[str, Any]:
        return {"attempts": self.attempts, "retries": self.retries_used,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": self.cost_usd}

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
        litellm = _litellm()
        sem = asyncio.Semaphore(self.max_concurrency)

        async def one(req: Request) -> Response:
            async with sem:
                resp = await self._one(litellm, req)
            if on_response is not None:
                on_response(req, resp)
            return resp

        if self.limiter is not None:
            # the first call of an event loop sets the HTTP client up; requests started
            # meanwhile would leave together once it is ready, bunched above the cap
            head = [await one(requests[0])]
            return head + list(await asyncio.gather(*(one(r) for r in requests[1:])))
        return list(await asyncio.gather(*(one(r) for r in requests)))

    def _model_and_base(self, req: Request) -> tuple[str, str | None]:
        model = req.model or self.model or ""
        base = req.api_base or self.api_base
        if base and "/" not in model:
            model = f"openai/{model}"
        return model, base

    async def _one(self, litellm: Any, req: Request) -> Response:
        model, base = self._model_and_base(req)
        t0 = time.monotonic()
        last_error = ""
        attempt = 0
        tokens = estimate_tokens(sum(len(m.content) for m in req.messages),
                                 req.decoding.max_tokens)
        while True:
            if self.limiter is not None:
                await self.limiter.wait(tokens, scope=model)
            with self._lock:
                self.attempts += 1
            try:
                resp = await self._call(litellm, req, model, base)
                resp.latency_s = time.monotonic() - t0
                if self.limiter is not None and resp.prompt_tokens is not None:
                    used = resp.prompt_tokens + (resp.completion_tokens or 0)
                    self.limiter.settle(tokens, used, scope=model)
                return resp
            except _RefusedSignal as exc:
                return self._error(req, str(exc), t0, status="refused")
            except _Permanent as exc:
                return self._error(req, str(exc), t0)
            except _Retryable as exc:
                last_error = str(exc)
                with self._lock:
                    can = attempt < self.max_retries and self.retries_used < self.retry_budget
                    if can:
                        self.retries_used += 1
                if not can:
                    why = ("retry budget spent" if attempt < self.max_retries
                           else f"gave up after {attempt + 1} attempts")
                    return self._error(req, f"{last_error} ({why})", t0)
                delay = self._delay(attempt, exc.retry_after)
                self.sleeps.append(delay)
                await asyncio.sleep(delay)
                attempt += 1

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
        if base:
            kw["api_base"] = base
        if self._api_key:
            kw["api_key"] = self._api_key
        elif base and model.startswith(("openai/", "text-completion-openai/")) \
                and not os.environ.get("OPENAI_API_KEY"):
            kw["api_key"] = "not-needed"          # local servers ignore it; the client wants one
        kw.update(self.extra)
        return kw

    async def _call(self, litellm: Any, req: Request, model: str,
                    base: str | None) -> Response:
        kw = self._kwargs(req, model, base)
        text_mode = model.startswith("text-completion")
        try:
            if text_mode:
                prompt = "\n\n".join(m.content for m in req.messages)
                coro = litellm.atext_completion(prompt=prompt, **kw)
            else:
                msgs = [{"role": m.role, "content": m.content} for m in req.messages]
                coro = litellm.acompletion(messages=msgs, **kw)
            raw = await asyncio.wait_for(coro, timeout=self.timeout_s + 5.0)
        except asyncio.TimeoutError:
            raise _Retryable(f"timed out after {self.timeout_s:g}s") from None
        except Exception as exc:
            self._classify(litellm, exc)
            raise  # unreachable: _classify always raises
        return self._parse(litellm, req, raw, text_mode)

    def _classify(self, litellm: Any, exc: Exception) -> None:
        msg = scrub_text(f"{type(exc).__name__}: {exc}", self.secrets())
        if isinstance(exc, getattr(litellm, "ContentPolicyViolationError", ())):
            raise _RefusedSignal(msg)
        status = getattr(exc, "status_code", None)
        retry_after = _retry_after(exc)
        timeout_types = tuple(t for t in (getattr(litellm, "Timeout", None),
                                          getattr(litellm, "APIConnectionError", None)) if t)
        if isinstance(exc, timeout_types) or status in _RETRY_STATUS:
            raise _Retryable(msg, retry_after)
        if isinstance(exc, (ValueError, KeyError, TypeError)) and status is None:
            raise _Retryable(msg)                   # a malformed reply
        if isinstance(status, int) and 400 <= status < 500:
            raise _Permanent(msg)
        raise _Retryable(msg, retry_after)

    def _parse(self, litellm: Any, req: Request, raw: Any, text_mode: bool) -> Response:
        try:
            choice = raw.choices[0]
        except (AttributeError, IndexError, TypeError):
            raise _Retryable("reply without choices") from None
        finish = getattr(choice, "finish_reason", None)
        if text_mode:
            content, refusal = getattr(choice, "text", None), None
        else:
            msg = getattr(choice, "message", None)
            content = getattr(msg, "content", None) if msg is not None else None
            refusal = getattr(msg, "refusal", None) if msg is not None else None
        usage = getattr(raw, "usage", None)
        pt = getattr(usage, "prompt_tokens", None) if usage is not None else None
        ct = getattr(usage, "completion_tokens", None) if usage is not None else None
        cost = None
        try:
            cost = float(litellm.completion_cost(completion_response=raw))
        except Exception:  # unknown model price: no cost
            cost = None
        with self._lock:
            self.prompt_tokens += pt or 0
            self.completion_tokens += ct or 0
            self.cost_usd += cost or 0.0
        common = dict(key=req.key(), prompt_tokens=pt, completion_tokens=ct, cost_usd=cost)
        if finish == "content_filter" or refusal:
            return Response(text=content or "", status="refused",
                            error=scrub_text(refusal or f"finish_reason={finish}",
                                             self.secrets()), **common)
        if content is None and not text_mode:
            raise _Retryable("reply with no content and no refusal")
        resp = Response(text=content or "", status="ok", **common)
        if req.kind == "choice" and self.parse_choice is not None and resp.text:
            resp.answer = self.parse_choice(req, resp.text)
        return resp


class _RefusedSignal(_Permanent):
    pass


def _retry_after(exc: Exception) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header on a failed call."""
    headers = None
    for attr in ("litellm_response_headers", "headers"):
        headers = getattr(exc, attr, None)
        if headers:
            break
    if not headers:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        get = headers.get
        ms = get("retry-after-ms") or get("Retry-After-Ms")
        if ms:
            return float(ms) / 1000.0
        val = get("retry-after") or get("Retry-After")
        if val is None:
            return None
        try:
            return float(val)
        except ValueError:
            from email.utils import parsedate_to_datetime
            return max(0.0, parsedate_to_datetime(val).timestamp() - time.time())
    except Exception:
        return None
