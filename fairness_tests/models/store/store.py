"""The response store: every model answer the suite uses, asked once, kept for ever.

An embedded SQLite database in WAL mode with one row per request, keyed by
:meth:`Request.key` (sha256 of the canonical request fields). A row holds the
request's key fields (JSON), its ``meta`` (JSON, the protocol's columns), every
:class:`Response` field, ``created_at`` and the id of the answering backend's
fingerprint (:mod:`.fingerprint`; the ``fingerprints`` table holds each one once).

Schema
    Versioned (:mod:`.store_schema`): checked on every open; an older store is
    migrated in place, a newer or unknown one refused by name.

Crash safety
    Each completed response is committed as soon as it is reported: on its own
    (:meth:`ResponseStore.put`), or with the other responses of its batch in one
    transaction (:meth:`ResponseStore.put_many`, what a batched backend's runner
    uses). A SIGKILL in the middle of a run keeps every committed row and
    corrupts nothing (SQLite's journal guarantees it); a re-run asks only for
    what is missing.

Sharing between processes (pytest-xdist workers, parallel runs)
    A lease table ``leases(key, owner, expires)``: before asking a backend, a
    process *claims* the keys it will ask for in one ``BEGIN IMMEDIATE``
    transaction. A key that is stored, or leased by another live owner, is not
    claimed, so the same key is never requested twice at once. A lease expires
    after ``lease_s`` seconds unless renewed, and at once when its owner is a
    dead process on this host (so a SIGKILLed run does not block the next one)
    (:mod:`.store_leases`).

Secrets
    API keys and auth headers are never stored: :func:`.scrub.scrub` removes
    ``api_key`` / ``authorization`` / ``headers`` entries from any JSON stored,
    and masks ``sk-...`` tokens, ``Bearer ...`` credentials, URL credentials and
    the values of ``*_API_KEY`` / ``*_TOKEN`` / ``*_SECRET`` environment
    variables in every stored string (error texts, meta, fingerprints).

Capabilities
    ``capabilities(model, server, feature, ...)``: what each server was seen to
    support (:mod:`.capabilities`), so a re-run does not probe it again
    (:meth:`ResponseStore.capabilities`, :meth:`~ResponseStore.remember_capabilities`,
    :meth:`~ResponseStore.forget_capabilities`). Not exported: a recording holds
    answers, not servers.

JSONL export/import
    One JSON object per line, sorted by key (so committed recordings diff
    well): ``{schema, key, request, meta, response, fingerprint, created_at}``;
    gzip when the path ends in ``.gz`` (with a zero mtime, so the same content
    gives the same bytes). Records of schema 1 are migrated on import
    (:mod:`.store_jsonl`).
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import Any

from fairness_tests.core.errors import DataError
from fairness_tests.core.io import canonical_dumps
from fairness_tests.core.paths import default_store_path
from fairness_tests.models.requests.request import STATUSES, Request, Response, canonical_json
from fairness_tests.models.store.capabilities import CapabilityRecord
from fairness_tests.models.store.fingerprint import fingerprint_id
from fairness_tests.models.store.scrub import StoredTextScrubber
from fairness_tests.models.store.store_jsonl import Recordings
from fairness_tests.models.store.store_leases import Leases, new_owner
from fairness_tests.models.store.store_schema import (
    COLUMN_FIELDS,
    INSERT_RESPONSE,
    SCHEMA_VERSION,
    prepare,
)

__all__ = ["ResponseStore", "open_store", "SCHEMA_VERSION"]

# ----------------------------------------------------------------------------- store

class ResponseStore(Leases, Recordings):
    """The SQLite response store (see the module docstring).

    Thread-safe (one connection per process behind a lock) and fork-safe (a
    child process opens its own connection). Use as a context manager or call
    :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike, *, lease_s: float = 60.0,
                 busy_timeout_s: float = 30.0, durable: bool = False,
                 owner: str | None = None):
        self.path = Path(path)
        self.lease_s = float(lease_s)
        self.busy_timeout_s = float(busy_timeout_s)
        self.durable = durable
        self._owner = owner
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._connect()

    # -- connection ---------------------------------------------------------
    @property
    def owner(self) -> str:
        """This process's lease owner id (``host:pid:random``)."""
        with self._lock:
            self._connect()
            return self._owner  # type: ignore[return-value]  # set by _connect()

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self._pid != -1 and self._pid != os.getpid():
            self._owner = None             # a forked child is a new owner
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._open_connection()
        try:
            prepare(conn, self.path)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise DataError(f"not a usable response store: {exc}", path=self.path) from exc
        except DataError:
            conn.close()
            raise
        self._conn, self._pid = conn, os.getpid()
        self._fingerprints: set[str] = set()
        if self._owner is None:
            self._owner = new_owner()
        return conn

    def _open_connection(self) -> sqlite3.Connection:
        """A connection in WAL mode. Switching a new store to WAL takes an exclusive lock
        and SQLite answers "database is locked" at once, without its busy handler, when
        processes open a new store together: retried within the busy timeout."""
        deadline = time.monotonic() + self.busy_timeout_s
        while True:
            conn = None
            try:
                conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout_s,
                                       isolation_level=None, check_same_thread=False)
                conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(f"PRAGMA synchronous={'FULL' if self.durable else 'NORMAL'}")
                return conn
            except sqlite3.DatabaseError as exc:
                if conn is not None:
                    conn.close()
                locked = isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
                if not locked or time.monotonic() > deadline:
                    raise DataError(f"not a usable response store: {exc}",
                                    path=self.path) from exc
                time.sleep(0.05)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                try:
                    self._conn.execute("DELETE FROM leases WHERE owner = ?", (self.owner,))
                except sqlite3.Error:
                    pass
                self._conn.close()
            self._conn = None

    def __enter__(self) -> "ResponseStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _execute(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._connect().execute(sql, tuple(params))

    # -- rows ---------------------------------------------------------------
    @staticmethod
    def _response_from_row(row: sqlite3.Row | tuple) -> Response:
        (key, text, answer, letter_probs, pt, ct, lat, cost, status, error, extra) = row
        r = Response(key=key, text=text, answer=answer,
                     letter_probs=json.loads(letter_probs) if letter_probs else None,
                     prompt_tokens=pt, completion_tokens=ct, latency_s=lat, cost_usd=cost,
                     status=status, error=error)
        if extra:
            known = {f.name for f in dc_fields(Response)}
            for k, v in json.loads(extra).items():
                if k in known:
                    setattr(r, k, v)
        return r

    _SELECT = ("SELECT key, text, answer, letter_probs, prompt_tokens, completion_tokens, "
               "latency_s, cost_usd, status, error, extra_json FROM responses")

    def get(self, key: str) -> Response | None:
        row = self._execute(self._SELECT + " WHERE key = ?", (key,)).fetchone()
        return None if row is None else self._response_from_row(row)

    def get_many(self, keys: Iterable[str]) -> dict[str, Response]:
        keys = list(dict.fromkeys(keys))
        out: dict[str, Response] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            q = self._SELECT + f" WHERE key IN ({','.join('?' * len(chunk))})"
            for row in self._execute(q, chunk).fetchall():
                out[row[0]] = self._response_from_row(row)
        return out

    def statuses(self, keys: Iterable[str]) -> dict[str, str]:
        """``{key: status}`` of the stored rows among ``keys`` (what a count of what is
        missing needs, without reading the responses)."""
        keys = list(dict.fromkeys(keys))
        out: dict[str, str] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            q = f"SELECT key, status FROM responses WHERE key IN ({','.join('?' * len(chunk))})"
            out.update(self._execute(q, chunk).fetchall())
        return out

    def has(self, key: str) -> bool:
        return self._execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None

    def missing(self, requests: Iterable[Request], *, retry_errors: bool = False) -> list[Request]:
        """Requests (first of each key) with no stored row (or an error row, if asked)."""
        by_key: dict[str, Request] = {}
        for r in requests:
            by_key.setdefault(r.key(), r)
        got = self.statuses(by_key)
        return [r for k, r in by_key.items()
                if k not in got or (retry_errors and got[k] == "error")]

    def _row_values(self, request: Request, response: Response,
                    scrubber: StoredTextScrubber, fp_id: str | None) -> tuple:
        key = request.key()
        if response.key and response.key != key:
            raise DataError("response does not belong to this request", key=response.key)
        if response.status not in STATUSES:
            raise DataError(f"unknown status {response.status!r}; expected one of {STATUSES}",
                            key=key)
        fields = canonical_dumps(request.key_fields())
        stored_fields = scrubber.json_text(fields)
        if stored_fields != fields:         # a secret in the request: the key cannot be checked
            stored_fields = canonical_dumps({**json.loads(stored_fields), "_scrubbed": True})
        extra = {f.name: getattr(response, f.name) for f in dc_fields(Response)
                 if f.name not in COLUMN_FIELDS and f.name != "key"
                 and not (f.name in Response.SPARSE and getattr(response, f.name) is None)}
        return (
            key, request.backend, request.model, request.kind,
            stored_fields, scrubber.json_text(canonical_dumps(request.meta)),
            response.text or "", response.answer,
            canonical_dumps(response.letter_probs) if response.letter_probs is not None else None,
            response.prompt_tokens, response.completion_tokens, response.latency_s,
            response.cost_usd, response.status, scrubber.text(response.error or ""),
            scrubber.json_text(canonical_dumps(extra)) if extra else None, fp_id, time.time(),
        )

    def _register(self, conn: sqlite3.Connection, fp: dict[str, str] | None) -> None:
        """Insert the (scrubbed) fingerprint ``fp`` into ``fingerprints`` once."""
        if fp:
            fp_id = fingerprint_id(fp)
            if fp_id not in self._fingerprints:
                conn.execute("INSERT OR IGNORE INTO fingerprints(id, fingerprint_json) "
                             "VALUES (?,?)", (fp_id, canonical_json(fp)))
                self._fingerprints.add(fp_id)

    def put(self, request: Request, response: Response, *, secrets: Iterable[str] = (),
            fingerprint: dict[str, str] | None = None) -> None:
        """Store (replace) the response to ``request``, answered by a backend with this
        ``fingerprint``, and release its lease; committed at once."""
        self.put_many([(request, response)], secrets=secrets, fingerprint=fingerprint)

    def put_many(self, pairs: Iterable[tuple[Request, Response]], *,
                 secrets: Iterable[str] = (), fingerprint: dict[str, str] | None = None) -> int:
        """Store many responses (one backend fingerprint) in one transaction."""
        scrubber = StoredTextScrubber(secrets)
        fp = json.loads(scrubber.json_text(canonical_dumps(fingerprint))) if fingerprint else None
        fp_id = fingerprint_id(fp) if fp else None
        rows = [self._row_values(q, r, scrubber, fp_id) for q, r in pairs]
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._register(conn, fp)
                conn.executemany(INSERT_RESPONSE, rows)
                conn.executemany("DELETE FROM leases WHERE key = ?", [(v[0],) for v in rows])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                self._fingerprints.clear()      # an insert rolled back: register again
                raise
        return len(rows)

    # -- fingerprints ---------------------------------------------------------
    def fingerprint_counts(self, keys: Iterable[str]) -> dict[str | None, int]:
        """How many of the stored ``keys`` carry each fingerprint id (None: unknown)."""
        keys = list(dict.fromkeys(keys))
        out: dict[str | None, int] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            q = (f"SELECT fingerprint, COUNT(*) FROM responses WHERE key IN "
                 f"({','.join('?' * len(chunk))}) GROUP BY fingerprint")
            for fp_id, n in self._execute(q, chunk).fetchall():
                out[fp_id] = out.get(fp_id, 0) + int(n)
        return out

    def fingerprint(self, fp_id: str) -> dict[str, str] | None:
        """The fingerprint stored under ``fp_id``."""
        row = self._execute("SELECT fingerprint_json FROM fingerprints WHERE id = ?",
                            (fp_id,)).fetchone()
        return None if row is None else json.loads(row[0])

    def __len__(self) -> int:
        return int(self._execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def keys(self) -> list[str]:
        return [r[0] for r in self._execute("SELECT key FROM responses ORDER BY key")]

    def meta(self, key: str) -> dict[str, Any] | None:
        row = self._execute("SELECT meta_json FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    # -- capabilities -----------------------------------------------------------
    def capabilities(self, model: str | None = None,
                     server: str | None = None) -> list[CapabilityRecord]:
        """What servers were seen to support (:mod:`.capabilities`), sorted by model,
        server and feature; only those of ``model`` / ``server`` when given. [] for a
        store that keeps none (read-only, written before the table existed)."""
        where, params = [], []
        for col, val in (("model", model), ("server", server)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        q = ("SELECT model, server, feature, supported, value, reason, updated_at "
             "FROM capabilities" + (" WHERE " + " AND ".join(where) if where else "")
             + " ORDER BY model, server, feature")
        try:
            rows = self._execute(q, params).fetchall()
        except sqlite3.OperationalError:
            return []
        return [CapabilityRecord(m, s, f, None if sup is None else bool(sup), v, r, t)
                for m, s, f, sup, v, r, t in rows]

    def remember_capabilities(self, records: Iterable[CapabilityRecord]) -> int:
        """Store (replace) capability records, one per (model, server, feature), in one
        transaction; the server and reason are scrubbed of secrets. Returns how many."""
        scrubber = StoredTextScrubber()
        rows = [(r.model, scrubber.text(r.server) or "", r.feature,
                 None if r.supported is None else int(bool(r.supported)),
                 None if r.value is None else int(r.value), scrubber.text(r.reason) or "",
                 float(r.updated_at or time.time())) for r in records]
        if not rows:
            return 0
        with self._lock:
            conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return 0                               # a read-only store keeps none
            try:
                conn.executemany("INSERT OR REPLACE INTO capabilities(model, server, feature, "
                                 "supported, value, reason, updated_at) VALUES (?,?,?,?,?,?,?)",
                                 rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return len(rows)

    def forget_capabilities(self, model: str | None = None, server: str | None = None) -> int:
        """Delete capability records (of ``model`` / ``server``, or all); the next run
        probes those servers again. Returns how many."""
        where, params = [], []
        for col, val in (("model", model), ("server", server)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        q = "DELETE FROM capabilities" + (" WHERE " + " AND ".join(where) if where else "")
        with self._lock:
            return int(self._connect().execute(q, params).rowcount)

    def merged_from(self) -> list[dict[str, Any]]:
        """The stores merged into this one (``store merge``), oldest first: ``source``
        (the path as given), ``rows`` (its responses) and ``added`` (new here);
        [] for a store recorded in one place."""
        row = self._execute("SELECT value FROM store_info WHERE name = 'merged_from'").fetchone()
        return json.loads(row[0]) if row else []

    # -- stats and prune ----------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Counts by backend/model/status, file sizes, live leases. Per group ``cost_usd``
        sums the rows whose cost is known, ``priced`` counts them (the rest have none: a
        model without a price, a local model, an error)."""
        rows = self._execute("SELECT backend, model, status, COUNT(*), "
                             "COALESCE(SUM(prompt_tokens),0), COALESCE(SUM(completion_tokens),0), "
                             "COALESCE(SUM(cost_usd),0), COUNT(cost_usd) FROM responses "
                             "GROUP BY backend, model, status ORDER BY backend, model, status"
                             ).fetchall()
        groups = [{"backend": b, "model": m, "status": s, "count": n, "prompt_tokens": pt,
                   "completion_tokens": ct, "cost_usd": c, "priced": p}
                  for b, m, s, n, pt, ct, c, p in rows]
        by_status = {s: 0 for s in STATUSES}
        for g in groups:
            by_status[g["status"]] = by_status.get(g["status"], 0) + g["count"]
        size = sum(p.stat().st_size for p in
                   (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")) if p.exists())
        leases = self._execute("SELECT COUNT(*) FROM leases WHERE expires >= ?",
                               (time.time(),)).fetchone()[0]
        return {"path": str(self.path), "total": sum(by_status.values()), "by_status": by_status,
                "groups": groups, "size_bytes": size, "live_leases": int(leases)}

    def prune(self, *, model: str | None = None, backend: str | None = None,
              status: str | None = None, older_than_s: float | None = None,
              vacuum: bool = True) -> int:
        """Delete rows matching every given condition; returns how many."""
        if status is not None and status not in STATUSES:
            raise DataError(f"unknown status {status!r}; expected one of {STATUSES}")
        since = None if older_than_s is None else time.time() - float(older_than_s)
        conditions = [(c, v) for c, v in (("model = ?", model), ("backend = ?", backend),
                                          ("status = ?", status), ("created_at < ?", since))
                      if v is not None]
        where = [c for c, _ in conditions]
        params = [v for _, v in conditions]
        if not where:
            raise DataError("prune needs at least one condition (model, backend, status, "
                            "older than)")
        with self._lock:
            n = self._connect().execute("DELETE FROM responses WHERE " + " AND ".join(where),
                                        params).rowcount
            if n:   # a recording imported before may miss rows now: read it again next time
                self._connect().execute("DELETE FROM store_info WHERE name LIKE 'imported:%'")
            if vacuum and n:
                self._connect().execute("VACUUM")
        return int(n)

    def integrity_ok(self) -> bool:
        return self._execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def open_store(path: str | os.PathLike | None = None, **options: Any) -> ResponseStore:
    """The store at ``path`` (default :func:`fairness_tests.core.paths.default_store_path`)."""
    return ResponseStore(path if path is not None else default_store_path(), **options)
