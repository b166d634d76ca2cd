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
It records every request: arrival time, prompt, fault, headers; the number in
flight and its maximum. Every wait is bounded and ends on :meth:`stop`.
Only loopback: it binds 127.0.0.1.
"""
from __future__ import annotations

import json
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


class FaultServer:
    def __init__(self, *, default: str = "ok", latency_s: float = 0.0, hang_s: float = 5.0,
                 retry_after: str = "1", reply: Callable[[str], str] | None = None):
        self.default = default
        self.latency_s = latency_s
        self.hang_s = hang_s
        self.retry_after = retry_after
        self.reply = reply or (lambda prompt: f"(b) reply to: {prompt[:60]}")
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
                if self.path.rstrip("/").endswith("/models"):
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

    def reset(self) -> None:
        with self._lock:
            self.hits.clear()
            self.attempts.clear()
            self.max_inflight = 0

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
        try:
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
        content: str | None = self.reply(prompt)
        finish = "stop"
        refusal = None
        if fault == "empty":
            content = ""
        elif fault == "null":
            content = None
        elif fault == "refusal":
            content, refusal = None, "I'm sorry, I can't help with that."
        elif fault == "filter":
            content, finish = "", "content_filter"
        usage = {"prompt_tokens": len(prompt.split()),
                 "completion_tokens": len((content or "").split()),
                 "total_tokens": len(prompt.split()) + len((content or "").split())}
        model = body.get("model", "fault-model")
        if chat:
            msg = {"role": "assistant", "content": content}
            if refusal:
                msg["refusal"] = refusal
            payload = {"id": "chatcmpl-fault", "object": "chat.completion",
                       "created": int(time.time()), "model": model,
                       "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                       "usage": usage}
        else:
            payload = {"id": "cmpl-fault", "object": "text_completion",
                       "created": int(time.time()), "model": model,
                       "choices": [{"index": 0, "text": content or "", "logprobs": None,
                                    "finish_reason": finish}],
                       "usage": usage}
        h._send(200, payload)


if __name__ == "__main__":   # a loopback server for manual runs / benches
    import sys
    s = FaultServer(latency_s=float(sys.argv[1]) if len(sys.argv) > 1 else 0.0).start()
    print(s.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        s.stop()
