"""Ask a backend, through the store: every answer is asked once and kept.

:func:`ask` looks every request up in the store; only misses go to the
backend, after this process has *claimed* them (a lease in the store, so xdist
workers and parallel runs never ask the same key twice at once). Misses go in
batches (never splitting the repeats of one prompt, which a backend may answer
with one call or one forward pass); each response is committed the moment the backend reports it (via
``on_response``), so a crash loses nothing done and a re-run asks only for
what is missing. A backend that computes in batches (the transformers backend,
see :class:`~fairness_tests.models.backends.base.Reporter`) gets its responses of
one batch committed in one transaction when it closes the batch; whatever it
reported before a fault is committed too. Keys leased by another process are waited for (bounded by
``wait_timeout_s``) and read from the store when they land; if the other
process dies, its leases lapse and this one claims them.

:func:`replay` (and the ``replay`` backend) never asks a model: a miss raises
:class:`MissingResponsesError` saying how many keys are missing, the first
few with their meta, and the command that records them.

Fingerprints: every response is stored with the answering backend's
:meth:`fingerprint` (what it adds to the request: prompt format, chat template,
weights); every stored response served, live or in replay, is checked against
the asking backend's fingerprint (a replay backend's is the one of the backend
whose recordings it replays), and a difference raises
:class:`~fairness_tests.core.errors.FingerprintMismatchError` naming the entries that
differ. Rows stored without a fingerprint (migrated from schema 1) are served
unchecked.

Backend options that are part of a request's key (the litellm backend's prompt
format and answer prefix) are put into the requests first (:func:`stamp_requests`),
so the keys say how each prompt was sent. What the store remembers about servers
(:mod:`.capabilities`) is handed to the backend before it asks, and what it learned
is stored after (also when it raises, e.g. a repeat mode the server rejected).

Counts (:class:`AskCounts`, from :func:`ask_counted`): how many of the requests were
sent to the backend, answered from the store, failed (with the first error message),
refused, truncated, invalid, and how many prompts had a letter distribution and how
many of those a letter mass below :data:`~.repeat_modes.MIN_LETTER_MASS`. Error rows
are asked again on the next run (``retry_errors``), everything else is served.

Multiple-choice parsing is pluggable: ``parse_choice(request, text) -> index |
None`` is applied to responses of ``kind="choice"`` that carry text but no
parsed answer (a backend that reads letter probabilities sets the answer
itself). Without a callable, ``request.meta["parse_choice"]`` may name one as
``"module:function"``; else :func:`default_parse_choice` is used.
"""
from __future__ import annotations

import dataclasses
import importlib
import threading
import time
from typing import Any, Callable, Iterable, Literal, Sequence

from fairness_tests.core.errors import FairnessTestsError, MissingResponsesError
from fairness_tests.models.backends.base import Reporter
from fairness_tests.models.choice import parse_position
from fairness_tests.models.fingerprint import fingerprint_id, mismatch_error, same_answerer
from fairness_tests.models.progress import Progress
from fairness_tests.models.repeat_modes import MIN_LETTER_MASS, batches, group_key
from fairness_tests.models.request import Request, Response
from fairness_tests.models.scrub import scrub
from fairness_tests.models.store import ResponseStore

ParseChoice = Callable[[Request, str], "int | None"]

#: The command shown when replay misses; the pytest plugin / CLI may replace it.
#: Fields: {backend}, {model}, {store}, {n}.
RECORD_HINT = ("record them with `fairness-tests audit --live --model {model} --backend {backend} "
               "--store {store}` (or `pytest --fairness-live --fairness-model {model} --fairness-store "
               "{store}`), then `fairness-tests store export fixtures/recordings/FILE.jsonl.gz` "
               "and list FILE in fixtures/recordings/manifest.yaml to commit them")

PROGRESS_MIN_ITEMS = 20   # automatic progress bar only for at least this many misses


# ----------------------------------------------------------------------------- counts

@dataclasses.dataclass
class AskCounts:
    """What one :func:`ask_counted` call did, over its distinct request keys.

    ``requests``: distinct keys; ``sent``: keys this process gave the backend (an
    error row asked again counts); ``from_store``: keys answered without this process
    asking (stored before, or recorded meanwhile by another process), so ``sent +
    from_store == requests``. Over the final responses: ``failed`` (status ``error``:
    the request failed after its retries; ``first_error`` is the first one's message,
    in request order), ``refused``, ``truncated``, ``invalid`` (status ``ok`` but a
    multiple-choice answer that is no option). ``letter_prompts``: prompts (requests
    differing only in repeat share one) whose answers carry a ``letter_mass``;
    ``low_mass_prompts``: of those, the ones below :data:`MIN_LETTER_MASS` (in the
    API ``logprobs`` mode their answers are invalid; a local backend keeps them).
    """
    label: str | None = None
    requests: int = 0
    sent: int = 0
    from_store: int = 0
    failed: int = 0
    first_error: str | None = None
    refused: int = 0
    truncated: int = 0
    invalid: int = 0
    letter_prompts: int = 0
    low_mass_prompts: int = 0

    @property
    def low_mass_share(self) -> float | None:
        """``low_mass_prompts / letter_prompts``; None without letter distributions."""
        return self.low_mass_prompts / self.letter_prompts if self.letter_prompts else None

    @property
    def complete(self) -> bool:
        """True when no request ended in an error."""
        return self.failed == 0

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["low_mass_share"] = self.low_mass_share
        return d


AnswerState = Literal["valid", "invalid", "low_mass", "error", "refused", "truncated"]


def answer_state(request: Request, response: Response) -> AnswerState:
    """What a response is worth to a rule: ``error`` / ``refused`` / ``truncated`` (its
    status); for an ``ok`` multiple-choice response without an answer ``low_mass`` (its
    letter distribution was below :data:`MIN_LETTER_MASS`: nothing was measured) or
    ``invalid`` (the model answered something that is no option); else ``valid``. A rule
    whose cell has no ``valid`` answer has nothing to be evaluated on."""
    if response.status != "ok":
        return response.status  # type: ignore[return-value]
    if request.kind != "choice" or response.answer is not None:
        return "valid"
    if response.letter_mass is not None and response.letter_mass < MIN_LETTER_MASS:
        return "low_mass"
    return "invalid"


def count_responses(requests: Sequence[Request], responses: Sequence[Response], *,
                    sent: int, label: str | None = None) -> AskCounts:
    """:class:`AskCounts` of ``responses`` (in the order of ``requests``), of which
    ``sent`` keys were sent to the backend."""
    c = AskCounts(label=label, sent=sent)
    seen: set[str] = set()
    masses: dict[tuple[str, int], float] = {}
    for q, r in zip(requests, responses):
        k = q.key()
        if k in seen:
            continue
        seen.add(k)
        c.requests += 1
        if r.status == "error":
            c.failed += 1
            if c.first_error is None:
                c.first_error = r.error or "error"
        elif r.status == "refused":
            c.refused += 1
        elif r.status == "truncated":
            c.truncated += 1
        elif answer_state(q, r) in ("invalid", "low_mass"):
            c.invalid += 1
        if r.letter_mass is not None:
            g = group_key(q)
            masses[g] = min(masses.get(g, r.letter_mass), r.letter_mass)
    c.from_store = c.requests - c.sent
    c.letter_prompts = len(masses)
    c.low_mass_prompts = sum(m < MIN_LETTER_MASS for m in masses.values())
    return c


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


# ----------------------------------------------------------------------------- parsing

def default_parse_choice(request: Request, text: str) -> int | None:
    """Position of the answer in ``request.choices``: the one parser
    (:func:`fairness_tests.models.choice.parse_position`), given the option texts as
    shown when the request carries them (``meta["shown_options"]``)."""
    if not text or not request.choices:
        return None
    shown = request.meta.get("shown_options") if request.meta else None
    return parse_position(text, shown, request.choices)


def _resolve_parser(request: Request, parse_choice: ParseChoice | None) -> ParseChoice:
    if parse_choice is not None:
        return parse_choice
    target = request.meta.get("parse_choice") if request.meta else None
    if isinstance(target, str) and ":" in target:
        module, name = target.split(":", 1)
        return getattr(importlib.import_module(module), name)
    return default_parse_choice


def apply_parse(request: Request, response: Response,
                parse_choice: ParseChoice | None) -> Response:
    """Fill ``response.answer`` from its text for a multiple-choice request."""
    if (request.kind == "choice" and response.status == "ok" and response.answer is None
            and response.letter_probs is None and response.text):
        ans = _resolve_parser(request, parse_choice)(request, response.text)
        if ans is not None and not (0 <= int(ans) < len(request.choices)):
            ans = None
        response.answer = None if ans is None else int(ans)
    return response


# ----------------------------------------------------------------------------- replay

def missing_error(missing: Sequence[Request], store: ResponseStore | None,
                  total: int | None = None, show: int = 5) -> MissingResponsesError:
    """The error for requests with no recorded response."""
    first = missing[0]
    lines = [f"{len(missing)} of {total if total is not None else len(missing)} requests "
             f"have no recorded response"
             + (f" in {store.path}" if store is not None else "") + "."]
    lines.append(f"First {min(show, len(missing))} missing:")
    for r in missing[:show]:
        meta = ", ".join(f"{k}={v}" for k, v in sorted(r.meta.items())) if r.meta else "-"
        lines.append(f"  {r.key()[:16]}  {r.backend}:{r.model} {r.kind} repeat={r.repeat}  "
                     f"[{meta}]")
    lines.append(RECORD_HINT.format(backend=first.backend, model=first.model or "<model>",
                                    store=store.path if store is not None else "<store>",
                                    n=len(missing)))
    exc = MissingResponsesError("\n".join(lines))
    exc.missing_count = len(missing)                      # type: ignore[attr-defined]
    exc.missing_keys = [r.key() for r in missing]         # type: ignore[attr-defined]
    exc.missing_requests = list(missing)                  # type: ignore[attr-defined]
    return exc


def replay(requests: Sequence[Request], store: ResponseStore, *,
           parse_choice: ParseChoice | None = None,
           fingerprint: dict[str, str] | None = None) -> list[Response]:
    """Stored responses in request order; any miss raises :class:`MissingResponsesError`,
    a row recorded with another ``fingerprint`` :class:`FingerprintMismatchError`."""
    keys = [r.key() for r in requests]
    got = store.get_many(keys)
    missing = list({k: r for k, r in zip(keys, requests) if k not in got}.values())
    if missing:
        raise missing_error(missing, store, total=len(set(keys)))
    check_fingerprints(store, got, fingerprint, requests[0] if requests else None)
    return [apply_parse(r, _copy(got[k]), parse_choice) for r, k in zip(requests, keys)]


def check_fingerprints(store: ResponseStore, keys: Iterable[str],
                       fingerprint: dict[str, str] | None, example: Request | None) -> None:
    """Raise :class:`FingerprintMismatchError` when a stored row among ``keys`` was
    recorded with a fingerprint other than ``fingerprint`` (``None``/``{}``: no check;
    rows without a fingerprint pass; entries added to the fingerprint after a row was
    recorded are not checked for it, :func:`~.fingerprint.same_answerer`)."""
    if not fingerprint:
        return
    keys = list(keys)
    asked = scrub(fingerprint)                    # as the store keeps it
    want = fingerprint_id(asked)
    counts = store.fingerprint_counts(keys)
    other = {fp: n for fp, n in counts.items() if fp is not None and fp != want
             and not same_answerer(store.fingerprint(fp) or {}, asked)}
    if not other:
        return
    fp_id, n = max(other.items(), key=lambda kv: kv[1])
    recorded = store.fingerprint(fp_id) or {"fingerprint": fp_id}
    raise mismatch_error(recorded, fingerprint, sum(other.values()), len(keys),
                         example.backend if example else "?",
                         example.model if example else "?", store.path)


def _copy(r: Response) -> Response:
    """An independent copy (a request asked twice gets two responses to mutate)."""
    c = dataclasses.replace(r)
    if r.letter_probs is not None:
        c.letter_probs = list(r.letter_probs)
    return c


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
    ``replay`` backend (``backend.name == "replay"``) never gets a request: misses
    raise :class:`MissingResponsesError`. ``retry_errors``: stored error rows are
    asked again (refusals are kept). ``progress``: a :class:`Progress`, ``False``
    for none, ``None`` for automatic (shown for at least ``PROGRESS_MIN_ITEMS``
    misses). ``batch_size``: at most this many requests per ``backend.answer`` call
    (default: all claimed misses in one call, so the backend batches across the whole
    list). Waiting for keys leased by other processes is bounded by ``wait_timeout_s``.
    The requests are stamped with the backend's key fields first (:func:`stamp_requests`).
    """
    requests = stamp_requests(list(requests), backend)
    keys = [r.key() for r in requests]
    first: dict[str, Request] = {}
    for k, r in zip(keys, requests):
        first.setdefault(k, r)
    fingerprint = backend.fingerprint()
    if getattr(backend, "name", "") == "replay":
        out = replay(requests, store, parse_choice=parse_choice, fingerprint=fingerprint)
        return out, count_responses(requests, out, sent=0, label=label)

    got = store.get_many(first)
    results: dict[str, Response] = {k: v for k, v in got.items()
                                    if not (retry_errors and v.status == "error")}
    check_fingerprints(store, results, fingerprint, requests[0] if requests else None)
    todo = [k for k in first if k not in results]
    if not todo:
        out = [apply_parse(r, _copy(results[k]), parse_choice) for r, k in zip(requests, keys)]
        return out, count_responses(requests, out, sent=0, label=label)

    bar: Progress | None
    if isinstance(progress, Progress):
        bar = progress
    elif progress is False or (progress is None and len(todo) < PROGRESS_MIN_ITEMS):
        bar = None
    else:
        name = label or f"{getattr(backend, 'name', '?')}:{first[todo[0]].model}"
        bar = Progress(len(todo), name, show_tokens=getattr(backend, "name", "") == "litellm",
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
                missed = [(q, r) for q, r in zip(batch, out) if q.key() in pending]
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
    out = [apply_parse(r, _copy(results[k]), parse_choice) for r, k in zip(requests, keys)]
    return out, count_responses(requests, out, sent=sent, label=label)


def missing_requests(requests: Iterable[Request], store: ResponseStore) -> list[Request]:
    """The requests (one per key) the store has no row for."""
    return store.missing(requests)
