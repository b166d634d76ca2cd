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

A reasoning model (``reasoning``)
    ``{reasoning_effort: tokens}`` (key ``None`` for requests without one; a
    ``thinking.budget_tokens`` caps it): each choice spends that many tokens
    reasoning before it answers. When ``max_completion_tokens`` (or
    ``max_tokens``) leaves no room for the answer the choice has empty content
    and ``finish_reason: "length"``.
"""
from __future__ import annotations

import json
import math
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

_DIRECTIVE = re.compile(r"\[\[([a-z0-9_,]+)\]\]")


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
    import os
    from pathlib import Path

    import litellm
    import tiktoken

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
                 together_s: float = 30.0):
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
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

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
        if fault == "echoauth":
            h._send(500, {"error": {"message": "upstream failed for request with headers "
                                               f"Authorization: {h.headers.get('Authorization')}",
                                    "type": "server_error"}})
            return
        if fault == "badjson":
            h._send(200, None, raw=b'{"id": "x", "choices": [ {not json')
            return
        if fault == "hang":
            self._stop.wait(self.hang_s)
        n = max(1, int(body.get("n") or 1)) if self.n_support else 1
        want_lp = bool(body.get("logprobs")) and self.logprobs_support
        top_k = int(body.get("top_logprobs") or 0) if chat else int(body.get("logprobs") or 0)
        choices, ct, rt = [], 0, 0
        for i in range(n):
            content, finish, tokens, reasoning = self._choice(body, prompt, i)
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
            lp = self._logprobs(prompt, tokens if content else [], top_k, chat) if want_lp else None
            if chat:
                msg = {"role": "assistant", "content": content}
                if refusal:
                    msg["refusal"] = refusal
                choices.append({"index": i, "message": msg, "logprobs": lp,
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
        if self.answers is None:
            content = self.reply(prompt)
            tokens = content.split()
        else:
            tokens = [self._sample(body, prompt, i)]
            content = tokens[0]
        if limit is not None and reasoning + len(tokens) > int(limit):
            if reasoning >= int(limit):
                return "", "length", [], int(limit)
            tokens = tokens[:int(limit) - reasoning]
            return " ".join(tokens), "length", tokens, reasoning
        return content, "stop", tokens, reasoning

    def _sample(self, body: dict, prompt: str, i: int) -> str:
        dist = self.answers(prompt)
        toks = list(dist)
        t = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
        if t <= 0:
            return max(toks, key=lambda k: dist[k])
        w = [dist[k] ** (1.0 / t) for k in toks]
        seed = body.get("seed")
        rng = random.Random(f"{seed}|{prompt}|{i}") if seed is not None else random.Random()
        return rng.choices(toks, weights=w, k=1)[0]

    def _logprobs(self, prompt: str, tokens: list[str], k: int, chat: bool):
        dist = self.answers(prompt) if self.answers is not None else None

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

        if chat:
            return {"content": [{"token": tok, "logprob": lp(tok), "bytes": list(tok.encode()),
                                 "top_logprobs": [{"token": x, "logprob": v,
                                                   "bytes": list(x.encode())}
                                                  for x, v in (top() if j == 0 else [])]}
                                for j, tok in enumerate(tokens)],
                    "refusal": None}
        offset = len(prompt)
        offsets = []
        for tok in tokens:
            offsets.append(offset)
            offset += len(tok)
        return {"tokens": list(tokens), "token_logprobs": [lp(x) for x in tokens],
                "top_logprobs": [dict(top()) if j == 0 else {} for j in range(len(tokens))],
                "text_offset": offsets}


def letter_model(prompt: str) -> dict[str, float]:
    """A deterministic toy model for benches: a one-token reply whose distribution over
    ``a b c B Unknown`` depends on the prompt (sha256), so items differ."""
    import hashlib
    h = hashlib.sha256(prompt.encode("utf-8")).digest()
    w = [1.0 + h[i] for i in range(5)]
    w[4] *= 0.1                                  # the non-letter reply is rare
    total = sum(w)
    return {t: x / total for t, x in zip(("a", "b", "c", "B", "Unknown"), w)}


def main(argv: list[str] | None = None) -> int:
    """A loopback server for manual runs and benches; prints its URL, serves until killed.
    ``GET /v1/stats`` answers its counters as JSON."""
    import argparse
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
    print(s.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        s.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
