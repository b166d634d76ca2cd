"""Ask a backend, through the store: every answer is asked once and kept.

:func:`ask` looks every request up in the store; only misses go to the backend, after
this process has *claimed* them (a lease in the store, :mod:`.store_leases`, so xdist
workers and parallel runs never ask the same key twice at once). Misses go in batches
(never splitting the repeats of one prompt, which a backend may answer with one call or
one forward pass); each response is committed the moment the backend reports it (via
``on_response``), so a crash loses nothing done and a re-run asks only for what is
missing. A backend that computes in batches (the transformers backend, see
:class:`~fairness_tests.models.backends.base.Reporter`) gets its responses of one batch
committed in one transaction when it closes the batch; whatever it reported before a
fault is committed too. Keys leased by another process are waited for (bounded by
``wait_timeout_s``) and read from the store when they land; if the other process dies,
its leases lapse and this one claims them.

A backend whose capabilities say ``replay`` (:class:`~.backends.base.Capabilities`) is
never given a request: :func:`~.replaying.replay` serves the store or raises
:class:`~fairness_tests.core.errors.MissingResponsesError`. Every response is stored with
the answering backend's :meth:`fingerprint`; every stored response served is checked
against it (:func:`~.replaying.check_fingerprints`).

Backend options that are part of a request's key (the litellm backend's prompt format
and answer prefix) are put into the requests first (:func:`stamp_requests`), so the keys
say how each prompt was sent. What the store remembers about servers
(:mod:`.capabilities`) is handed to the backend before it asks, and what it learned is
stored after (also when it raises, e.g. a repeat mode the server rejected).

Counts (:class:`~.answers.AskCounts`, from :func:`ask_counted`) and parsing
(:func:`~.answers.apply_parse`): :mod:`.answers`. Error rows are asked again on the next
run (``retry_errors``), everything else is served.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from fairness_tests.core.errors import FairnessTestsError
from fairness_tests.models.asking.progress import Progress
from fairness_tests.models.backends.base import Reporter, capabilities_of
from fairness_tests.models.requests.answers import (
    AskCounts,
    ParseChoice,
    apply_parse,
    copy_response,
    count_responses,
)
from fairness_tests.models.requests.repeat_modes import batches
from fairness_tests.models.requests.request import Request, Response
from fairness_tests.models.store.replaying import check_fingerprints, replay
from fairness_tests.models.store.store import ResponseStore

PROGRESS_MIN_ITEMS = 20   # automatic progress bar only for at least this many misses


def stamp_requests(requests: Sequence[Request], backend: Any) -> list[Request]:
    """``requests`` with the key fields the backend's options give them
    (``backend.request_fields(request)``; a backend without the hook, or a field a
    request already has, leaves it as it is). Call it before computing keys that must
    match the store (:func:`ask` does)."""
    fields_of = getattr(backend, "request_fields", None)
    if fields_of is None:
        return list(requests)
    out = []
    for r in requests:
        f = {k: v for k, v in fields_of(r).items() if getattr(r, k) is None and v is not None}
        out.append(r.with_(**f) if f else r)
    return out


def _load_capabilities(backend: Any, store: ResponseStore) -> None:
    load = getattr(backend, "load_capabilities", None)
    if load is not None:
        load(store.capabilities())


def _save_capabilities(backend: Any, store: ResponseStore) -> None:
    learned = getattr(backend, "learned_capabilities", None)
    if learned is not None:
        records = learned()
        if records:
            store.remember_capabilities(records)


# ----------------------------------------------------------------------------- ask

class _Recorder(Reporter):
    """Stores what a backend reports and moves the progress bar.

    Until the backend calls :meth:`begin` every response is committed on its own;
    after it, responses are buffered and committed together at :meth:`batch_done`
    (and by :meth:`flush` when the backend returns or fails)."""

    def __init__(self, store: ResponseStore, secrets: list[str], parse_choice,
                 results: dict[str, Response], pending: set[str], lock: threading.Lock,
                 bar: Progress | None, fingerprint: dict[str, str] | None = None):
        self.store, self.secrets, self.parse_choice = store, secrets, parse_choice
        self.fingerprint = fingerprint
        self.results, self.pending, self.lock, self.bar = results, pending, lock, bar
        self.batched = False
        self.buffer: list[tuple[Request, Response]] = []

    def __call__(self, request: Request, response: Response) -> None:
        response.key = request.key()
        apply_parse(request, response, self.parse_choice)
        if self.batched:
            self.buffer.append((request, response))
        else:
            self._commit([(request, response)])

    def phase(self, text: str) -> None:
        if self.bar is not None:
            self.bar.phase(text)

    def begin(self, total_work: int, unit: str, note: str = "") -> None:
        self.batched = True
        if self.bar is not None:
            self.bar.start_work(total_work, unit, note)

    def batch_done(self, work: int) -> None:
        self._commit(self.buffer, work=work)
        self.buffer = []

    def flush(self) -> None:
        if self.buffer:
            self._commit(self.buffer)
            self.buffer = []

    def _commit(self, pairs: list[tuple[Request, Response]], work: int = 0) -> None:
        if pairs:
            self.store.put_many(pairs, secrets=self.secrets, fingerprint=self.fingerprint)
            with self.lock:
                for q, r in pairs:
                    self.pending.discard(q.key())
                    self.results[q.key()] = r
        if self.bar is not None:
            tok = sum((r.prompt_tokens or 0) + (r.completion_tokens or 0) for _, r in pairs)
            cost = sum(r.cost_usd or 0.0 for _, r in pairs)
            unpriced = sum(r.cost_usd is None and r.status != "error" for _, r in pairs)
            errors = sum(r.status == "error" for _, r in pairs)
            self.bar.update(len(pairs), tokens=tok, cost_usd=cost, errors=errors, work=work,
                            cost_unknown=unpriced)


class _Heartbeat(threading.Thread):
    """Renews this process's leases on pending keys while a backend works."""

    def __init__(self, store: ResponseStore, pending: set[str], lock: threading.Lock):
        super().__init__(daemon=True, name="fairness-lease-heartbeat")
        self.store, self.pending, self.lock = store, pending, lock
        self.stop = threading.Event()

    def run(self) -> None:
        period = max(self.store.lease_s / 3.0, 0.05)
        while not self.stop.wait(period):
            with self.lock:
                keys = list(self.pending)
            if keys:
                try:
                    self.store.renew(keys)
                except Exception:  # a busy database: try again next period
                    pass


def ask(requests: Sequence[Request], backend: Any, store: ResponseStore, *,
        progress: Progress | bool | None = None, batch_size: int | None = None,
        parse_choice: ParseChoice | None = None, retry_errors: bool = True,
        wait_timeout_s: float = 600.0, poll_s: float = 0.1,
        label: str | None = None) -> list[Response]:
    """Responses to ``requests`` in order: stored ones, then the backend for misses
    (:func:`ask_counted` without the counts)."""
    return ask_counted(requests, backend, store, progress=progress, batch_size=batch_size,
                       parse_choice=parse_choice, retry_errors=retry_errors,
                       wait_timeout_s=wait_timeout_s, poll_s=poll_s, label=label)[0]


def ask_counted(requests: Sequence[Request], backend: Any, store: ResponseStore, *,
                progress: Progress | bool | None = None, batch_size: int | None = None,
                parse_choice: ParseChoice | None = None, retry_errors: bool = True,
                wait_timeout_s: float = 600.0, poll_s: float = 0.1,
                label: str | None = None) -> tuple[list[Response], AskCounts]:
    """Responses to ``requests`` in order: stored ones, then the backend for misses;
    and the :class:`AskCounts` of the call.

    ``backend`` follows :class:`~fairness_tests.models.backends.base.Backend`; a
    backend whose capabilities say ``replay`` never gets a request: misses raise
    :class:`~fairness_tests.core.errors.MissingResponsesError`. ``retry_errors``: stored
    error rows are asked again (refusals are kept). ``progress``: a :class:`Progress`, ``False``
    for none, ``None`` for automatic (shown for at least ``PROGRESS_MIN_ITEMS``
    misses). ``batch_size``: at most this many requests per ``backend.answer`` call
    (default: all claimed misses in one call, so the backend batches across the whole
    list). Waiting for keys leased by other processes is bounded by ``wait_timeout_s``.
    The requests are stamped with the backend's key fields first (:func:`stamp_requests`).
    """
    requests = stamp_requests(list(requests), backend)
    keys = [r.key() for r in requests]
    first: dict[str, Request] = {}
    for k, r in zip(keys, requests, strict=True):
        first.setdefault(k, r)
    fingerprint = backend.fingerprint()
    caps = capabilities_of(backend)
    if caps.replay:
        out = replay(requests, store, parse_choice=parse_choice, fingerprint=fingerprint)
        return out, count_responses(requests, out, sent=0, label=label)

    got = store.get_many(first)
    results: dict[str, Response] = {k: v for k, v in got.items()
                                    if not (retry_errors and v.status == "error")}
    check_fingerprints(store, results, fingerprint, requests[0] if requests else None)
    todo = [k for k in first if k not in results]
    if not todo:
        out = _served(requests, keys, results, parse_choice)
        return out, count_responses(requests, out, sent=0, label=label)

    bar: Progress | None
    if isinstance(progress, Progress):
        bar = progress
    elif progress is False or (progress is None and len(todo) < PROGRESS_MIN_ITEMS):
        bar = None
    else:
        name = label or f"{getattr(backend, 'name', '?')}:{first[todo[0]].model}"
        bar = Progress(len(todo), name, show_tokens=caps.remote,
                       store_hits=len(first) - len(todo))

    secrets = list(getattr(backend, "secrets", lambda: [])())
    pending: set[str] = set()
    lock = threading.Lock()

    recorder = _Recorder(store, secrets, parse_choice, results, pending, lock, bar,
                         fingerprint)

    _load_capabilities(backend, store)
    sent = 0
    heartbeat = _Heartbeat(store, pending, lock)
    heartbeat.start()
    deadline = time.monotonic() + wait_timeout_s
    remaining = list(todo)
    try:
        while remaining:
            claimed = store.claim(remaining, retry_errors=retry_errors)
            with lock:
                pending.update(claimed)
            for chunk in batches(claimed, first, batch_size or max(len(claimed), 1)):
                batch = [first[k] for k in chunk]
                sent += len(batch)
                try:
                    out = backend.answer(batch, on_response=recorder)
                finally:
                    recorder.flush()         # what was reported is kept, even on a fault
                # a backend that returned without reporting some: store those now
                missed = [(q, r) for q, r in zip(batch, out, strict=True) if q.key() in pending]
                for q, r in missed:
                    recorder(q, r)
                recorder.flush()
            store.release(claimed)
            with lock:
                pending.difference_update(claimed)
            # keys that others hold: wait for them to land, or for their leases to lapse
            remaining = [k for k in remaining if k not in results]
            if not remaining:
                break
            while True:
                landed = store.get_many(remaining)
                check_fingerprints(store, landed, fingerprint, first[remaining[0]])
                for k, v in landed.items():
                    if not (retry_errors and v.status == "error"):
                        results[k] = v
                        if bar is not None:
                            bar.update(1, cached=True)
                remaining = [k for k in remaining if k not in results]
                if not remaining:
                    break
                held = store.leased_by_others(remaining)
                if len(held) < len(remaining):
                    break                    # some are free (lapsed or released): claim them
                if time.monotonic() > deadline:
                    raise FairnessTestsError(
                        f"timed out after {wait_timeout_s:g}s waiting for {len(remaining)} "
                        f"responses leased by other processes on {store.path}")
                time.sleep(poll_s)
            if time.monotonic() > deadline and remaining:
                raise FairnessTestsError(
                    f"timed out after {wait_timeout_s:g}s with {len(remaining)} responses "
                    f"still missing from {store.path}")
    finally:
        heartbeat.stop.set()
        heartbeat.join(timeout=5)
        with lock:
            left = list(pending)
        if left:
            store.release(left)
        _save_capabilities(backend, store)
        if bar is not None and not isinstance(progress, Progress):
            bar.close()
    out = _served(requests, keys, results, parse_choice)
    return out, count_responses(requests, out, sent=sent, label=label)


def _served(requests: Sequence[Request], keys: Sequence[str], results: dict[str, Response],
            parse_choice: ParseChoice | None) -> list[Response]:
    """A parsed copy of the response to each request, in request order."""
    return [apply_parse(r, copy_response(results[k]), parse_choice)
            for r, k in zip(requests, keys, strict=True)]
