"""A real OpenAI-compatible HTTP server on 127.0.0.1 that injects scripted faults.

Runs in its own thread (``ThreadingHTTPServer``), serves ``POST
/v1/chat/completions`` and ``POST /v1/completions`` (and ``GET /v1/models``).
What each attempt gets is scripted by a directive in the prompt's last user
message, ``[[fault1,fault2,...]]``: attempt *n* of that prompt gets fault *n*
(the last one repeats). Without a directive every attempt gets ``default``.

Faults:
``ok``        200, content from ``reply(prompt)``
``429``       429 with ``Retry-After: <retry_after>``
``500``       500 with a JSON error body
``echoauth``  500 whose body echoes the request's Authorization header (a leaky server)
``hang``      sleeps ``hang_s`` (longer than the client's timeout), then answers ok
``badjson``   200 with a body that is not JSON
``empty``     200, content ``""``
``null``      200, content ``null`` and no refusal
``refusal``   200, content ``null`` and ``message.refusal`` set
``filter``    200, ``finish_reason: "content_filter"`` and empty content
``400``       400 bad request (not retryable)
``401``       401 invalid API key (not retryable: missing or wrong credentials)

``structured_support=False``: a request with ``response_format`` gets 400 ``"response_format
is not supported by this model"`` (a server without structured output); by default
``response_format`` is accepted and the content is ``reply(prompt)`` as it is.

``latency_s`` delays every answer (the fixed-latency mode for benchmarks).
``together=(k, key)`` holds every answer until requests with ``k`` distinct values of
``key(body)`` have arrived (at most ``together_s`` seconds), so ``k`` client processes
started at once are known to have their requests in flight at the same time however
unevenly the machine starts them.
It records every request: arrival time, prompt, fault, headers, body; the number
in flight and its maximum; and the tokens it billed (``prompt_tokens``,
``completion_tokens``, ``reasoning_tokens``). Every wait is bounded and ends on
:meth:`stop`. Only loopback: it binds 127.0.0.1.

A sampling model (``answers``), for the repeat modes
    ``answers(prompt) -> {token: probability}`` is the model's distribution of
    its one-token reply. An ``ok`` answer then samples that token, as the OpenAI
    API documents its parameters:

    - ``n``: that many choices, sampled independently (``n_support=False``: the
      parameter is ignored and one choice comes back, like a provider without it);
    - ``temperature``: sampling from ``p**(1/T)`` renormalised (``T = 0``: the
      most likely token); ``seed``: the draws of choice ``i`` are a function of
      (seed, prompt, i), so a repeated request gets the same choices;
    - log-probabilities (``logprobs_support=False``: ignored, ``logprobs:
      null``), the model's raw ones (before temperature, as OpenAI and vLLM give
      them): ``/v1/chat/completions`` with ``logprobs: true, top_logprobs: k``
      gives ``choices[i].logprobs.content[j] = {token, logprob, bytes,
      top_logprobs: [{token, logprob, bytes}, ...k]}``; ``/v1/completions`` with
      ``logprobs: k`` gives ``choices[i].logprobs = {tokens, token_logprobs,
      top_logprobs: [{token: logprob, ...k}], text_offset}``;
    - ``usage``: ``prompt_tokens`` once per request (``tokenizer`` over every
      message's content, whitespace words by default; ``chat_overhead``: OpenAI's
      counting, 3 per message plus its role and content, and 3 to prime the reply), and
      ``completion_tokens`` summed over all choices, reasoning included, with
      ``completion_tokens_details.reasoning_tokens``.

A base model (``base_model``), as a completion endpoint serves one
    ``/v1/completions`` continues the prompt and runs on until ``stop`` or
    ``max_tokens``: after a prompt ending in ``"("`` it answers the letter (sampled
    from ``answers(prompt)``, default ``{"b": 1}``) and goes on ``") The cook.\n\n
    Question: In which city ..."``; after any other prompt it starts a new line of
    its own (``"\n\nIn which city ..."``, first-token distribution
    :data:`BASE_FIRST_TOKEN`: a sentence-starting ``"A"`` among it). ``stop`` strings
    cut the text before their first occurrence (finish ``stop``), as OpenAI and
    llama.cpp do (``stop_support=False``: ignored, as by a server without it).

What llama.cpp's server does (``llama-cpp-python[server]`` 0.3.x, read from its
source: ``llama_cpp/server/app.py``, ``types.py``, ``errors.py``, ``llama.py``,
``llama_chat_format.py``): :meth:`FaultServer.llama_cpp` sets these up.

- ``n`` is dropped from the request (``exclude={"n", ...}``): one choice
  (``n_support=False``);
- a model loaded with ``logits_all=False`` raises ``ValueError("logprobs is not
  supported for models created with logits_all=False")`` for any request with
  logprobs, which the server wraps as ``HTTP 500 {"error": {"message": ..., "type":
  "internal_server_error", "param": null, "code": null}}`` (``logprobs_error``);
  a chat request with ``logprobs: true`` and no ``top_logprobs`` asks the model for
  none (``logprobs=top_logprobs if logprobs else None``): no error, no logprobs;
- ``top_logprobs`` (chat) / ``logprobs`` (completions) has no upper limit there: the
  top ``k`` asked come back, keyed by token text (a dict: tokens with the same text
  are one entry), the sampled token added; chat entries carry ``bytes: null``.

Servers with a limit (``top_logprobs_limit``, ``top_logprobs_over``): ``"openai"``
answers 400 ``"Invalid 'top_logprobs': integer above maximum value. Expected a value
<= 20, but got 25 instead."`` (OpenAI's wording, ``code: integer_above_max_value``);
``"vllm"`` answers 400 ``"Requested sample logprobs of 25, which is greater than max
allowed: 20"`` (vLLM's); ``"clamp"`` gives at most the limit without a word (a server
that gives top-5 only).

Prompt log-probabilities (``echo_support=True``), as vLLM and llama-cpp-python's
server give them
    ``/v1/completions`` with ``echo: true`` and ``logprobs: k`` answers ``text`` =
    the prompt followed by the completion, and ``logprobs`` over the prompt's tokens
    then the completion's: the prompt is cut into words with their leading whitespace
    (:func:`echo_tokens`); a prompt token ``t`` has log-probability
    :func:`echo_logprob` ``(t) = -0.25 * len(t)``, the first one ``None`` (no token
    before it), and ``top_logprobs`` ``{t: that, "<alt>": -0.5}`` (``None`` for the
    first); ``text_offset`` the character offset of every token. Without it (the
    default) ``echo`` is ignored, as by a server that does not echo: the text and
    logprobs are the completion's alone (OpenAI's chat-era models, llama.cpp's own
    ``llama-server``).

A reasoning model (``reasoning``)
    ``{reasoning_effort: tokens}`` (key ``None`` for requests without one; a
    ``thinking.budget_tokens`` caps it): each choice spends that many tokens
    reasoning before it answers. When ``max_completion_tokens`` (or
    ``max_tokens``) leaves no room for the answer the choice has empty content
    and ``finish_reason: "length"``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

_DIRECTIVE = re.compile(r"\[\[([a-z0-9_,]+)\]\]")

#: a base model's first-token distribution after a prompt that does not end in "("
BASE_FIRST_TOKEN = {"\n\n": 0.80, "\n": 0.10, "A": 0.04, "The": 0.03, "In": 0.03}
_BASE_AFTER_LETTER = [")", " The", " cook", ".", "\n\n", "Question", ":", " In", " which",
                      " city", " was", " the", " meeting", "?"]
_BASE_OWN_LINE = ["In", " which", " city", " was", " the", " meeting", "?", "\n\n", "a",
                  ")", " 2016", "\n", "b", ")", " 2018"]
LLAMA_CPP_LOGPROBS_ERROR = "logprobs is not supported for models created with logits_all=False"


@dataclass
class Hit:
    t: float
    prompt: str
    fault: str
    path: str
    headers: dict
    body: dict = field(default_factory=dict)      # the request's JSON body


def tiktoken_counter(encoding: str) -> Callable[[str], int]:
    """Token counts with tiktoken's ``encoding`` as OpenAI's servers count them, read
    offline from the copy of the encoding files bundled with litellm (a counter that
    does not go through litellm's own ``token_counter``)."""
    import litellm  # noqa: PLC0415  heavy (the [serving] extra): only for a counting server
    import tiktoken  # noqa: PLC0415  likewise

    os.environ.setdefault("TIKTOKEN_CACHE_DIR",
                          str(Path(litellm.__file__).parent / "litellm_core_utils" / "tokenizers"))
    enc = tiktoken.get_encoding(encoding)
    return lambda text: len(enc.encode(text, disallowed_special=())) if text else 0


class FaultServer:
    def __init__(self, *, default: str = "ok", latency_s: float = 0.0, hang_s: float = 5.0,
                 retry_after: str = "1", reply: Callable[[str], str] | None = None,
                 answers: Callable[[str], dict[str, float]] | None = None,
                 n_support: bool = True, logprobs_support: bool = True,
                 tokenizer: Callable[[str], int] | None = None, chat_overhead: bool = False,
                 reasoning: dict[str | None, int] | None = None,
                 together: tuple[int, Callable[[dict], object]] | None = None,
                 together_s: float = 30.0, base_model: bool = False,
                 logprobs_error: bool = False, top_logprobs_limit: int | None = None,
                 top_logprobs_over: str = "clamp", null_bytes: bool = False,
                 stop_support: bool = True, structured_support: bool = True,
                 echo_support: bool = False):
        if top_logprobs_over not in ("clamp", "openai", "vllm"):
            raise ValueError(f"top_logprobs_over: clamp, openai or vllm, not {top_logprobs_over!r}")
        self.base_model = base_model
        self.logprobs_error = logprobs_error
        self.top_logprobs_limit = top_logprobs_limit
        self.top_logprobs_over = top_logprobs_over
        self.null_bytes = null_bytes
        self.stop_support = stop_support
        self.structured_support = structured_support
        self.echo_support = echo_support
        self.replies: list[dict] = []      # every 200 reply's JSON, in order
        self.default = default
        self.together = together
        self.together_s = together_s
        self._seen: set = set()
        self._all_here = threading.Event()
        self.latency_s = latency_s
        self.hang_s = hang_s
        self.retry_after = retry_after
        self.reply = reply or (lambda prompt: f"(b) reply to: {prompt[:60]}")
        self.answers = answers
        self.n_support = n_support
        self.logprobs_support = logprobs_support
        self.tokenizer = tokenizer or (lambda text: len(text.split()))
        self.chat_overhead = chat_overhead
        self.reasoning = reasoning
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.reasoning_tokens = 0
        self.hits: list[Hit] = []
        self.attempts: Counter[str] = Counter()
        self.inflight = 0
        self.max_inflight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def llama_cpp(cls, *, logits_all: bool = False, **kw) -> "FaultServer":
        """llama.cpp's server (``llama-cpp-python[server]`` 0.3.x) serving a base model:
        ``n`` ignored, logprobs an HTTP 500 unless ``logits_all``, no top-logprobs limit,
        chat logprobs with ``bytes: null``, completions that run on without ``stop``."""
        kw.setdefault("n_support", False)
        kw.setdefault("base_model", True)
        return cls(logprobs_error=not logits_all, null_bytes=True, **kw)

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> "FaultServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True   # headers and body go out at once: no 40 ms stalls

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/stats"):
                    self._send(200, server.stats())
                elif self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "fault-model",
                                                                 "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server._handle(self, body)

            def _send(self, code, payload, headers=None, raw: bytes | None = None):
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True,
                                        name="fault-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, bounded: ``shutdown()`` waits for the serving loop, so only
        while its thread runs (a dead one would never answer); the thread must end
        within 10 s, else an AssertionError naming the server."""
        self._stop.set()
        name = self.url if self._httpd is not None else "fault server"
        if self._httpd is not None:
            if self._thread is not None and self._thread.is_alive():
                self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            if self._thread.is_alive():
                raise AssertionError(f"{name}: the serving thread did not stop in 10 s")

    def __enter__(self) -> "FaultServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # -- helpers for tests ----------------------------------------------------
    def count(self, needle: str = "") -> int:
        with self._lock:
            return sum(1 for h in self.hits if needle in h.prompt)

    def times(self, needle: str = "") -> list[float]:
        with self._lock:
            return [h.t for h in self.hits if needle in h.prompt]

    def stats(self) -> dict:
        """Requests served (all attempts) and tokens billed."""
        with self._lock:
            return {"requests": len(self.hits), "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens,
                    "reasoning_tokens": self.reasoning_tokens, "max_inflight": self.max_inflight}

    def reset(self) -> None:
        with self._lock:
            self.hits.clear()
            self.attempts.clear()
            self.max_inflight = 0
            self.prompt_tokens = self.completion_tokens = self.reasoning_tokens = 0

    # -- the handler ----------------------------------------------------------
    def _handle(self, h, body: dict) -> None:
        if "messages" in body:
            users = [m for m in body["messages"] if m.get("role") == "user"]
            prompt = str((users or body["messages"] or [{}])[-1].get("content", ""))
            chat = True
        else:
            p = body.get("prompt", "")
            prompt = p[0] if isinstance(p, list) else str(p)
            chat = False
        m = _DIRECTIVE.search(prompt)
        script = m.group(1).split(",") if m else [self.default]
        with self._lock:
            n = self.attempts[prompt]
            self.attempts[prompt] += 1
            fault = script[min(n, len(script) - 1)]
            self.hits.append(Hit(time.monotonic(), prompt, fault, h.path,
                                {k.lower(): v for k, v in h.headers.items()}, body))
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            if self.together is not None:
                self._seen.add(self.together[1](body))
                if len(self._seen) >= self.together[0]:
                    self._all_here.set()
        try:
            if self.together is not None:
                self._all_here.wait(self.together_s)
            if self.latency_s:
                self._stop.wait(self.latency_s)
            self._respond(h, body, prompt, fault, chat)
        finally:
            with self._lock:
                self.inflight -= 1

    def _respond(self, h, body: dict, prompt: str, fault: str, chat: bool) -> None:
        if fault == "429":
            h._send(429, {"error": {"message": "rate limited", "type": "rate_limit_error",
                                    "code": "rate_limit_exceeded"}},
                    headers={"Retry-After": self.retry_after})
            return
        if fault == "500":
            h._send(500, {"error": {"message": "internal error", "type": "server_error"}})
            return
        if fault == "400":
            h._send(400, {"error": {"message": "bad request: unsupported thing",
                                    "type": "invalid_request_error"}})
            return
        if fault == "401":
            h._send(401, {"error": {"message": "Incorrect API key provided",
                                    "type": "invalid_request_error", "code": "invalid_api_key"}})
            return
        if fault == "echoauth":
            h._send(500, {"error": {"message": "upstream failed for request with headers "
                                               f"Authorization: {h.headers.get('Authorization')}",
                                    "type": "server_error"}})
            return
        if not self.structured_support and body.get("response_format") is not None:
            h._send(400, {"error": {"message": "response_format is not supported by this "
                                               "model", "type": "invalid_request_error",
                                    "param": "response_format", "code": None}})
            return
        if fault == "badjson":
            h._send(200, None, raw=b'{"id": "x", "choices": [ {not json')
            return
        if fault == "hang":
            self._stop.wait(self.hang_s)
        n = max(1, int(body.get("n") or 1)) if self.n_support else 1
        top_k = int(body.get("top_logprobs") or 0) if chat else int(body.get("logprobs") or 0)
        # llama.cpp asks its model for logprobs only with a count (chat: top_logprobs)
        asks_lp = (bool(body.get("logprobs")) and body.get("top_logprobs") is not None) if chat \
            else body.get("logprobs") is not None
        if self.logprobs_error and asks_lp:
            h._send(500, {"error": {"message": LLAMA_CPP_LOGPROBS_ERROR,
                                    "type": "internal_server_error", "param": None,
                                    "code": None}})
            return
        limit = self.top_logprobs_limit
        if limit is not None and top_k > limit:
            param = "top_logprobs" if chat else "logprobs"
            if self.top_logprobs_over == "openai":
                h._send(400, {"error": {
                    "message": f"Invalid '{param}': integer above maximum value. Expected a "
                               f"value <= {limit}, but got {top_k} instead.",
                    "type": "invalid_request_error", "param": param,
                    "code": "integer_above_max_value"}})
                return
            if self.top_logprobs_over == "vllm":
                h._send(400, {"error": {
                    "message": f"Requested sample logprobs of {top_k}, which is greater than "
                               f"max allowed: {limit}", "type": "BadRequestError",
                    "param": None, "code": 400}})
                return
            top_k = limit
        want_lp = bool(body.get("logprobs")) and self.logprobs_support \
            and not (self.logprobs_error and not asks_lp)
        choices, ct, rt = [], 0, 0
        for i in range(n):
            content, finish, tokens, reasoning = self._choice(body, prompt, i)
            echo = self.echo_support and not chat and bool(body.get("echo"))
            refusal = None
            if fault == "empty":
                content = ""
            elif fault == "null":
                content = None
            elif fault == "refusal":
                content, refusal = None, "I'm sorry, I can't help with that."
            elif fault == "filter":
                content, finish = "", "content_filter"
            ct += reasoning + (len(tokens) if content else 0)
            rt += reasoning
            lp = self._logprobs(prompt, tokens if content else [], top_k, chat,
                                self._first_dist(body, prompt, chat)) if want_lp else None
            if chat:
                msg = {"role": "assistant", "content": content}
                if refusal:
                    msg["refusal"] = refusal
                choices.append({"index": i, "message": msg, "logprobs": lp,
                                "finish_reason": finish})
            elif echo:
                choices.append({"index": i, "text": prompt + (content or ""),
                                "logprobs": _echoed(prompt, lp) if lp is not None else None,
                                "finish_reason": finish})
            else:
                choices.append({"index": i, "text": content or "", "logprobs": lp,
                                "finish_reason": finish})
        pt = self._prompt_tokens(body, chat)
        usage = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct,
                 "completion_tokens_details": {"reasoning_tokens": rt}}
        with self._lock:
            self.prompt_tokens += pt
            self.completion_tokens += ct
            self.reasoning_tokens += rt
        model = body.get("model", "fault-model")
        if chat:
            payload = {"id": "chatcmpl-fault", "object": "chat.completion",
                       "created": int(time.time()), "model": model, "choices": choices,
                       "usage": usage}
        else:
            payload = {"id": "cmpl-fault", "object": "text_completion",
                       "created": int(time.time()), "model": model, "choices": choices,
                       "usage": usage}
        with self._lock:
            self.replies.append(payload)
        h._send(200, payload)

    # -- the model ------------------------------------------------------------
    def _prompt_tokens(self, body: dict, chat: bool) -> int:
        if not chat:
            p = body.get("prompt", "")
            return self.tokenizer(p[0] if isinstance(p, list) else str(p))
        msgs = body.get("messages") or []
        if not self.chat_overhead:
            return sum(self.tokenizer(str(m.get("content") or "")) for m in msgs)
        # OpenAI's counting: 3 per message plus its role and content, 3 to prime the reply
        return sum(3 + self.tokenizer(str(m.get("role") or "")) +
                   self.tokenizer(str(m.get("content") or "")) for m in msgs) + 3

    def _choice(self, body: dict, prompt: str, i: int) -> tuple[str | None, str, list[str], int]:
        """(content, finish_reason, content tokens, reasoning tokens) of choice ``i``."""
        reasoning = 0
        if self.reasoning is not None:
            reasoning = int(self.reasoning.get(body.get("reasoning_effort"), 0))
            budget = (body.get("thinking") or {}).get("budget_tokens")
            if budget is not None:
                reasoning = min(reasoning, int(budget))
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if self.base_model and "messages" not in body:
            tokens = self._base_tokens(body, prompt, i)
            content = "".join(tokens)
        elif self.answers is None:
            content = self.reply(prompt)
            tokens = content.split()
        else:
            tokens = [self._sample(body, prompt, i)]
            content = tokens[0]
        tokens, content, stopped = self._apply_stop(body, tokens, content)
        if limit is not None and reasoning + len(tokens) > int(limit):
            if reasoning >= int(limit):
                return "", "length", [], int(limit)
            tokens = tokens[:int(limit) - reasoning]
            joiner = "" if self.base_model and "messages" not in body else " "
            return joiner.join(tokens), "length", tokens, reasoning
        return content, "stop", tokens, reasoning

    def _apply_stop(self, body: dict, tokens: list[str], content: str
                    ) -> tuple[list[str], str, bool]:
        """``stop`` as OpenAI and llama.cpp apply it: the text up to (without) the first
        stop string; the tokens before the one that holds it (``stop_support=False``: a
        server that ignores it)."""
        stop = body.get("stop") if self.stop_support else None
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        if not stops or content is None:
            return tokens, content, False
        text = ""
        for j, tok in enumerate(tokens):
            joined = text + tok
            hits = [joined.find(x) for x in stops if x and joined.find(x) >= 0]
            if hits:
                return tokens[:j], joined[:min(hits)], True
            text = joined
        return tokens, content, False

    def _first_dist(self, body: dict, prompt: str, chat: bool) -> dict[str, float] | None:
        """The model's distribution over its first reply token (None: no model)."""
        if self.base_model and not chat:
            if prompt.endswith("("):
                return self.answers(prompt) if self.answers is not None else {"b": 1.0}
            return BASE_FIRST_TOKEN
        return self.answers(prompt) if self.answers is not None else None

    def _base_tokens(self, body: dict, prompt: str, i: int) -> list[str]:
        """A base model's continuation of ``prompt`` (see the module docstring)."""
        first = self._sample_from(self._first_dist(body, prompt, False), body, prompt, i)
        if prompt.endswith("("):
            return [first, *_BASE_AFTER_LETTER]
        if first.strip():
            return [first, " city", " hosted", " the", " meeting", "?", "\n\n", "a", ")"]
        return [first, *_BASE_OWN_LINE]

    def _sample(self, body: dict, prompt: str, i: int) -> str:
        return self._sample_from(self.answers(prompt), body, prompt, i)

    @staticmethod
    def _sample_from(dist: dict[str, float], body: dict, prompt: str, i: int) -> str:
        toks = list(dist)
        t = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
        if t <= 0:
            return max(toks, key=lambda k: dist[k])
        w = [dist[k] ** (1.0 / t) for k in toks]
        seed = body.get("seed")
        rng = random.Random(f"{seed}|{prompt}|{i}") if seed is not None else random.Random()
        return rng.choices(toks, weights=w, k=1)[0]

    def _logprobs(self, prompt: str, tokens: list[str], k: int, chat: bool,
                  dist: dict[str, float] | None = None):
        """Log-probabilities of the reply: position 0 from ``dist`` (the model's first
        token distribution: its top ``k`` and the sampled token); later positions give
        the sampled token only (log-probability 0)."""
        def lp(tok: str) -> float:
            if dist is None:
                return 0.0
            p = dist.get(tok, 0.0)
            return math.log(p) if p > 0 else -9999.0

        def top() -> list[tuple[str, float]]:
            if dist is None:
                return []
            ranked = sorted(dist, key=lambda x: -dist[x])[:max(0, k)]
            return [(x, lp(x)) for x in ranked]

        def chosen(j: int, tok: str) -> float:
            return lp(tok) if j == 0 else 0.0

        def raw(tok: str):
            return None if self.null_bytes else list(tok.encode())

        if chat:
            return {"content": [{"token": tok, "logprob": chosen(j, tok), "bytes": raw(tok),
                                 "top_logprobs": [{"token": x, "logprob": v, "bytes": raw(x)}
                                                  for x, v in (top() if j == 0 else [])]}
                                for j, tok in enumerate(tokens)],
                    "refusal": None}
        offset = len(prompt)
        offsets = []
        for tok in tokens:
            offsets.append(offset)
            offset += len(tok)
        tops = []
        for j, tok in enumerate(tokens):
            entry = dict(top()) if j == 0 else {}
            entry[tok] = chosen(j, tok)              # llama.cpp adds the sampled token
            tops.append(entry)
        return {"tokens": list(tokens), "token_logprobs": [chosen(j, x) for j, x in
                                                           enumerate(tokens)],
                "top_logprobs": tops, "text_offset": offsets}


def echo_tokens(prompt: str) -> list[str]:
    """The echoing server's prompt tokens: words with their leading whitespace."""
    return re.findall(r"\s*\S+|\s+$", prompt)


def echo_logprob(token: str) -> float:
    """The echoing server's log-probability of a prompt token: ``-0.25 * len(token)``."""
    return -0.25 * len(token)


def _echoed(prompt: str, lp: dict) -> dict:
    """A completions ``logprobs`` object with the prompt's tokens before the completion's
    (``lp``, whose offsets already count the prompt)."""
    toks = echo_tokens(prompt)
    offsets, at = [], 0
    for t in toks:
        offsets.append(at)
        at += len(t)
    lps = [None] + [echo_logprob(t) for t in toks[1:]]
    tops = [None] + [{t: echo_logprob(t), "<alt>": -0.5} for t in toks[1:]]
    return {"tokens": toks + lp["tokens"], "token_logprobs": lps + lp["token_logprobs"],
            "top_logprobs": tops + lp["top_logprobs"],
            "text_offset": offsets + lp["text_offset"]}


def letter_model(prompt: str) -> dict[str, float]:
    """A deterministic toy model for benches: a one-token reply whose distribution over
    ``a b c B Unknown`` depends on the prompt (sha256), so items differ."""
    h = hashlib.sha256(prompt.encode("utf-8")).digest()
    w = [1.0 + h[i] for i in range(5)]
    w[4] *= 0.1                                  # the non-letter reply is rare
    total = sum(w)
    return {t: x / total for t, x in zip(("a", "b", "c", "B", "Unknown"), w, strict=True)}


def serve_forever(server: FaultServer) -> int:
    """Print the started ``server``'s URL and serve until interrupted (Ctrl-C, SIGINT),
    then stop it: the ``main()`` of the loopback servers (this one and
    tests/batch_server.py)."""
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    """A loopback server for manual runs and benches; prints its URL, serves until killed.
    ``GET /v1/stats`` answers its counters as JSON."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("latency", nargs="?", type=float, default=0.0)
    ap.add_argument("--letters", action="store_true",
                    help="answer with the sampling toy model (letter_model): n, logprobs")
    ap.add_argument("--tiktoken", default=None, metavar="ENCODING",
                    help="count tokens with this tiktoken encoding and OpenAI's chat overhead")
    ap.add_argument("--no-n", action="store_true")
    ap.add_argument("--no-logprobs", action="store_true")
    a = ap.parse_args(argv)
    s = FaultServer(latency_s=a.latency, answers=letter_model if a.letters else None,
                    n_support=not a.no_n, logprobs_support=not a.no_logprobs,
                    tokenizer=tiktoken_counter(a.tiktoken) if a.tiktoken else None,
                    chat_overhead=bool(a.tiktoken)).start()
    return serve_forever(s)


if __name__ == "__main__":
    raise SystemExit(main())
