"""The store's record of provider batch jobs (``--batch``): what was submitted, with
which request keys, and how far each job got.

Tables (created on open, :mod:`.store_schema`): ``batch_jobs`` (one row per job: its
provider id, model, server, endpoint, the protocol it asks for, the attempt (1: first
submission, 2: the one resubmission of failed or expired lines), the input file, the
provider status, when it was submitted, completed and collected, its output and error
files, its line count and the discount it is billed at) and ``batch_lines`` (one row per
request key: the job and the line's ``custom_id``; the repeats of one prompt asked as one
``n`` / ``logprobs`` line share its ``custom_id``, the key of the first of them).

A job is written, keys included, in one transaction the moment the provider returns its
id (:meth:`BatchLedger.record`), so a process killed any time after can be resumed: a
key whose latest job is not yet *collected* is polled, never submitted again
(:meth:`BatchLedger.open_jobs`). A job is *collected* once its results were read into the
store (:meth:`BatchLedger.mark_collected`).
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: the provider statuses after which a job changes no more
TERMINAL = ("completed", "failed", "expired", "cancelled")

_COLUMNS = ("batch_id", "model", "server", "endpoint", "label", "attempt", "input_file_id",
            "status", "submitted_at", "completed_at", "collected_at", "output_file_id",
            "error_file_id", "lines", "discount")


@dataclass
class BatchJob:
    """One row of ``batch_jobs`` (see the module docstring)."""
    batch_id: str
    model: str
    server: str
    endpoint: str
    label: str
    attempt: int
    input_file_id: str
    status: str
    submitted_at: float
    completed_at: float | None = None
    collected_at: float | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    lines: int = 0
    discount: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class BatchLedger:
    """``batch_jobs`` / ``batch_lines`` of one :class:`~.store.ResponseStore`."""

    def __init__(self, store: Any):
        self.store = store

    def _write(self, statements: Iterable[tuple[str, Sequence[Any]]],
               many: Iterable[tuple[str, list[tuple]]] = ()) -> None:
        """Run ``statements`` and ``many`` (executemany) in one transaction."""
        with self.store._lock:
            conn = self.store._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in statements:
                    conn.execute(sql, tuple(params))
                for sql, rows in many:
                    conn.executemany(sql, rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def record(self, job: BatchJob, lines: dict[str, list[str]]) -> None:
        """Record ``job`` and its lines (``custom_id -> the request keys it answers``)."""
        marks = ",".join("?" * len(_COLUMNS))
        rows = [(job.batch_id, k, cid) for cid, keys in lines.items() for k in keys]
        self._write([(f"INSERT OR REPLACE INTO batch_jobs ({', '.join(_COLUMNS)}) VALUES "
                      f"({marks})", [getattr(job, c) for c in _COLUMNS])],
                    [("INSERT OR REPLACE INTO batch_lines(batch_id, key, custom_id) "
                      "VALUES (?,?,?)", rows)])

    def update(self, batch_id: str, **values: Any) -> None:
        """Set columns of one job (status, completed_at, output_file_id, ...)."""
        if values:
            sets = ", ".join(f"{k} = ?" for k in values)
            self._write([(f"UPDATE batch_jobs SET {sets} WHERE batch_id = ?",
                          [*values.values(), batch_id])])

    def mark_collected(self, batch_id: str) -> None:
        self.update(batch_id, collected_at=time.time())

    def job(self, batch_id: str) -> BatchJob | None:
        row = self.store._execute(f"SELECT {', '.join(_COLUMNS)} FROM batch_jobs WHERE "
                                  f"batch_id = ?", (batch_id,)).fetchone()
        return None if row is None else BatchJob(*row)

    def jobs(self, model: str | None = None) -> list[BatchJob]:
        """Every recorded job (of ``model``), oldest first."""
        q = f"SELECT {', '.join(_COLUMNS)} FROM batch_jobs"
        params: tuple = ()
        if model is not None:
            q, params = q + " WHERE model = ?", (model,)
        return [BatchJob(*r) for r in self.store._execute(q + " ORDER BY submitted_at, batch_id",
                                                          params).fetchall()]

    def lines(self, batch_id: str) -> dict[str, list[str]]:
        """``custom_id -> request keys`` of one job (keys in the order recorded)."""
        out: dict[str, list[str]] = {}
        for key, cid in self.store._execute("SELECT key, custom_id FROM batch_lines WHERE "
                                            "batch_id = ? ORDER BY rowid", (batch_id,)):
            out.setdefault(cid, []).append(key)
        return out

    def open_jobs(self, keys: Iterable[str]) -> dict[str, str]:
        """``key -> batch_id`` for the ``keys`` whose latest job is not yet collected
        (still running at the provider, or finished and not yet read)."""
        keys = list(dict.fromkeys(keys))
        out: dict[str, str] = {}
        latest: dict[str, tuple[float, str, float | None]] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            q = (f"SELECT l.key, j.batch_id, j.submitted_at, j.collected_at FROM batch_lines l "
                 f"JOIN batch_jobs j ON j.batch_id = l.batch_id WHERE l.key IN "
                 f"({','.join('?' * len(chunk))})")
            for key, bid, at, collected in self.store._execute(q, chunk).fetchall():
                if key not in latest or (at, bid) > latest[key][:2]:
                    latest[key] = (at, bid, collected)
        for key, (_, bid, collected) in latest.items():
            if collected is None:
                out[key] = bid
        return out
