"""Plain helpers shared by this repository's tests (fixtures are in tests/conftest.py).

- :func:`req`: a numbered request (litellm, a choice question by default);
- :func:`rule`: a decision rule with defaults, any field overridden;
- :func:`copy_store`: a consistent copy of an SQLite response store;
- :func:`run_cli`: ``fairness-tests ARGS`` run in this process, its exit code and output;
- :func:`finish`: processes waited for together within one bound, killed past it;
- :func:`kill_after`: a process killed if it still runs after a bound.
"""
from __future__ import annotations

import shlex
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from fairness_tests.cli.main import main
from fairness_tests.models.requests.request import Request, chat
from fairness_tests.rules.thresholds import Rule


def req(i: int, *, text: str = "question {i}", system: str | None = None,
        kind: str = "choice", **fields: Any) -> Request:
    """Request number ``i``: one user message ``text`` (``{i}`` filled in) after an
    optional ``system`` message, asked of litellm model ``m``; a choice question has
    the options a, b, c; ``meta = {"item": i}``. ``fields`` override any field."""
    base: dict[str, Any] = dict(messages=chat(system, text.format(i=i)), backend="litellm",
                                model="m", kind=kind,
                                choices=("a", "b", "c") if kind == "choice" else (),
                                meta={"item": i})
    base.update(fields)
    return Request(**base)


#: the exit codes of an audit or score that ran to its end: 0 every evaluated rule holds,
#: 1 a rule failed, 5 nothing judged (a small run: every cell below the rules' minimum
#: size, min_n 30 unless a rule says otherwise; issue 32)
RAN = (0, 1, 5)


def rule(**fields: Any) -> Rule:
    """A decision rule: by default ``accuracy >= 0.6`` on the ``bbq`` table; ``fields``
    override (a ``scope`` given as a dict becomes the sorted tuple rules hold)."""
    base: dict[str, Any] = dict(id="r", table="bbq", metric="accuracy", op=">=", bound=0.6,
                                rationale="why")
    base.update(fields)
    if isinstance(base.get("scope"), dict):
        base["scope"] = tuple(sorted(base["scope"].items()))
    return Rule(**base)


def copy_store(src: Path, dst: Path) -> Path:
    """A consistent copy of an SQLite store (the backup API: right also while another
    process has it open)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
    finally:
        a.close()
        b.close()
    return dst


def run_cli(capfd: Any, *args: str) -> subprocess.CompletedProcess:
    """``fairness-tests ARGS`` in this process, as ``python -m fairness_tests`` runs it
    (``sys.exit(main())``): a :class:`subprocess.CompletedProcess` of its exit code and
    what it printed on the file descriptors (``capfd``: a traceback printed by anything
    is seen)."""
    capfd.readouterr()
    try:
        rc = main(list(args))
    except SystemExit as exc:            # argparse's usage errors
        rc = exc.code if isinstance(exc.code, int) else 2
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(["fairness-tests", *args], int(rc), out, err)


def _cmd(p: subprocess.Popen) -> str:
    return shlex.join(map(str, p.args)) if isinstance(p.args, (list, tuple)) else str(p.args)


def finish(procs: Iterable[subprocess.Popen], timeout_s: float) -> list[tuple[Any, Any]]:
    """``(stdout, stderr)`` of each process (``communicate()``: no pipe fills up), all of
    them within ``timeout_s`` seconds together. Past it, every process still running is
    killed and the test fails naming their commands (none is left running behind it)."""
    procs = list(procs)
    deadline = time.monotonic() + timeout_s
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=max(0.0, deadline - time.monotonic())))
    except subprocess.TimeoutExpired:
        late = [p for p in procs if p.poll() is None]
        for p in late:
            p.kill()
        for p in procs:
            p.communicate(timeout=30)
        pytest.fail(f"still running after {timeout_s:g} s, killed: "
                    + "; ".join(_cmd(p) for p in late), pytrace=False)
    return outs


@contextmanager
def kill_after(proc: subprocess.Popen, timeout_s: float) -> Iterator[threading.Event]:
    """Kill ``proc`` if it still runs ``timeout_s`` seconds from now (a loop that reads
    its output line by line then ends at EOF instead of waiting for ever); yields an
    event set if it was killed so. The timer is cancelled when the block ends."""
    fired = threading.Event()

    def kill() -> None:
        if proc.poll() is None:
            fired.set()
            proc.kill()

    timer = threading.Timer(timeout_s, kill)
    timer.daemon = True
    timer.start()
    try:
        yield fired
    finally:
        timer.cancel()
