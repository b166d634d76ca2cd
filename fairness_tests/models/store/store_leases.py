"""Leases: the keys a process is asking for, so that no key is asked twice at once.

A table ``leases(key, owner, expires)``: before asking a backend, a process *claims*
the keys it will ask for in one ``BEGIN IMMEDIATE`` transaction. A key that is stored,
or leased by another live owner, is not claimed. A lease expires after ``lease_s``
seconds unless renewed, and at once when its owner is a dead process on this host (so
a SIGKILLed run does not block the next one). Owners are ``host:pid:random``.
"""
from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING


def new_owner() -> str:
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


class Leases:
    """The lease methods of :class:`~fairness_tests.models.store.store.ResponseStore`."""

    if TYPE_CHECKING:  # provided by ResponseStore
        lease_s: float
        _lock: threading.RLock

        @property
        def owner(self) -> str: ...

        def _connect(self) -> sqlite3.Connection: ...

        def _execute(self, sql: str, params: Iterable[object] = ()) -> sqlite3.Cursor: ...

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
