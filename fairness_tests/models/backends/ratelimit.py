"""Request and token rate limits that hold across processes.

:class:`RateLimiter` spaces request starts so that at most ``rpm`` requests and
``tpm`` tokens go out per minute, counted over every process that uses the same
state file (pytest-xdist workers, concurrent audits sharing a store: the audit
puts it beside the store, ``<store>.limits``).

The rule is the generic cell rate algorithm without burst: the state holds, per
scope (the model), the earliest time the next request may start for each limit,
``next_request`` and ``next_token``. A request estimated at ``c`` tokens starts
at ``t = max(now, next_request, next_token)`` and moves them to

    next_request = t + 60 / rpm        next_token = t + c * 60 / tpm

so that any run of requests takes at least ``60 * (n - 1) / rpm`` seconds and
``60 * (tokens - c_last) / tpm``: the rate never exceeds either cap. ``c`` is an
estimate made before the call (prompt characters / 4 + the completion budget);
:meth:`RateLimiter.settle` moves ``next_token`` by ``(actual - c) * 60 / tpm``
once the provider reports the real count.

The state is a small SQLite database; each reservation is one ``BEGIN
IMMEDIATE`` transaction, so processes take turns and every start is reserved
exactly once. A start that wakes up late (a busy event loop) takes a fresh slot
instead of going out together with the next ones, so the requests a server sees
are spaced too, not only the reservations. Times are wall-clock (``time.time()``),
shared by the processes of one machine. Without a path the state is private to
the process.
"""
from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from pathlib import Path

from fairness_tests.core.errors import ConfigError

_SCHEMA = ("CREATE TABLE IF NOT EXISTS limits (scope TEXT PRIMARY KEY, "
           "next_request REAL NOT NULL, next_token REAL NOT NULL)")


MAX_LATE = 5        # re-reservations for one start woken late, then it goes as it is


def estimate_tokens(prompt_chars: int, max_tokens: int) -> int:
    """Tokens a request may use, before it is sent: ``ceil(chars / 4) + max_tokens``."""
    return -(-int(prompt_chars) // 4) + max(0, int(max_tokens))


class RateLimiter:
    """See the module docstring. ``rpm``/``tpm``: caps (None: no cap on that one);
    ``path``: the shared state file (None: this process only)."""

    def __init__(self, rpm: float | None = None, tpm: float | None = None,
                 path: str | os.PathLike[str] | None = None):
        for name, value in (("rpm", rpm), ("tpm", tpm)):
            if value is not None and not float(value) > 0:
                raise ConfigError(f"{name} must be a positive number, got {value!r}",
                                  key=f"--{name}")
        self.rpm = float(rpm) if rpm else None
        self.tpm = float(tpm) if tpm else None
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self.waited_s = 0.0                  # total time this process was held back
        self.late = 0                        # slots left unused because a start woke late

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            target = ":memory:"
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                target = str(self.path)
            conn = sqlite3.connect(target, timeout=30, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute(_SCHEMA)
            self._conn = conn
        return self._conn

    def reserve(self, tokens: int = 0, scope: str = "") -> float:
        """Reserve the next start for a request of about ``tokens`` tokens; returns the
        wall-clock time it may start at (now or later)."""
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT next_request, next_token FROM limits "
                                   "WHERE scope = ?", (scope,)).fetchone()
                now = time.time()
                nr, nt = row if row is not None else (now, now)
                start = max(now, nr if self.rpm else now, nt if self.tpm else now)
                nr = start + 60.0 / self.rpm if self.rpm else start
                nt = start + tokens * 60.0 / self.tpm if self.tpm else start
                conn.execute("INSERT OR REPLACE INTO limits(scope, next_request, next_token) "
                             "VALUES (?,?,?)", (scope, nr, nt))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return start

    def settle(self, estimated: int, actual: int, scope: str = "") -> None:
        """Correct the token reservation of a finished request by ``actual - estimated``."""
        if not self.tpm or actual == estimated:
            return
        with self._lock:
            self._connect().execute("UPDATE limits SET next_token = next_token + ? "
                                    "WHERE scope = ?",
                                    ((actual - estimated) * 60.0 / self.tpm, scope))

    async def wait(self, tokens: int = 0, scope: str = "") -> None:
        """Reserve a start (:meth:`reserve`) and sleep until it. A start woken up later
        than :attr:`slack_s` after its slot (the event loop was busy, e.g. with a client's
        first-call set-up) would go out together with the starts after it: its slot is
        left unused and a new one reserved (at most :data:`MAX_LATE` times)."""
        for _ in range(MAX_LATE + 1):
            start = self.reserve(tokens, scope)
            delay = start - time.time()
            if delay > 0:
                self.waited_s += delay
                await asyncio.sleep(delay)
            if time.time() - start <= self.slack_s:
                return
            self.late += 1

    @property
    def slack_s(self) -> float:
        """How late a start may go out after its slot: a quarter of the request spacing,
        between 20 ms and 1 s."""
        spacing = 60.0 / self.rpm if self.rpm else 0.0
        return min(1.0, max(0.02, spacing / 4))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
