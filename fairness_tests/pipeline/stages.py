"""Stage lines of a long command on stderr: what it is doing, with counts and the
seconds since it started (``fairness-tests [  12.3s] bbq: 960 requests ...``), one
whole line each, flushed, so a CI log shows the run moving. ``-q`` turns them off."""
from __future__ import annotations

import sys
import time
from typing import IO


class Stages:
    """Call with a stage's text to print its line (nothing when disabled)."""

    def __init__(self, enabled: bool = True, stream: IO[str] | None = None,
                 prefix: str = "fairness-tests"):
        self.enabled, self.stream, self.prefix = enabled, stream, prefix
        self.start = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def __call__(self, text: str) -> None:
        if not self.enabled:
            return
        stream = self.stream or sys.stderr
        stream.write(f"{self.prefix} [{self.elapsed():6.1f}s] {text}\n")
        stream.flush()


#: stages that print nothing (the Python API and the pytest plugin by default)
SILENT = Stages(enabled=False)
