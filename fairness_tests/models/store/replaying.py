"""Serving stored responses without a model: replay, the error for what was never
recorded, and the fingerprint check of every stored row served.

:func:`replay` (and the ``replay`` backend) never asks a model: a miss raises
:class:`MissingResponsesError` saying how many keys are missing, the first few with their
meta, and the command that records them (:data:`RECORD_HINT`). Every stored response
served, live or in replay, is checked against the asking backend's fingerprint
(:func:`check_fingerprints`; a replay backend's is the one of the backend whose
recordings it replays): a difference raises
:class:`~fairness_tests.core.errors.FingerprintMismatchError` naming the entries that
differ. Rows stored without a fingerprint (migrated from schema 1) are served unchecked.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from fairness_tests.core.errors import MissingResponsesError
from fairness_tests.models.requests.answers import ParseChoice, apply_parse, copy_response
from fairness_tests.models.requests.request import Request, Response
from fairness_tests.models.store.fingerprint import fingerprint_id, mismatch_error, same_answerer
from fairness_tests.models.store.scrub import scrub
from fairness_tests.models.store.store import ResponseStore

#: The command shown when replay misses; the pytest plugin / CLI may replace it.
#: Fields: {backend}, {model}, {store}, {n}.
RECORD_HINT = ("record them with `fairness-tests audit --live --model {model} "
               "--backend {backend} --store {store}` (or `pytest --fairness-live "
               "--fairness-model {model} --fairness-store {store}`), then `fairness-tests "
               "store export fixtures/recordings/FILE.jsonl.gz` and list FILE in "
               "fixtures/recordings/manifest.yaml to commit them")


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
    exc.missing_count = len(missing)
    exc.missing_keys = [r.key() for r in missing]
    exc.missing_requests = list(missing)
    return exc


def replay(requests: Sequence[Request], store: ResponseStore, *,
           parse_choice: ParseChoice | None = None,
           fingerprint: dict[str, str] | None = None) -> list[Response]:
    """Stored responses in request order; any miss raises :class:`MissingResponsesError`,
    a row recorded with another ``fingerprint`` :class:`FingerprintMismatchError`."""
    keys = [r.key() for r in requests]
    got = store.get_many(keys)
    missing = list({k: r for k, r in zip(keys, requests, strict=True) if k not in got}.values())
    if missing:
        raise missing_error(missing, store, total=len(set(keys)))
    check_fingerprints(store, got, fingerprint, requests[0] if requests else None)
    return [apply_parse(r, copy_response(got[k]), parse_choice)
            for r, k in zip(requests, keys, strict=True)]


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
