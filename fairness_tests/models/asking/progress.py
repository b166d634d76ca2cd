"""A progress bar for long runs that stays readable under pytest and xdist.

On a terminal it redraws one line (``\\r``) at most every ``tty_interval_s``.
Anywhere else (pytest capture, CI logs, xdist workers, a file) it writes whole
lines: every ``every_pct`` percent or every ``interval_s`` seconds, whichever
comes first, plus a final line. Each line is written with one ``write`` call
and flushed, prefixed with the xdist worker id (``[gw1]``), so lines from
several workers never interleave mid-line.

Where it goes: the ``stream`` argument, else ``$FAIRNESS_PROGRESS``: ``off``
(nothing), ``stderr`` (default: the process's original stderr), or a file path
(appended; one line per write, so all workers can share it).

A line::

    [gw0] bbq openai/gpt-4o 120/400  30%  8.1/s  ETA 35s  store 8.2k  cached 40  tok 52.1k  $0.0123

``store``: requests the store answered before asking (not counted in the total);
``cached``: requests another process recorded while this one ran. The cost is ``$?``
when no answer's cost is known (a model without a price), ``$0.0123+?`` when some
are unknown: never a ``$0.0000`` that stands for "unknown".

Phases and work. A backend with a setup of its own (loading a model) is shown as a
separate phase line (:meth:`Progress.phase`), and the clock of the rate restarts when
the answering starts (:meth:`Progress.start_work`), so a slow load never shows as a
slow rate. When the backend also says how much compute the run needs (``total_work``
units, e.g. tokens to compute) and reports it batch by batch (``update(work=...)``),
the percentage is the share of that work done and the ETA is
``elapsed * (total_work - work_done) / work_done``: both move with every batch,
including batches that compute shared prefixes and complete no answer yet; the ETA is
``?`` until ``ETA_MIN_WORK`` of the work is done (a first small batch says little).
Without work figures the ETA is ``items left / (fresh items / elapsed)``, ``?`` until
an item is done. Such a line::

    bbq  96/240   41%  7.9/s  ETA 18s
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import IO, Any

ENV_PROGRESS = "FAIRNESS_PROGRESS"
ETA_MIN_WORK = 0.05      # with work figures, no ETA before this share of the work is done


def _fmt_duration(s: float) -> str:
    if s != s or s == float("inf"):
        return "?"
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def _fmt_count(n: float) -> str:
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    if n >= 1e3:
        return f"{n / 1e3:.1f}k"
    return f"{int(n)}"


def _fmt_cost(known_usd: float, unknown: int) -> str:
    """``$0.0123``; ``$?`` when nothing priced was seen but unpriced answers were;
    ``$0.0123+?`` when some answers are unpriced."""
    if unknown and not known_usd:
        return "$?"
    return f"${known_usd:.4f}" + ("+?" if unknown else "")


class Progress:
    """Counts completed items; ``update`` is thread-safe."""

    def __init__(self, total: int, label: str = "", *, stream: IO[str] | None = None,
                 every_pct: float = 10.0, interval_s: float = 5.0, tty_interval_s: float = 0.2,
                 show_tokens: bool = False, store_hits: int = 0, clock: Any = time.monotonic):
        self.total = int(total)
        self.label = label
        self.every_pct = float(every_pct)
        self.interval_s = float(interval_s)
        self.tty_interval_s = float(tty_interval_s)
        self.show_tokens = show_tokens
        self.store_hits = int(store_hits)   # answered by the store before any asking (not in total)
        self._clock = clock
        self._lock = threading.Lock()
        self.done = 0
        self.cached = 0
        self.errors = 0
        self.tokens = 0
        self.cost_usd = 0.0
        self.cost_unknown = 0          # answers whose cost is unknown
        self._own_file: IO[str] | None = None
        self.stream = stream if stream is not None else self._default_stream()
        isatty = getattr(self.stream, "isatty", None)
        self._tty = bool(self.stream is not None and isatty is not None and isatty())
        self._start = clock()
        self.work_done = 0
        self.total_work: int | None = None
        self.work_unit = ""
        self._last_write = -1e18
        self._last_pct_mark = -1.0
        self._closed = False
        self.lines_written = 0

    def _default_stream(self) -> IO[str] | None:
        dest = os.environ.get(ENV_PROGRESS, "stderr").strip()
        if dest.lower() in ("off", "0", "none", "false", ""):
            return None
        if dest.lower() == "stderr":
            return sys.__stderr__ or sys.stderr
        os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
        self._own_file = open(dest, "a", encoding="utf-8", buffering=1)
        return self._own_file

    @property
    def prefix(self) -> str:
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        return f"[{worker}] " if worker else ""

    # -- phases -------------------------------------------------------------
    def phase(self, text: str) -> None:
        """A line of its own for a setup step (e.g. loading a model), written at once."""
        with self._lock:
            if self.stream is None or self._closed:
                return
            line = f"{self.prefix}{self.label}  {text}".strip()
            self._emit(("\r" + line + "\x1b[K\n") if self._tty else line + "\n")

    def start_work(self, total_work: int | None = None, unit: str = "",
                   note: str = "") -> None:
        """Answering starts now (the rate's clock restarts); ``total_work`` is the
        compute it needs, in ``unit`` (reported with ``update(work=...)``)."""
        with self._lock:
            self._start = self._clock()
            self.total_work = int(total_work) if total_work else None
            self.work_unit = unit
            self.work_done = 0
        if note:
            self.phase(note)

    # -- updates ------------------------------------------------------------
    def update(self, n: int = 1, *, tokens: int | None = None, cost_usd: float | None = None,
               cached: bool = False, error: bool = False, errors: int = 0,
               work: int | None = None, cost_unknown: int = 0) -> None:
        """``n`` items done (``error``: all of them failed; ``errors``: that many did);
        ``work``: units of the backend's work done since the last update;
        ``cost_unknown``: of the ``n``, answers whose cost is unknown."""
        with self._lock:
            self.done += n
            if work:
                self.work_done += int(work)
            if cached:
                self.cached += n
            if error:
                self.errors += n
            self.errors += int(errors)
            if tokens:
                self.tokens += int(tokens)
            if cost_usd:
                self.cost_usd += float(cost_usd)
            self.cost_unknown += int(cost_unknown)
            self._maybe_write()

    def line(self) -> str:
        elapsed = max(self._clock() - self._start, 1e-9)
        fresh = self.done - self.cached
        rate = fresh / elapsed
        left = self.total - self.done
        pct = self._pct()
        if self.total_work:
            frac = pct / 100.0
            eta = elapsed * (1 - frac) / frac if frac >= ETA_MIN_WORK else float("inf")
        else:
            eta = left / rate if rate > 0 else float("inf")
        parts = [f"{self.prefix}{self.label}".rstrip(),
                 f"{self.done}/{self.total}", f"{pct:3.0f}%", f"{rate:.1f}/s",
                 f"ETA {_fmt_duration(eta)}" if left > 0 else f"in {_fmt_duration(elapsed)}"]
        if self.store_hits:
            parts.append(f"store {_fmt_count(self.store_hits)}")
        if self.cached:
            parts.append(f"cached {self.cached}")
        if self.errors:
            parts.append(f"errors {self.errors}")
        if self.total_work and self.work_unit:
            parts.append(f"computed {_fmt_count(self.work_done)}/{_fmt_count(self.total_work)}"
                         f" {self.work_unit}")
        elif not self.total_work and (self.show_tokens or self.tokens or self.cost_usd):
            parts.append(f"tok {_fmt_count(self.tokens)}")
            parts.append(_fmt_cost(self.cost_usd, self.cost_unknown))
        return "  ".join(p for p in parts if p)

    def _pct(self) -> float:
        """Per cent done: of the work when the backend gave it, else of the items."""
        if self.done >= self.total:
            return 100.0
        if self.total_work:
            return 100.0 * min(self.work_done / self.total_work, 1.0)
        return 100.0 * self.done / self.total if self.total else 100.0

    def _maybe_write(self, final: bool = False) -> None:
        if self.stream is None or self._closed:
            return
        now = self._clock()
        pct = self._pct()
        if self._tty:
            if final or now - self._last_write >= self.tty_interval_s:
                self._emit("\r" + self.line() + "\x1b[K" + ("\n" if final else ""))
                self._last_write = now
            return
        due_pct = pct >= self._last_pct_mark + self.every_pct
        due_time = now - self._last_write >= self.interval_s
        if final or due_pct or due_time:
            self._emit(self.line() + "\n")
            self._last_write = now
            self._last_pct_mark = pct - (pct % self.every_pct) if self.every_pct else pct

    def _emit(self, text: str) -> None:
        stream = self.stream
        if stream is None:
            return
        try:
            stream.write(text)   # one write per line: no interleaving
            stream.flush()
            self.lines_written += 1
        except (OSError, ValueError):
            self.stream = None

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._maybe_write(final=True)
            self._closed = True
            if self._own_file is not None:
                self._own_file.close()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
