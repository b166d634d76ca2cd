"""The one inter-process lock: :class:`filelock.FileLock` on a lock file.

Used by the pytest plugin (one run per model per session, shared by xdist workers)
and around the embedded model's GGUF assembly and conversion (two processes on an
empty cache: one converts, the other waits and reuses the result). The lock is the
operating system's (``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows), so a
process that dies releases it: a lock file left behind is not a stale lock.

Every wait is bounded: ``timeout_s``, else ``$FAIRNESS_LOCK_TIMEOUT_S``, else
:data:`DEFAULT_TIMEOUT_S`; past it, :class:`LockTimeout` names the lock file, what the
caller was waiting for and the bound.
"""
from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import Iterator

from fairness_tests.core.errors import ConfigError

DEFAULT_TIMEOUT_S = 3600.0
ENV_TIMEOUT = "FAIRNESS_LOCK_TIMEOUT_S"


class LockTimeout(TimeoutError):
    """A lock still held by another process after the wait's bound."""


def default_timeout_s() -> float:
    """``$FAIRNESS_LOCK_TIMEOUT_S`` (seconds, finite, > 0) when set and not empty, else
    :data:`DEFAULT_TIMEOUT_S`; :class:`ConfigError` naming the variable otherwise."""
    raw = os.environ.get(ENV_TIMEOUT, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{ENV_TIMEOUT}={raw!r}: expected a number of seconds > 0")
    return value


@contextlib.contextmanager
def exclusive(path: str | Path, timeout_s: float | None = None,
              what: str = "") -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created with its parents) for the block.
    After ``timeout_s`` seconds of waiting (``None``: :func:`default_timeout_s`),
    :class:`LockTimeout` naming the file and ``what`` the caller waited for."""
    from filelock import FileLock, Timeout  # noqa: PLC0415  ~0.2 s: the plugin loads this module

    bound = default_timeout_s() if timeout_s is None else timeout_s
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=bound)
    try:
        lock.acquire()
    except Timeout:
        waited = f"waiting for {what}: " if what else ""
        knob = f" (the bound: ${ENV_TIMEOUT})" if timeout_s is None else ""
        raise LockTimeout(f"{waited}lock {path} held by another process for more than "
                          f"{bound:g} s{knob}") from None
    try:
        yield
    finally:
        lock.release()
