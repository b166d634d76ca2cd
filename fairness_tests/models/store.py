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
    dead process on this host (so a SIGKILLed run does not block the next one).

Secrets
    API keys and auth headers are never stored: :func:`scrub` removes
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
    gives the same bytes). Records of schema 1 are migrated on import.
"""
from __future__ import annotations

import gzip
import io
import json
import os
import re
import socket
import sqlite3
import threading
import time
import uuid
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from fairness_tests.core.errors import DataError
from fairness_tests.core.paths import default_store_path
from fairness_tests.models.capabilities import CapabilityRecord
from fairness_tests.models.fingerprint import fingerprint_id
from fairness_tests.models.request import STATUSES, Request, Response, canonical_json, key_of
from fairness_tests.models.store_schema import (
    RESPONSE_COLUMNS,
    SCHEMA_VERSION,
    prepare,
    record_v1_to_v2,
    v1_key,
)

if TYPE_CHECKING:
    from fairness_tests.models.capabilities import CapabilityRecord

__all__ = ["ResponseStore", "open_store", "scrub", "scrub_text", "SCHEMA_VERSION"]

# Response fields kept in their own columns (others, added later, go to extra_json).
_COLUMN_FIELDS = ("text", "answer", "letter_probs", "prompt_tokens", "completion_tokens",
                  "latency_s", "cost_usd", "status", "error")

# ----------------------------------------------------------------------------- secrets

_SECRET_KEY_RE = re.compile(r"^(api[_-]?key|x[_-]api[_-]key|authorization|proxy[_-]authorization|"
                            r"headers|extra[_-]headers|access[_-]token|secret|password|cookie)$",
                            re.IGNORECASE)
_SECRET_PATTERNS = [
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), "sk-***"),
    (re.compile(r"(?i)\bBearer\s+[A-Za-z0-9._~+/=\-]+"), "Bearer ***"),
    (re.compile(r"(?i)\b(api[_-]?key|x-api-key|authorization|access_token|token)"
                r"(\"?\s*[:=]\s*\"?)([^\s\"',&}]+)"), r"\1\2***"),
    (re.compile(r"(?i)(https?://)[^/\s:@]+:[^/\s@]+@"), r"\1***@"),   # user:pass@host
]
_SECRET_ENV_RE = re.compile(r"(API_KEY|_TOKEN|_SECRET|PASSWORD)$", re.IGNORECASE)


def _env_secrets() -> list[str]:
    return [v for k, v in os.environ.items() if _SECRET_ENV_RE.search(k) and len(v) >= 8]


def _secret_values(secrets: Iterable[str]) -> list[str]:
    """The given secrets plus the values of secret-looking environment variables
    (read once per scrub call, not once per string)."""
    return [v for v in (*secrets, *_env_secrets()) if v and len(v) >= 4]


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with known secret values and secret-looking tokens masked."""
    return _scrub_text(text, _secret_values(secrets))


def _scrub_text(text: str, values: list[str]) -> str:
    if not text:
        return text
    for v in values:
        text = text.replace(v, "***")
    for pattern, repl in _SECRET_PATTERNS:
        text = pattern.sub(repl, text)
    return text


def scrub(obj: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a JSON-like value without secret entries and with strings scrubbed."""
    return _scrub(obj, _secret_values(secrets))


def _scrub(obj: Any, values: list[str]) -> Any:
    if isinstance(obj, dict):
        return {k: _scrub(v, values) for k, v in obj.items()
                if not (isinstance(k, str) and _SECRET_KEY_RE.match(k))}
    if isinstance(obj, (list, tuple)):
        return [_scrub(v, values) for v in obj]
    if isinstance(obj, str):
        return _scrub_text(obj, values)
    return obj


# anything :func:`scrub` could change contains one of these (lower-cased), or a JSON escape
_NEEDLES = ("sk-", "bearer", "api_key", "api-key", "apikey", "authoriz", "access_token",
            "access-token", "headers", "secret", "password", "cookie", "\\u")
_URL_CREDENTIALS = re.compile(r"://[^/\s]*@")


def _token_word(low: str) -> bool:
    """``token`` at the start of a word (``\btoken``, as the secret patterns match it;
    ``max_tokens`` does not count)."""
    i = low.find("token")
    while i != -1:
        if i == 0 or not (low[i - 1].isalnum() or low[i - 1] == "_"):
            return True
        i = low.find("token", i + 5)
    return False


def _maybe_secret(text: str) -> bool:
    low = text.lower()
    return (any(map(low.__contains__, _NEEDLES)) or _token_word(low)
            or ("@" in low and _URL_CREDENTIALS.search(low) is not None))


class StoredTextScrubber:
    """:func:`scrub_text` and :func:`scrub` for stored text and stored JSON, with a fast
    path: text that contains no secret-looking substring and no known secret value is
    returned as it is (for bulk copies such as ``store merge``)."""

    def __init__(self, secrets: Iterable[str] = ()):
        self.values = _secret_values(secrets)
        self._known = (re.compile("|".join(re.escape(v) for v in self.values))
                       if self.values else None)

    def _maybe(self, text: str) -> bool:
        return _maybe_secret(text) or bool(self._known and self._known.search(text))

    def text(self, text: str | None) -> str | None:
        if not text or not self._maybe(text):
            return text
        return _scrub_text(text, self.values)

    def json_text(self, text: str | None) -> str | None:
        if not text or not self._maybe(text):
            return text
        return _dumps(_scrub(json.loads(text), self.values))


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


# ----------------------------------------------------------------------------- owners

def _new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _owner_dead(owner: str) -> bool:
    """True when ``owner`` names a process on this host that no longer exists."""
    try:
        host, pid_s, _ = owner.rsplit(":", 2)
        pid = int(pid_s)
    except ValueError:
        return False
    if host != socket.gethostname() or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


# ----------------------------------------------------------------------------- store

class ResponseStore:
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
            return self._owner  # type: ignore[return-value]

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
            self._owner = _new_owner()
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

    def has(self, key: str) -> bool:
        return self._execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None

    def missing(self, requests: Iterable[Request], *, retry_errors: bool = False) -> list[Request]:
        """Requests (first of each key) with no stored row (or an error row, if asked)."""
        by_key = {}
        for r in requests:
            by_key.setdefault(r.key(), r)
        got = self.get_many(by_key)
        return [r for k, r in by_key.items()
                if k not in got or (retry_errors and got[k].status == "error")]

    def _row_values(self, request: Request, response: Response,
                    scrubber: StoredTextScrubber, fp_id: str | None) -> tuple:
        key = request.key()
        if response.key and response.key != key:
            raise DataError("response does not belong to this request", key=response.key)
        if response.status not in STATUSES:
            raise DataError(f"unknown status {response.status!r}; expected one of {STATUSES}",
                            key=key)
        fields = _dumps(request.key_fields())
        stored_fields = scrubber.json_text(fields)
        if stored_fields != fields:         # a secret in the request: the key cannot be checked
            stored_fields = _dumps({**json.loads(stored_fields), "_scrubbed": True})
        extra = {f.name: getattr(response, f.name) for f in dc_fields(Response)
                 if f.name not in _COLUMN_FIELDS and f.name != "key"}
        return (
            key, request.backend, request.model, request.kind,
            stored_fields, scrubber.json_text(_dumps(request.meta)),
            response.text or "", response.answer,
            _dumps(response.letter_probs) if response.letter_probs is not None else None,
            response.prompt_tokens, response.completion_tokens, response.latency_s,
            response.cost_usd, response.status, scrubber.text(response.error or ""),
            scrubber.json_text(_dumps(extra)) if extra else None, fp_id, time.time(),
        )

    _INSERT = (f"INSERT OR REPLACE INTO responses ({', '.join(RESPONSE_COLUMNS)}) "
               f"VALUES ({','.join('?' * len(RESPONSE_COLUMNS))})")

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
        fp = json.loads(scrubber.json_text(_dumps(fingerprint))) if fingerprint else None
        fp_id = fingerprint_id(fp) if fp else None
        rows = [self._row_values(q, r, scrubber, fp_id) for q, r in pairs]
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._register(conn, fp)
                conn.executemany(self._INSERT, rows)
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

    # -- leases ---------------------------------------------------------------
    def claim(self, keys: Iterable[str], *, retry_errors: bool = False,
              lease_s: float | None = None) -> list[str]:
        """Lease the given keys to this owner; returns those claimed.

        A key is claimed when it has no stored row (or only an error row, with
        ``retry_errors``) and no live lease by another owner. Expired leases and
        leases of dead local processes are dropped first.
        """
        keys = list(dict.fromkeys(keys))
        if not keys:
            return []
        now = time.time()
        expires = now + (self.lease_s if lease_s is None else lease_s)
        me = self.owner
        claimed: list[str] = []
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("DELETE FROM leases WHERE expires < ?", (now,))
                owners = {o for (o,) in conn.execute("SELECT DISTINCT owner FROM leases")}
                for o in owners:
                    if o != me and _owner_dead(o):
                        conn.execute("DELETE FROM leases WHERE owner = ?", (o,))
                for i in range(0, len(keys), 500):
                    chunk = keys[i:i + 500]
                    marks = ",".join("?" * len(chunk))
                    done = {k: s for k, s in conn.execute(
                        f"SELECT key, status FROM responses WHERE key IN ({marks})", chunk)}
                    leased = {k: o for k, o in conn.execute(
                        f"SELECT key, owner FROM leases WHERE key IN ({marks})", chunk)}
                    for k in chunk:
                        if k in done and not (retry_errors and done[k] == "error"):
                            continue
                        if k in leased and leased[k] != me:
                            continue
                        claimed.append(k)
                conn.executemany("INSERT OR REPLACE INTO leases(key, owner, expires) "
                                 "VALUES (?,?,?)", [(k, me, expires) for k in claimed])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return claimed

    def renew(self, keys: Iterable[str], *, lease_s: float | None = None) -> None:
        """Extend this owner's leases on ``keys``."""
        expires = time.time() + (self.lease_s if lease_s is None else lease_s)
        keys = list(keys)
        with self._lock:
            conn = self._connect()
            conn.executemany("UPDATE leases SET expires = ? WHERE key = ? AND owner = ?",
                             [(expires, k, self.owner) for k in keys])

    def release(self, keys: Iterable[str] | None = None) -> None:
        """Drop this owner's leases (on ``keys``, or all)."""
        with self._lock:
            conn = self._connect()
            if keys is None:
                conn.execute("DELETE FROM leases WHERE owner = ?", (self.owner,))
            else:
                conn.executemany("DELETE FROM leases WHERE key = ? AND owner = ?",
                                 [(k, self.owner) for k in keys])

    def leased_by_others(self, keys: Iterable[str]) -> set[str]:
        keys = list(keys)
        out: set[str] = set()
        now = time.time()
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            q = (f"SELECT key, owner FROM leases WHERE expires >= ? AND owner != ? "
                 f"AND key IN ({','.join('?' * len(chunk))})")
            for k, o in self._execute(q, [now, self.owner, *chunk]).fetchall():
                if not _owner_dead(o):
                    out.add(k)
        return out

    # -- capabilities -----------------------------------------------------------
    def capabilities(self, model: str | None = None,
                     server: str | None = None) -> list["CapabilityRecord"]:
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

    def remember_capabilities(self, records: Iterable["CapabilityRecord"]) -> int:
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
        """Counts by backend/model/status, file sizes, live leases."""
        rows = self._execute("SELECT backend, model, status, COUNT(*), "
                             "COALESCE(SUM(prompt_tokens),0), COALESCE(SUM(completion_tokens),0), "
                             "COALESCE(SUM(cost_usd),0) FROM responses "
                             "GROUP BY backend, model, status ORDER BY backend, model, status"
                             ).fetchall()
        groups = [{"backend": b, "model": m, "status": s, "count": n, "prompt_tokens": pt,
                   "completion_tokens": ct, "cost_usd": c} for b, m, s, n, pt, ct, c in rows]
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
        where, params = [], []
        if model is not None:
            where.append("model = ?"); params.append(model)
        if backend is not None:
            where.append("backend = ?"); params.append(backend)
        if status is not None:
            if status not in STATUSES:
                raise DataError(f"unknown status {status!r}; expected one of {STATUSES}")
            where.append("status = ?"); params.append(status)
        if older_than_s is not None:
            where.append("created_at < ?"); params.append(time.time() - float(older_than_s))
        if not where:
            raise DataError("prune needs at least one condition (model, backend, status, "
                            "older than)")
        with self._lock:
            n = self._connect().execute("DELETE FROM responses WHERE " + " AND ".join(where),
                                        params).rowcount
            if vacuum and n:
                self._connect().execute("VACUUM")
        return int(n)

    def integrity_ok(self) -> bool:
        return self._execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    # -- JSONL --------------------------------------------------------------
    def iter_records(self) -> Iterator[dict[str, Any]]:
        """Every row as an export record, sorted by key."""
        fps = {i: json.loads(j) for i, j in
               self._execute("SELECT id, fingerprint_json FROM fingerprints").fetchall()}
        q = ("SELECT key, request_json, meta_json, text, answer, letter_probs, prompt_tokens, "
             "completion_tokens, latency_s, cost_usd, status, error, extra_json, fingerprint, "
             "created_at FROM responses ORDER BY key")
        for (key, req, meta, text, answer, lp, pt, ct, lat, cost, status, error, extra,
             fp_id, created) in self._execute(q).fetchall():
            response = {"text": text, "answer": answer,
                        "letter_probs": json.loads(lp) if lp else None,
                        "prompt_tokens": pt, "completion_tokens": ct, "latency_s": lat,
                        "cost_usd": cost, "status": status, "error": error}
            if extra:
                response.update(json.loads(extra))
            yield {"schema": SCHEMA_VERSION, "key": key, "request": json.loads(req),
                   "meta": json.loads(meta), "response": response,
                   "fingerprint": fps.get(fp_id) if fp_id else None, "created_at": created}

    def export_jsonl(self, path: str | os.PathLike, *, timestamps: bool = True,
                     keys: Iterable[str] | None = None) -> int:
        """Write every row (or only those of ``keys``) to ``path`` (gzip if it ends with
        ``.gz``); returns the count."""
        wanted = None if keys is None else set(keys)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        n = 0
        with open(tmp, "wb") as raw:
            if path.suffix == ".gz":
                gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)
                out = io.TextIOWrapper(gz, encoding="utf-8", newline="\n")
            else:
                gz = None
                out = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
            for rec in self.iter_records():
                if wanted is not None and rec["key"] not in wanted:
                    continue
                if not timestamps:
                    rec.pop("created_at")
                out.write(_dumps(rec) + "\n")
                n += 1
            out.flush()
            out.detach()
            if gz is not None:
                gz.close()
        os.replace(tmp, path)
        return n

    def import_jsonl(self, path: str | os.PathLike, *, replace: bool = False,
                     verify_keys: bool = True) -> dict[str, int]:
        """Read records written by :meth:`export_jsonl` (schema-1 records are migrated:
        re-keyed, fingerprint unknown).

        An existing key is kept unless ``replace`` (an existing error row is
        always replaced by a non-error one). Returns counts added/replaced/skipped.
        Bad lines raise :class:`DataError` naming the file and line.
        """
        path = Path(path)
        if not path.exists():
            raise DataError("no such file", path=path)
        opener = gzip.open if path.suffix == ".gz" else open
        rows: list[tuple] = []
        fps: dict[str, dict[str, str]] = {}
        known = {f.name for f in dc_fields(Response)}
        scrubber = StoredTextScrubber()
        # rows already stored (and not errors) would be skipped anyway: skip them
        # before scrubbing (a re-import is then cheap)
        stored = {} if replace else dict(self._execute(
            "SELECT key, status FROM responses").fetchall())
        counts = {"added": 0, "replaced": 0, "skipped": 0}
        try:
            with opener(path, "rt", encoding="utf-8") as fh:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise DataError(f"not valid JSON ({exc.msg})", path=path,
                                        line=lineno) from None
                    rec = self._check_record(rec, path, lineno, verify_keys)
                    if stored.get(rec["key"]) not in (None, "error"):
                        counts["skipped"] += 1
                        continue
                    rows.append(self._record_row(rec, known, fps, scrubber))
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            raise DataError(f"cannot read: {exc}", path=path) from None
        status_col = RESPONSE_COLUMNS.index("status")
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                for fp in fps.values():
                    self._register(conn, fp)
                for row in rows:
                    cur = conn.execute("SELECT status FROM responses WHERE key = ?",
                                       (row[0],)).fetchone()
                    if cur is None:
                        counts["added"] += 1
                    elif replace or (cur[0] == "error" and row[status_col] != "error"):
                        counts["replaced"] += 1
                    else:
                        counts["skipped"] += 1
                        continue
                    conn.execute(self._INSERT, row)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                self._fingerprints.clear()
                raise
        return counts

    @staticmethod
    def _check_record(rec: Any, path: Path, lineno: int, verify_keys: bool) -> dict[str, Any]:
        """Validate one export record; a schema-1 record comes back migrated."""
        def bad(msg: str) -> DataError:
            return DataError(msg, path=path, line=lineno,
                             key=rec.get("key") if isinstance(rec, dict) else None)
        if not isinstance(rec, dict):
            raise bad("expected a JSON object")
        for name in ("key", "request", "response"):
            if name not in rec:
                raise bad(f"missing field {name!r}")
        req, resp = rec["request"], rec["response"]
        if not isinstance(req, dict) or not isinstance(resp, dict):
            raise bad("'request' and 'response' must be objects")
        for name in ("backend", "model", "kind", "messages"):
            if name not in req:
                raise bad(f"request lacks {name!r}")
        schema = rec.get("schema", 1)
        if schema not in (1, SCHEMA_VERSION):
            raise bad(f"record schema {schema!r} is not one this fairness-tests reads "
                      f"(schema {SCHEMA_VERSION}, and schema 1 migrated): upgrade fairness-tests")
        key_fn = v1_key if schema == 1 else key_of
        if verify_keys and not req.get("_scrubbed"):
            try:
                ok = key_fn(req) == rec["key"]
            except DataError as exc:
                raise bad(str(exc)) from None
            if not ok:
                raise bad("key does not match the request fields (edited or corrupt record)")
        status = resp.get("status", "ok")
        if status not in STATUSES:
            raise bad(f"unknown status {status!r}; expected one of {STATUSES}")
        fp = rec.get("fingerprint")
        if fp is not None and not (isinstance(fp, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in fp.items())):
            raise bad("'fingerprint' must be an object of strings or null")
        if schema == 1:
            if req.get("_scrubbed"):
                raise bad("a schema-1 record keyed over a secret cannot be re-keyed: "
                          "record it again")
            rec = record_v1_to_v2(rec)
        return rec

    @staticmethod
    def _record_row(rec: dict[str, Any], known: set[str], fps: dict[str, dict[str, str]],
                    scrubber: "StoredTextScrubber") -> tuple:
        """The row of a checked record; its (scrubbed) fingerprint goes into ``fps``."""
        req, resp = rec["request"], rec["response"]
        fp = json.loads(scrubber.json_text(_dumps(rec["fingerprint"]))) \
            if rec.get("fingerprint") else None
        fp_id = None
        if fp:
            fp_id = fingerprint_id(fp)
            fps[fp_id] = fp
        extra = {k: v for k, v in resp.items() if k in known and k not in _COLUMN_FIELDS
                 and k != "key"}
        lp = resp.get("letter_probs")
        return (
            rec["key"], req["backend"], req["model"], req["kind"],
            scrubber.json_text(_dumps(req)), scrubber.json_text(_dumps(rec.get("meta") or {})),
            resp.get("text") or "", resp.get("answer"),
            _dumps(lp) if lp is not None else None,
            resp.get("prompt_tokens"), resp.get("completion_tokens"), resp.get("latency_s"),
            resp.get("cost_usd"), resp.get("status", "ok"),
            scrubber.text(resp.get("error") or ""),
            scrubber.json_text(_dumps(extra)) if extra else None, fp_id,
            float(rec.get("created_at") or time.time()),
        )


def open_store(path: str | os.PathLike | None = None, **options: Any) -> ResponseStore:
    """The store at ``path`` (default :func:`fairness_tests.core.paths.default_store_path`)."""
    return ResponseStore(path if path is not None else default_store_path(), **options)
