"""The one inter-process lock: :class:`filelock.FileLock` on a lock file.

Used by the pytest plugin (one run per model per session, shared by xdist workers)
and around the embedded model's GGUF assembly and conversion (two processes on an
empty cache: one converts, the other waits and reuses the result). The lock is the
operating system's (``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows), so a
process that dies releases it: a lock file left behind is not a stale lock.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

DEFAULT_TIMEOUT_S = 3600.0


@contextlib.contextmanager
def exclusive(path: str | Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created with its parents) for the block;
    :class:`TimeoutError` naming the file after ``timeout_s`` seconds of waiting."""
    from filelock import FileLock, Timeout  # noqa: PLC0415  ~0.2 s: the plugin loads this module

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=timeout_s)
    try:
        lock.acquire()
    except Timeout:
        raise TimeoutError(f"lock {path} held by another process for more than "
                           f"{timeout_s:g} s") from None
    try:
        yield
    finally:
        lock.release()
