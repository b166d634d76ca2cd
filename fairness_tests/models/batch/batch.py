"""``--batch``: the requests the store lacks, asked through a provider's batch API.

:class:`BatchBackend` wraps the litellm backend and answers the runner's misses
(:func:`~fairness_tests.models.asking.runner.ask`: the store, the leases and the commits are the
runner's, as for any backend) with provider batch jobs:

1. **Submit.** The misses become batch lines (:mod:`.batch_lines`: one line per request,
   or per prompt in the ``n`` / ``logprobs`` repeat modes; ``custom_id`` = the request
   key), cut into jobs of at most :data:`~.batch_lines.MAX_LINES` lines and
   :data:`~.batch_lines.MAX_BYTES` bytes, each uploaded (``create_file(purpose="batch")``)
   and created (``create_batch``, completion window 24h). Each job is recorded in the
   store with its keys the moment the provider returns its id (:mod:`.batch_ledger`).
   A key whose latest job is not yet collected is never submitted again: a killed run,
   or the same command run again, polls the recorded jobs instead.
2. **Poll** every ``poll_s`` seconds (``retrieve_batch``) until each job is terminal
   (``completed``, ``failed``, ``expired``, ``cancelled``). With ``wait="none"`` the
   backend raises :class:`BatchPending` instead of waiting (exit code 7; the same
   command collects).
3. **Collect** (``file_content`` of the output and error files): a line answered with
   HTTP 200 is read exactly as the same answer asked directly (then stored by the runner,
   so a replay of the store is a direct run's replay); a line in the error file, or not
   answered (an expired or failed job), is *failed*: resubmitted once as a new job
   (``fallback="batch"``) or asked directly (``fallback="direct"``); what still fails is an
   error row naming why (asked again on a re-run), never an invented answer. Lines of a
   cancelled job are not resubmitted (someone cancelled it): error rows saying so.

Costs are the batch price (:func:`~.batch_lines.batch_price`); :meth:`BatchBackend.report`
gives the run's provenance (:class:`~fairness_tests.models.info.BatchInfo`: jobs, times,
discount, lines that fell back).
"""
from __future__ import annotations

import datetime as _dt
import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Literal

from fairness_tests.core.errors import FairnessTestsError
from fairness_tests.models.asking.runner import stamp_requests
from fairness_tests.models.backends.litellm_import import load_litellm
from fairness_tests.models.backends.litellm_request import call_kwargs
from fairness_tests.models.batch.batch_ledger import BatchJob, BatchLedger
from fairness_tests.models.batch.batch_lines import (
    COMPLETION_WINDOW,
    MAX_BYTES,
    MAX_LINES,
    BatchPrice,
    Line,
    batch_price,
    batch_route,
    failed,
    line_of,
    read_line,
    supported_params,
)
from fairness_tests.models.info import BatchInfo
from fairness_tests.models.requests.repeat_modes import units
from fairness_tests.models.requests.request import Request, Response
from fairness_tests.models.store.scrub import scrub_text, shown_url

POLL_FAILURES = 5        # consecutive failed polls of one job before the run gives up


class BatchPending(FairnessTestsError):
    """Batch jobs are submitted (recorded in the store) and not finished; with
    ``--batch-wait none`` the run stops here (exit 7) and the same command collects."""

    def __init__(self, jobs: list[BatchJob]):
        self.jobs = jobs
        ids = ", ".join(j.batch_id for j in jobs[:5]) + (" ..." if len(jobs) > 5 else "")
        lines = sum(j.lines for j in jobs)
        super().__init__(f"{len(jobs)} batch job(s) with {lines} line(s) submitted and not "
                         f"finished yet ({ids}; recorded in the store); nothing evaluated. "
                         f"Run the same command again to collect them (it polls the recorded "
                         f"jobs and submits nothing twice; --batch-wait all waits for them)")


def iso(t: float | None) -> str | None:
    return None if t is None else _dt.datetime.fromtimestamp(
        t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class BatchBackend:
    """The litellm backend ``inner`` asked through batch jobs (see the module docstring).
    ``store``: the run's response store (its ledger records the jobs); ``model``: the
    run's model (default: ``inner``'s); ``poll_s``,
    ``wait`` (``"all"`` | ``"none"``), ``fallback`` (``"batch"`` | ``"direct"``);
    ``max_lines`` / ``max_bytes``: the provider's limits per job; ``log``: where
    progress lines go (stderr)."""

    def __init__(self, inner: Any, store: Any, *, model: str | None = None,
                 poll_s: float = 60.0,
                 wait: Literal["all", "none"] = "all",
                 fallback: Literal["batch", "direct"] = "batch",
                 max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES,
                 sleep: Callable[[float], None] = time.sleep, log: Any = None):
        self.inner, self.ledger = inner, BatchLedger(store)
        self.name = inner.name
        self.poll_s, self.wait, self.fallback = float(poll_s), wait, fallback
        self.max_lines, self.max_bytes = int(max_lines), int(max_bytes)
        self.sleep, self.log = sleep, log if log is not None else sys.stderr
        self.label = "requests"
        self.model = model or inner.model or ""
        self.route = batch_route(self._model(None))
        self.price: BatchPrice | None = batch_price(self._model(None))
        self._supported = supported_params(self.route)
        self.touched: list[str] = []                      # job ids this process used
        self.fell = {"resubmitted": 0, "direct": 0, "missing": 0}
        self.lines_sent = 0
        self.asked: set[str] = set()
        self._files: dict[str, list[dict]] = {}

    # -- what the runner asks of a backend: the inner backend's ------------------------
    @property
    def capabilities(self):
        return replace(self.inner.capabilities, batch=True)

    def fingerprint(self) -> dict[str, str]:
        return self.inner.fingerprint()

    def secrets(self) -> list[str]:
        return self.inner.secrets()

    def request_fields(self, req: Request) -> dict[str, str | None]:
        return self.inner.request_fields(req)

    def info(self):
        return self.inner.info()

    def totals(self):
        return self.inner.totals()

    def load_capabilities(self, records) -> None:
        self.inner.load_capabilities(records)

    def learned_capabilities(self):
        return self.inner.learned_capabilities()

    # -- helpers ---------------------------------------------------------------------
    def _model(self, req: Request | None) -> str:
        return self.inner._model_and_base(req or Request(messages=(), model=self.model))[0]

    def _creds(self, req: Request | None = None) -> dict[str, Any]:
        """``custom_llm_provider``, ``api_base`` and ``api_key`` of the files and batches
        calls (the key as the direct calls send it; never stored)."""
        req = req or Request(messages=(), model=self.model)
        model, base = self.inner._model_and_base(req)
        kw = call_kwargs(req, model, base, timeout_s=self.inner.timeout_s,
                         api_key=self.inner._api_key, extra={})
        out = {"custom_llm_provider": self.route.calls_provider}
        out.update({k: kw[k] for k in ("api_base", "api_key") if k in kw})
        return out

    @staticmethod
    def _where(creds: dict[str, Any]) -> str:
        """The API base the files and batches calls go to, without user, password, query
        or fragment (a token there); the provider's default when none is set."""
        base = creds.get("api_base")
        return shown_url(str(base)) if base else "its default API base"

    def _say(self, text: str) -> None:
        print(f"fairness-tests: {scrub_text(text, self.secrets())}", file=self.log, flush=True)

    def _lines(self, requests: list[Request]) -> list[Line]:
        return [line_of(self.inner, [requests[i] for i in u], self.route, self._supported)
                for u in units(requests)]

    # -- submit ----------------------------------------------------------------------
    def submit(self, requests: list[Request], attempt: int = 1) -> list[BatchJob]:
        """Submit the ``requests`` not covered by a recorded, uncollected job; return
        every job covering ``requests`` (the recorded ones and the new ones)."""
        if not requests:
            return []
        self.inner._check_params(load_litellm(), requests)
        open_by_key = self.ledger.open_jobs(r.key() for r in requests)
        new = [r for r in requests if r.key() not in open_by_key]
        jobs = {bid: self.ledger.job(bid) for bid in dict.fromkeys(open_by_key.values())}
        if new:
            for chunk in self._chunks(self._lines(new)):
                job = self._create(chunk, attempt)
                jobs[job.batch_id] = job
        out = [j for j in jobs.values() if j is not None]
        self.touched.extend(j.batch_id for j in out if j.batch_id not in self.touched)
        return out

    def _chunks(self, lines: list[Line]) -> list[list[Line]]:
        """``lines`` cut into jobs within :attr:`max_lines` and :attr:`max_bytes`."""
        out: list[list[Line]] = []
        cur: list[Line] = []
        size = 0
        for line in lines:
            n = len(line.jsonl())
            if cur and (len(cur) >= self.max_lines or size + n > self.max_bytes):
                out.append(cur)
                cur, size = [], 0
            cur.append(line)
            size += n
        if cur:
            out.append(cur)
        return out

    def _create(self, lines: list[Line], attempt: int) -> BatchJob:
        """Upload ``lines``, create their job, record it (with its keys) at once."""
        litellm = load_litellm()
        creds = self._creds(lines[0].reqs[0])
        data = b"".join(line.jsonl() for line in lines)
        try:
            f = litellm.create_file(file=(f"fairness-tests-{self.label}.jsonl", data),
                                    purpose="batch", **creds)
            b = litellm.create_batch(completion_window=COMPLETION_WINDOW,
                                     endpoint=self.route.endpoint, input_file_id=f.id,
                                     metadata={"fairness_tests": self.label}, **creds)
        except Exception as exc:
            raise FairnessTestsError(scrub_text(
                f"submitting a batch to {self.route.provider} at {self._where(creds)} "
                f"failed: {exc}", self.secrets())) from None
        job = BatchJob(batch_id=b.id, model=self._model(lines[0].reqs[0]),
                       server=scrub_text(creds.get("api_base") or "", self.secrets()),
                       endpoint=self.route.endpoint, label=self.label, attempt=attempt,
                       input_file_id=f.id, status=str(b.status or "validating"),
                       submitted_at=time.time(), lines=len(lines),
                       discount=self.price.discount if self.price else "unknown")
        self.ledger.record(job, {line.custom_id: [q.key() for q in line.reqs]
                                 for line in lines})
        self.lines_sent += len(lines)
        self._say(f"submitted batch {job.batch_id}: {len(lines)} {self.label} line(s) to "
                  f"{self.route.endpoint} (attempt {attempt}, window {COMPLETION_WINDOW})")
        return job

    # -- poll ------------------------------------------------------------------------
    def pending(self, jobs: list[BatchJob]) -> list[BatchJob]:
        """The ``jobs`` not terminal, each polled once now."""
        return [j for j in (self._refresh(j) for j in jobs) if not j.terminal]

    def wait_for(self, jobs: list[BatchJob]) -> list[BatchJob]:
        """``jobs`` polled until terminal (``wait="none"``: :class:`BatchPending` when any
        is not)."""
        failures = 0
        while True:
            try:
                jobs = [self._refresh(j) for j in jobs]
                failures = 0
            except FairnessTestsError:
                failures += 1
                if failures >= POLL_FAILURES:
                    raise
            running = [j for j in jobs if not j.terminal]
            if not running:
                return jobs
            if self.wait == "none":
                raise BatchPending(running)
            self.sleep(self.poll_s)

    def _refresh(self, job: BatchJob) -> BatchJob:
        """``job`` as the provider reports it now (recorded in the ledger)."""
        if job.terminal:
            return job
        creds = self._creds()
        try:
            b = load_litellm().retrieve_batch(batch_id=job.batch_id, **creds)
        except Exception as exc:
            why = f"polling batch {job.batch_id} at {self._where(creds)} failed: {exc}"
            self._say(why)
            raise FairnessTestsError(scrub_text(why, self.secrets())) from None
        status = str(b.status)
        values: dict[str, Any] = {}
        if status != job.status:
            values["status"] = status
            self._say(f"batch {job.batch_id}: {status}")
        for name in ("output_file_id", "error_file_id"):
            if getattr(b, name, None) and getattr(b, name) != getattr(job, name):
                values[name] = getattr(b, name)
        if status in ("completed", "failed", "expired", "cancelled") and job.completed_at is None:
            done = [getattr(b, n, None) for n in ("completed_at", "failed_at", "expired_at",
                                                  "cancelled_at")]
            values["completed_at"] = float(next((t for t in done if t), time.time()))
        self.ledger.update(job.batch_id, **values)
        return replace(job, **values)

    # -- collect ---------------------------------------------------------------------
    def _records(self, file_id: str | None) -> list[dict]:
        if not file_id:
            return []
        if file_id not in self._files:
            raw = load_litellm().file_content(file_id=file_id, **self._creds())
            text = raw.content.decode("utf-8") if hasattr(raw, "content") else str(raw)
            self._files[file_id] = [json.loads(x) for x in text.splitlines() if x.strip()]
        return self._files[file_id]

    def collect(self, job: BatchJob) -> tuple[dict[str, dict], dict[str, str]]:
        """``(bodies, failures)`` of a terminal job: ``custom_id -> result body`` of the
        lines answered with HTTP 200, ``custom_id -> why`` of the others (error file,
        or not answered at all)."""
        bodies: dict[str, dict] = {}
        why: dict[str, str] = {}
        for rec in self._records(job.output_file_id) + self._records(job.error_file_id):
            cid = rec.get("custom_id")
            if not isinstance(cid, str):     # names none of our lines: nothing to match
                continue
            resp = rec.get("response") or {}
            if resp.get("status_code") == 200 and isinstance(resp.get("body"), dict):
                bodies[cid] = resp["body"]
                continue
            err = rec.get("error") or (resp.get("body") or {}).get("error") or {}
            why[cid] = (f"batch {job.batch_id} line failed "
                        f"(HTTP {resp.get('status_code', '-')}, "
                        f"{err.get('code') or err.get('type') or 'error'}): "
                        f"{err.get('message') or 'no message'}")
        for cid in self.ledger.lines(job.batch_id):
            if cid not in bodies and cid not in why:
                why[cid] = f"batch {job.batch_id} {job.status}: the line was not answered"
        return bodies, {k: scrub_text(v, self.secrets())[:500] for k, v in why.items()}

    # -- answer ----------------------------------------------------------------------
    def answer(self, requests: list[Request],
               on_response: Callable[[Request, Response], None] | None = None
               ) -> list[Response]:
        """The responses to ``requests`` through batch jobs (see the module docstring)."""
        by_key = {r.key(): r for r in requests}
        got: dict[str, Response] = {}

        def report(q: Request, r: Response) -> None:
            got[q.key()] = r
            if on_response is not None:
                on_response(q, r)

        retry = self._round(self.wait_for(self.submit(requests)), by_key, report, final=False)
        if retry:
            self._fall_back(retry, by_key, report)
        return [got.get(r.key()) or failed(r, "no batch line answered it") for r in requests]

    def _round(self, jobs: list[BatchJob], by_key: dict[str, Request],
               report: Callable[[Request, Response], None], final: bool) -> list[str]:
        """Read the terminal ``jobs`` into responses of ``by_key``; return the keys of
        failed lines to try again (``final``: none; they become error rows)."""
        retry: list[str] = []
        for job in jobs:
            last = final or job.attempt >= 2
            bodies, why = self.collect(job)
            lines = self.ledger.lines(job.batch_id)
            for cid, keys in lines.items():
                reqs = [by_key[k] for k in keys if k in by_key]
                if not reqs:
                    continue
                if cid in bodies:
                    line = line_of(self.inner, reqs, self.route, self._supported)
                    reply = read_line(self.inner, line, bodies[cid], self.price)
                    if reply.cost_usd is not None or reply.prompt_tokens is not None:
                        self.inner._tally(reply)
                    for q, r in zip(reqs, reply.responses, strict=True):
                        report(q, r)
                elif last or job.status == "cancelled":
                    self.fell["missing"] += len(reqs)
                    note = " (cancelled: not resubmitted; run again to ask)" \
                        if job.status == "cancelled" else ""
                    for q in reqs:
                        report(q, failed(q, why[cid] + note))
                else:
                    retry.extend(q.key() for q in reqs)
            others = [k for keys in lines.values() for k in keys if k not in by_key]
            if len(self.ledger.store.get_many(others)) == len(set(others)):
                self.ledger.mark_collected(job.batch_id)     # every key of it is had
        return retry

    def _fall_back(self, keys: list[str], by_key: dict[str, Request],
                   report: Callable[[Request, Response], None]) -> None:
        """Failed lines once more: as a new job, or asked directly."""
        reqs = [by_key[k] for k in keys]
        if self.fallback == "direct":
            self.fell["direct"] += len(reqs)
            self._say(f"asking {len(reqs)} failed batch line request(s) directly")
            for q, r in zip(reqs, self.inner.answer(reqs), strict=True):
                report(q, r)
            return
        self.fell["resubmitted"] += len(reqs)
        jobs = self.submit(reqs, attempt=2)
        self._round(self.wait_for(jobs), by_key, report, final=True)

    # -- provenance --------------------------------------------------------------------
    def note(self, requests: list[Request]) -> None:
        """Remember the keys of requests the run asked (as sent: repeat mode applied),
        for :meth:`report`."""
        self.asked.update(r.key() for r in stamp_requests(requests, self))

    def report(self, keys: Iterable[str] = ()) -> BatchInfo:
        """The run's :class:`BatchInfo`: the jobs that hold any of ``keys`` or of the
        requests the run asked (:meth:`note`), or that this process used, oldest first."""
        wanted = set(keys) | self.asked
        jobs = [j for j in self.ledger.jobs()
                if j.batch_id in self.touched
                or wanted.intersection(k for ks in self.ledger.lines(j.batch_id).values()
                                       for k in ks)]
        return BatchInfo(endpoint=self.route.endpoint, completion_window=COMPLETION_WINDOW,
                         discount=self.price.discount if self.price else "unknown",
                         price_source=self.price.source if self.price else None,
                         jobs=[{"batch_id": j.batch_id, "label": j.label,
                                "attempt": j.attempt, "status": j.status, "lines": j.lines,
                                "submitted_at": iso(j.submitted_at),
                                "completed_at": iso(j.completed_at)} for j in jobs],
                         lines=self.lines_sent, **self.fell)
