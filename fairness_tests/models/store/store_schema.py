"""The response store's on-disk schema, its version check and its migrations.

``SCHEMA_VERSION`` is written to ``store_info(name='schema')`` and checked every
time a store is opened (:func:`prepare`):

- a new file gets the current schema;
- the current version opens as it is;
- an older version is migrated in place, in one ``BEGIN IMMEDIATE`` transaction
  (a crash leaves the old store untouched; two processes opening it at once
  migrate it once);
- a newer or unreadable version is refused with a :class:`DataError` naming the
  file and both versions.

Versions
    1. Rows keyed by sha256 of ``json.dumps(fields, sort_keys=True)`` with
       ``fields = {api_base, backend, model, kind, messages, choices, decoding,
       seed, repeat}``; numbers as written (``1`` and ``1.0`` differed).
    2. Rows keyed by :meth:`Request.key` (``api_base`` out of the key, canonical
       numbers); a ``fingerprint`` column referencing ``fingerprints(id,
       fingerprint_json)``: what the backend that answered adds to the request (prompt
       format, chat template, weights). Migrating from 1 re-keys every row (two rows
       that become one key keep the successful, then the latest one), leaves the
       fingerprint unknown (NULL: such rows are served without a check) and drops
       the leases (their keys changed).

:class:`Response` fields added since go to ``extra_json`` (a JSON object; a reader
sets the fields it knows and ignores the rest), so they need no column and no version:
a loglikelihood response's ``logprob``, ``continuation_tokens`` and ``is_greedy`` are
there, kept only when set (``Response.SPARSE``), so every other row is as it was.

Additions that a reader of the same version can ignore do not bump the version; they
are created when a store is opened (:func:`prepare`, under the write lock, once):

- ``capabilities(model, server, feature, supported, value, reason, updated_at)``,
  primary key (model, server, feature): what a server was seen to support
  (:mod:`fairness_tests.models.store.capabilities`). A store without it (written before it
  existed) gets it on open; an older fairness-tests reading a store with it ignores
  it, so stores stay readable both ways and exported records are unchanged.
- ``batch_jobs(batch_id, model, server, endpoint, label, attempt, input_file_id, status,
  submitted_at, completed_at, collected_at, output_file_id, error_file_id, lines,
  discount)`` and ``batch_lines(batch_id, key, custom_id)``: the provider batch jobs of
  ``--batch`` runs, each recorded with its request keys the moment it is created, so a
  killed or repeated run polls them instead of submitting again
  (:mod:`fairness_tests.models.batch.batch_ledger`). Not exported either.

JSONL records carry ``"schema"``; a record without it is version 1 and is
migrated the same way on import (:func:`record_v1_to_v2`).
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from fairness_tests.core.errors import DataError
from fairness_tests.core.io import sha256_text
from fairness_tests.models.requests.request import canonical, key_of

SCHEMA_VERSION = 2

RESPONSE_COLUMNS = ("key", "backend", "model", "kind", "request_json", "meta_json", "text",
                    "answer", "letter_probs", "prompt_tokens", "completion_tokens",
                    "latency_s", "cost_usd", "status", "error", "extra_json", "fingerprint",
                    "created_at")
#: Response fields kept in their own columns (others, added later, go to extra_json; of
#: those, the fields of one request kind, ``Response.SPARSE``, only when set: a
#: loglikelihood response's ``logprob``, ``continuation_tokens``, ``is_greedy``)
COLUMN_FIELDS = ("text", "answer", "letter_probs", "prompt_tokens", "completion_tokens",
                 "latency_s", "cost_usd", "status", "error")
INSERT_RESPONSE = (f"INSERT OR REPLACE INTO responses ({', '.join(RESPONSE_COLUMNS)}) "
                   f"VALUES ({','.join('?' * len(RESPONSE_COLUMNS))})")

_RESPONSES = """
CREATE TABLE IF NOT EXISTS {name} (
    key               TEXT PRIMARY KEY,
    backend           TEXT NOT NULL,
    model             TEXT NOT NULL,
    kind              TEXT NOT NULL,
    request_json      TEXT NOT NULL,
    meta_json         TEXT NOT NULL,
    text              TEXT NOT NULL,
    answer            INTEGER,
    letter_probs      TEXT,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    latency_s         REAL,
    cost_usd          REAL,
    status            TEXT NOT NULL,
    error             TEXT NOT NULL,
    extra_json        TEXT,
    fingerprint       TEXT,
    created_at        REAL NOT NULL
);
"""

_OTHERS = """
CREATE INDEX IF NOT EXISTS responses_model ON responses(backend, model);
CREATE INDEX IF NOT EXISTS responses_status ON responses(status);
CREATE TABLE IF NOT EXISTS fingerprints (
    id               TEXT PRIMARY KEY,
    fingerprint_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS leases (
    key     TEXT PRIMARY KEY,
    owner   TEXT NOT NULL,
    expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS store_info (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_ADDED = """
CREATE TABLE IF NOT EXISTS capabilities (
    model      TEXT NOT NULL,
    server     TEXT NOT NULL,
    feature    TEXT NOT NULL,
    supported  INTEGER,
    value      INTEGER,
    reason     TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (model, server, feature)
);
CREATE TABLE IF NOT EXISTS batch_jobs (
    batch_id       TEXT PRIMARY KEY,
    model          TEXT NOT NULL,
    server         TEXT NOT NULL,
    endpoint       TEXT NOT NULL,
    label          TEXT NOT NULL,
    attempt        INTEGER NOT NULL,
    input_file_id  TEXT NOT NULL,
    status         TEXT NOT NULL,
    submitted_at   REAL NOT NULL,
    completed_at   REAL,
    collected_at   REAL,
    output_file_id TEXT,
    error_file_id  TEXT,
    lines          INTEGER NOT NULL,
    discount       TEXT
);
CREATE TABLE IF NOT EXISTS batch_lines (
    batch_id  TEXT NOT NULL,
    key       TEXT NOT NULL,
    custom_id TEXT NOT NULL,
    PRIMARY KEY (batch_id, key)
);
CREATE INDEX IF NOT EXISTS batch_lines_key ON batch_lines(key);
"""
ADDED_TABLES = ("capabilities", "batch_jobs", "batch_lines")


def _version(conn: sqlite3.Connection) -> str | None:
    """The recorded schema version; None for an empty database."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "store_info" in tables:
        row = conn.execute("SELECT value FROM store_info WHERE name='schema'").fetchone()
        if row is not None:
            return str(row[0])
    if "responses" in tables:
        return "missing"
    return None


def _has_added(conn: sqlite3.Connection) -> bool:
    marks = ",".join("?" * len(ADDED_TABLES))
    n = conn.execute(f"SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name IN "
                     f"({marks})", ADDED_TABLES).fetchone()[0]
    return int(n) == len(ADDED_TABLES)


def prepare(conn: sqlite3.Connection, path: Path) -> None:
    """Create, check or migrate the schema of the store at ``path`` (see the module
    docstring), and add the tables added since (:data:`ADDED_TABLES`). Raises
    :class:`DataError` for a version it cannot read."""
    if _version(conn) == str(SCHEMA_VERSION):
        if not _has_added(conn):
            _add_tables(conn)
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _version(conn)             # again, under the write lock
        if version is None:
            _run(conn, _RESPONSES.format(name="responses") + _OTHERS)
            conn.execute("INSERT INTO store_info(name, value) VALUES ('schema', ?)",
                         (str(SCHEMA_VERSION),))
        elif version == "1":
            _migrate_1_to_2(conn)
        elif version != str(SCHEMA_VERSION):
            raise DataError(_refusal(version), path=path)
        _run(conn, _ADDED)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _add_tables(conn: sqlite3.Connection) -> None:
    """Create the :data:`ADDED_TABLES` in a store of the current version; a store that
    cannot be written (a read-only file) is left as it is (it keeps no capabilities)."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        return
    try:
        _run(conn, _ADDED)
        conn.execute("COMMIT")
    except sqlite3.OperationalError:
        conn.execute("ROLLBACK")


def _run(conn: sqlite3.Connection, script: str) -> None:
    """Run DDL statements one by one (``executescript`` would commit the transaction)."""
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _refusal(version: str) -> str:
    if version.isdigit() and int(version) > SCHEMA_VERSION:
        return (f"store schema {version} is newer than this fairness-tests reads (schema "
                f"{SCHEMA_VERSION}): upgrade fairness-tests, or use another --store")
    return (f"store schema {version!r} is not one this fairness-tests knows (it reads "
            f"schema {SCHEMA_VERSION} and migrates schema 1): use another --store")


# ----------------------------------------------------------------------------- version 1

def v1_key(fields: dict[str, Any]) -> str:
    """The schema-1 key of a schema-1 request record."""
    blob = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return sha256_text(blob)


def fields_v1_to_v2(fields: dict[str, Any]) -> dict[str, Any]:
    """Schema-1 request fields -> the key fields :meth:`Request.key_fields` gives for
    the same request (``api_base`` dropped, numbers canonical)."""
    out = {k: v for k, v in fields.items() if k not in ("api_base", "_scrubbed")}
    return canonical(out)


def record_v1_to_v2(rec: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 JSONL record as schema 2: re-keyed, fingerprint unknown."""
    fields = fields_v1_to_v2(rec["request"])
    return {**rec, "schema": SCHEMA_VERSION, "key": key_of(fields), "request": fields,
            "fingerprint": None}


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    cols = [r[1] for r in conn.execute("PRAGMA table_info(responses)")]
    need = [c for c in RESPONSE_COLUMNS if c != "fingerprint"]
    if any(c not in cols for c in need):
        raise DataError(f"a schema-1 store lacks columns {[c for c in need if c not in cols]}")
    conn.execute("DROP TABLE IF EXISTS responses_v2")
    _run(conn, _RESPONSES.format(name="responses_v2"))
    select = ", ".join(c if c != "fingerprint" else "NULL" for c in RESPONSE_COLUMNS)
    best: dict[str, tuple] = {}
    for row in conn.execute(f"SELECT {select} FROM responses"):
        fields = json.loads(row[4])
        if fields.get("_scrubbed"):
            continue          # keyed over a secret it no longer holds: no key can reach it
        new_fields = fields_v1_to_v2(fields)
        new = (key_of(new_fields), *row[1:4], json.dumps(new_fields, sort_keys=True,
                                                         separators=(",", ":"),
                                                         ensure_ascii=False), *row[5:])
        old = best.get(new[0])
        if old is None or _better(new, old):
            best[new[0]] = new
    marks = ",".join("?" * len(RESPONSE_COLUMNS))
    conn.executemany(f"INSERT INTO responses_v2 ({', '.join(RESPONSE_COLUMNS)}) "
                     f"VALUES ({marks})", best.values())
    conn.execute("DROP TABLE responses")
    conn.execute("ALTER TABLE responses_v2 RENAME TO responses")
    _run(conn, _OTHERS)
    conn.execute("DELETE FROM leases")
    conn.execute("INSERT OR REPLACE INTO store_info(name, value) VALUES ('schema', ?)",
                 (str(SCHEMA_VERSION),))


def _better(a: tuple, b: tuple) -> bool:
    """Row ``a`` replaces ``b`` under one key: a success over an error, else the later."""
    status, created = RESPONSE_COLUMNS.index("status"), RESPONSE_COLUMNS.index("created_at")
    if (a[status] == "error") != (b[status] == "error"):
        return b[status] == "error"
    return a[created] > b[created]
