"""Recordings: the store's rows as JSONL, exported and imported.

One JSON object per line, sorted by key (so committed recordings diff well):
``{schema, key, request, meta, response, fingerprint, created_at}``; gzip when the path
ends in ``.gz`` (with a zero mtime, so the same content gives the same bytes:
:func:`fairness_tests.core.io.write_jsonl`). Records of schema 1 are migrated on
import (re-keyed, fingerprint unknown); every record is checked (fields, key, status,
fingerprint) and a bad line is a :class:`DataError` naming the file and line.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairness_tests.core.errors import DataError
from fairness_tests.core.io import canonical_dumps, read_jsonl, sha256_file, write_jsonl
from fairness_tests.models.requests.request import STATUSES, Response, key_of
from fairness_tests.models.store.fingerprint import fingerprint_id
from fairness_tests.models.store.scrub import StoredTextScrubber
from fairness_tests.models.store.store_schema import (
    COLUMN_FIELDS,
    INSERT_RESPONSE,
    RESPONSE_COLUMNS,
    SCHEMA_VERSION,
    record_v1_to_v2,
    v1_key,
)


class Recordings:
    """The JSONL methods of :class:`~fairness_tests.models.store.store.ResponseStore`."""

    if TYPE_CHECKING:  # provided by ResponseStore
        _lock: threading.RLock
        _fingerprints: set[str]

        def _connect(self) -> sqlite3.Connection: ...

        def _execute(self, sql: str, params: Iterable[object] = ()) -> sqlite3.Cursor: ...

        def _register(self, conn: sqlite3.Connection, fp: dict[str, str] | None) -> None: ...

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

        def records() -> Iterator[dict[str, Any]]:
            for rec in self.iter_records():
                if wanted is not None and rec["key"] not in wanted:
                    continue
                if not timestamps:
                    rec.pop("created_at")
                yield rec
        return write_jsonl(path, records())

    def import_jsonl(self, path: str | os.PathLike, *, replace: bool = False,
                     verify_keys: bool = True) -> dict[str, int]:
        """Read records written by :meth:`export_jsonl` (schema-1 records are migrated:
        re-keyed, fingerprint unknown).

        An existing key is kept unless ``replace`` (an existing error row is
        always replaced by a non-error one). Returns counts added/replaced/skipped.
        Bad lines raise :class:`DataError` naming the file and line.

        A file whose every record is in the store (its sha256 noted in ``store_info`` as
        ``imported:<sha256>`` after an import that checked every key) is not read again:
        a warm store's import is one hash of the file. :meth:`prune` forgets the notes.
        """
        path = Path(path)
        if not path.exists():
            raise DataError("no such file", path=path)
        note = f"imported:{sha256_file(path)}" if verify_keys and not replace else None
        if note is not None:
            done = self._execute("SELECT value FROM store_info WHERE name = ?",
                                 (note,)).fetchone()
            if done is not None:
                return {"added": 0, "replaced": 0, "skipped": int(done[0])}
        rows: list[tuple] = []
        fps: dict[str, dict[str, str]] = {}
        known = {f.name for f in dc_fields(Response)}
        scrubber = StoredTextScrubber()
        # rows already stored (and not errors) would be skipped anyway: skip them
        # before scrubbing (a re-import is then cheap)
        stored = {} if replace else dict(self._execute(
            "SELECT key, status FROM responses").fetchall())
        counts = {"added": 0, "replaced": 0, "skipped": 0}
        for lineno, rec in read_jsonl(path):
            rec = self._check_record(rec, path, lineno, verify_keys)
            if stored.get(rec["key"]) not in (None, "error"):
                counts["skipped"] += 1
                continue
            rows.append(self._record_row(rec, known, fps, scrubber))
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
                    conn.execute(INSERT_RESPONSE, row)
                if note is not None:
                    conn.execute("INSERT OR REPLACE INTO store_info(name, value) VALUES (?, ?)",
                                 (note, str(sum(counts.values()))))
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
        fp = json.loads(scrubber.json_text(canonical_dumps(rec["fingerprint"]))) \
            if rec.get("fingerprint") else None
        fp_id = None
        if fp:
            fp_id = fingerprint_id(fp)
            fps[fp_id] = fp
        extra = {k: v for k, v in resp.items() if k in known and k not in COLUMN_FIELDS
                 and k != "key"}
        lp = resp.get("letter_probs")
        return (
            rec["key"], req["backend"], req["model"], req["kind"],
            scrubber.json_text(canonical_dumps(req)),
            scrubber.json_text(canonical_dumps(rec.get("meta") or {})),
            resp.get("text") or "", resp.get("answer"),
            canonical_dumps(lp) if lp is not None else None,
            resp.get("prompt_tokens"), resp.get("completion_tokens"), resp.get("latency_s"),
            resp.get("cost_usd"), resp.get("status", "ok"),
            scrubber.text(resp.get("error") or ""),
            scrubber.json_text(canonical_dumps(extra)) if extra else None, fp_id,
            float(rec.get("created_at") or time.time()),
        )
