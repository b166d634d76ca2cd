"""Plain helpers shared by this repository's tests (fixtures are in tests/conftest.py).

- :func:`req`: a numbered request (litellm, a choice question by default);
- :func:`rule`: a decision rule with defaults, any field overridden;
- :func:`copy_store`: a consistent copy of an SQLite response store;
- :func:`run_cli`: ``fairness-tests ARGS`` run in this process, its exit code and output.
"""
from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from fairness_tests.cli.main import main
from fairness_tests.models.request import Request, chat
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
