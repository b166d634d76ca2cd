"""A real OpenAI-compatible Files + Batches server on 127.0.0.1 (for ``--batch`` tests).

:class:`BatchServer` is a :class:`~fault_server.FaultServer` (its chat and completion
answers, its faults and its sampling toy model: every batch line is answered by the same
rule a direct request is) that also serves OpenAI's documented Files and Batches endpoints
(https://platform.openai.com/docs/api-reference/batch):

``POST /v1/files``                multipart form (``purpose``, ``file``) -> a File object
``GET  /v1/files/{id}``           the File object
``GET  /v1/files/{id}/content``   the file's bytes (JSONL)
``POST /v1/batches``              ``{input_file_id, endpoint, completion_window}`` -> Batch
``GET  /v1/batches/{id}``         the Batch, its status advanced one step per retrieve
``POST /v1/batches/{id}/cancel``  ``cancelling``, then ``cancelled`` on the next retrieve
``GET  /v1/batches``              the list

A batch moves ``validating -> in_progress -> completed`` (one step per ``GET``). When it
completes, every input line ``{custom_id, method, url, body}`` is answered by the
FaultServer rule for ``url`` (so ``[[400]]`` in a prompt makes that line fail, ``[[500,ok]]``
fail the first time and succeed when resubmitted): a 200 goes to the output file
``{id, custom_id, response: {status_code, request_id, body}, error: null}``, any other
status to the error file (same shape). ``fates``: a queue of what happens to the next
batches created (``"complete"``, ``"expire:K"``: the first K lines answered, the rest
``error: {code: "batch_expired"}``, status ``expired``; ``"fail"``: validation fails,
status ``failed`` with ``errors``; ``"cancel"``: cancelled by someone else while
validating); ``/cancel`` and ``"cancel"``: ``cancelling``, then ``cancelled``, the lines
not yet answered get ``batch_cancelled``. ``fail``: ``{n: k}``: in the n-th batch created
the first k lines answer HTTP 500 (error file). Batch lines reach the FaultServer rule
with the header ``X-Batch-Line: <custom_id>`` (``hits[i].headers["x-batch-line"]``), so a
test tells them from direct requests. Counters: ``batches_created``, ``files_uploaded``,
``retrieves``; ``hits`` (the FaultServer's) holds every line answered and every direct
request.
"""
from __future__ import annotations

import argparse
import json
import threading
import time
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from fault_server import FaultServer, letter_model, serve_forever, tiktoken_counter

WINDOW_S = 24 * 3600


class _Capture:
    """Stands where an HTTP handler stands for :meth:`FaultServer._handle`: records the
    status and JSON it would send."""

    def __init__(self, url: str, custom_id: str):
        self.path = url
        self.headers: dict[str, str] = {"X-Batch-Line": custom_id}   # marks a batch line
        self.code = 0
        self.payload = None

    def _send(self, code, payload, headers=None, raw=None):
        self.code = code
        self.payload = payload if raw is None else {"error": {"message": raw.decode("latin1")}}


class BatchServer(FaultServer):
    def __init__(self, *, fates: list[str] | None = None, fail: dict[int, int] | None = None,
                 **kw):
        super().__init__(**kw)
        self.fates = list(fates or [])
        self.fail = dict(fail or {})
        self.files: dict[str, dict] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.batches_created = 0
        self.files_uploaded = 0
        self.retrieves = 0
        self._ids = 0
        self._block = threading.Lock()

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> "BatchServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _send(self, code, payload, headers=None, raw: bytes | None = None,
                      ctype="application/json"):
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                server._get(self, self.path.split("?")[0].rstrip("/"))

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/files"):
                    server._upload(self, raw)
                elif path.endswith("/batches"):
                    server._create(self, json.loads(raw or b"{}"))
                elif path.endswith("/cancel"):
                    server._cancel(self, path.split("/")[-2])
                else:
                    server._handle(self, json.loads(raw or b"{}"))

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True,
                                        name="batch-server")
        self._thread.start()
        return self

    def stats(self) -> dict:
        """The FaultServer's counters (batch lines are requests) and the batches and
        files created."""
        return {**super().stats(), "batches": self.batches_created,
                "files": self.files_uploaded}

    # -- ids ------------------------------------------------------------------
    def _id(self, prefix: str) -> str:
        with self._block:
            self._ids += 1
            return f"{prefix}-{self._ids:04d}"

    def _file(self, data: bytes, purpose: str, filename: str) -> dict:
        fid = self._id("file")
        obj = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
               "filename": filename, "purpose": purpose, "status": "processed"}
        self.files[fid] = obj
        self.contents[fid] = data
        return obj

    # -- endpoints --------------------------------------------------------------
    def _upload(self, h, raw: bytes) -> None:
        head = f"Content-Type: {h.headers.get('Content-Type')}\r\n\r\n".encode()
        msg = BytesParser(policy=HTTP).parsebytes(head + raw)
        fields, data, name = {}, b"", "upload.jsonl"
        for part in msg.iter_parts():
            field = part.get_param("name", header="content-disposition")
            if field == "file":
                data = part.get_payload(decode=True) or b""
                name = part.get_filename() or name
            else:
                fields[field] = (part.get_payload(decode=True) or b"").decode()
        if fields.get("purpose") != "batch":
            h._send(400, {"error": {"message": "purpose must be batch", "type":
                                    "invalid_request_error"}})
            return
        self.files_uploaded += 1
        h._send(200, self._file(data, "batch", name))

    def _create(self, h, body: dict) -> None:
        fid = body.get("input_file_id")
        if fid not in self.files or body.get("completion_window") != "24h":
            h._send(400, {"error": {"message": "bad input_file_id or completion_window",
                                    "type": "invalid_request_error"}})
            return
        now = int(time.time())
        bid = self._id("batch")
        with self._block:
            self.batches_created += 1
            fate = self.fates.pop(0) if self.fates else "complete"
        lines = [json.loads(x) for x in self.contents[fid].decode().splitlines() if x.strip()]
        b = {"id": bid, "object": "batch", "endpoint": body.get("endpoint"), "errors": None,
             "input_file_id": fid, "completion_window": "24h", "status": "validating",
             "output_file_id": None, "error_file_id": None, "created_at": now,
             "in_progress_at": None, "expires_at": now + WINDOW_S, "finalizing_at": None,
             "completed_at": None, "failed_at": None, "expired_at": None,
             "cancelling_at": None, "cancelled_at": None,
             "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
             "metadata": body.get("metadata")}
        self.batches[bid] = {"batch": b, "lines": lines, "fate": fate,
                             "fail": self.fail.get(self.batches_created, 0)}
        h._send(200, b)

    def _cancel(self, h, bid: str) -> None:
        entry = self.batches.get(bid)
        if entry is None:
            h._send(404, {"error": {"message": f"no batch {bid}"}})
            return
        b = entry["batch"]
        if b["status"] in ("validating", "in_progress"):
            b["status"], b["cancelling_at"] = "cancelling", int(time.time())
            entry["fate"] = "cancel"
        h._send(200, b)

    def _get(self, h, path: str) -> None:
        parts = path.split("/")
        if path.endswith("/content") and parts[-2] in self.contents:
            h._send(200, None, raw=self.contents[parts[-2]], ctype="application/octet-stream")
        elif parts[-1] in self.files:
            h._send(200, self.files[parts[-1]])
        elif parts[-1] in self.batches:
            self.retrieves += 1
            h._send(200, self._advance(parts[-1]))
        elif path.endswith("/batches"):
            h._send(200, {"object": "list", "data": [e["batch"] for e in self.batches.values()],
                          "has_more": False})
        elif path.endswith("/stats"):
            h._send(200, self.stats())
        elif path.endswith("/models"):
            h._send(200, {"object": "list", "data": [{"id": "fault-model", "object": "model"}]})
        else:
            h._send(404, {"error": {"message": "not found"}})

    # -- the batch's life -----------------------------------------------------------
    def _advance(self, bid: str) -> dict:
        entry = self.batches[bid]
        b, now = entry["batch"], int(time.time())
        if b["status"] == "validating":
            if entry["fate"] == "cancel":          # cancelled by someone else meanwhile
                b.update(status="cancelling", cancelling_at=now)
            elif entry["fate"] == "fail":
                b.update(status="failed", failed_at=now, errors={"object": "list", "data": [
                    {"code": "invalid_request", "message": "the input file is invalid",
                     "param": None, "line": 1}]})
            else:
                b.update(status="in_progress", in_progress_at=now)
        elif b["status"] == "in_progress":
            fate = entry["fate"]
            answered = len(entry["lines"])
            if fate.startswith("expire:"):
                answered = int(fate.split(":")[1])
            self._finish(entry, answered, "expired" if fate.startswith("expire") else "completed")
        elif b["status"] == "cancelling":
            self._finish(entry, 0, "cancelled")
        return b

    def _finish(self, entry: dict, answered: int, status: str) -> None:
        b, now = entry["batch"], int(time.time())
        out, err = [], []
        code = {"expired": "batch_expired", "cancelled": "batch_cancelled"}.get(status)
        for i, line in enumerate(entry["lines"]):
            rid = f"batch_req_{b['id']}_{i}"
            if i >= answered:
                err.append({"id": rid, "custom_id": line["custom_id"], "response": None,
                            "error": {"code": code, "message": f"this request was not "
                                      f"executed: the batch {status}"}})
                continue
            cap = _Capture(line["url"], line["custom_id"])
            if i < entry["fail"]:
                cap._send(500, {"error": {"message": "internal error", "type": "server_error"}})
            else:
                self._handle(cap, line["body"])
            rec = {"id": rid, "custom_id": line["custom_id"],
                   "response": {"status_code": cap.code, "request_id": f"req_{i}",
                                "body": cap.payload}, "error": None}
            (out if cap.code == 200 else err).append(rec)
        counts = {"total": len(entry["lines"]), "completed": len(out), "failed": len(err)}
        b.update(status=status, request_counts=counts, finalizing_at=now)
        b[{"completed": "completed_at", "expired": "expired_at",
           "cancelled": "cancelled_at"}[status]] = now
        if out:
            b["output_file_id"] = self._file(_jsonl(out), "batch_output", "output.jsonl")["id"]
        if err:
            b["error_file_id"] = self._file(_jsonl(err), "batch_output", "errors.jsonl")["id"]


def _jsonl(records: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def main(argv: list[str] | None = None) -> int:
    """A loopback Files + Batches server for benches; prints its URL, serves until killed.
    ``GET /v1/stats`` answers its counters as JSON (the FaultServer's, every batch line
    counted as a request, and ``batches`` / ``files``)."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--letters", action="store_true")
    ap.add_argument("--tiktoken", default=None, metavar="ENCODING")
    a = ap.parse_args(argv)
    s = BatchServer(answers=letter_model if a.letters else None,
                    tokenizer=tiktoken_counter(a.tiktoken) if a.tiktoken else None,
                    chat_overhead=bool(a.tiktoken)).start()
    return serve_forever(s)


if __name__ == "__main__":
    raise SystemExit(main())
