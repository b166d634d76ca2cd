"""Fixtures shared by this repository's tests, and work done once per test session.

``once(...)`` builds a directory at most once per pytest session, shared by every xdist
worker: the first process that needs it takes an exclusive file lock
(:mod:`fairness_tests.core.locks`), builds it and marks it done; the others wait on the
lock and read it. It is keyed by a name and the sha256 of a configuration, so a test
that needs another configuration computes its own.

Built that way:

- ``replay``: the main job on the committed recordings (``fairness-tests audit
  --protocols bbq consistency generative``): its run directory, card and store.
  Read-only: a test that changes something copies it.
- ``recorded_store``: a store with the embedded model's committed recordings imported
  (``warm_store`` copies it for a test that writes);
- ``gate_run_dirs``: the gate's baseline and candidate run directories
  (tests/gate_testdata.py).

Also here: the ``store`` fixture (an empty response store in ``tmp_path``). Plain
helpers (requests, rules) are in tests/helpers.py.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from gate_testdata import make_runs
from helpers import copy_store

from fairness_tests.cli.main import main
from fairness_tests.core.locks import exclusive
from fairness_tests.models.store import ResponseStore
from fairness_tests.pipeline.recordings import default_recordings
from fairness_tests.run.result import RunResult

EMBEDDED = "embedded:gemma-3-270m"


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of this session that every xdist worker sees: the parent of the
    workers' own base directories (``.../pytest-N/popen-gw0``), or the base directory
    itself without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once(tmp_path_factory: pytest.TempPathFactory, name: str, key: dict[str, Any],
         build: Callable[[Path], None]) -> Path:
    """``<shared>/once/<name>-<sha256(key)[:16]>/``, filled by ``build(dir)`` by the first
    process of the session that asks; the others wait on its lock and reuse it. A build
    that raised leaves no ``.done`` mark, so the next process builds it again."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
    root = shared_root(tmp_path_factory) / "once"
    out = root / f"{name}-{digest[:16]}"
    with exclusive(root / f"{out.name}.lock"):
        if not (out / ".done").exists():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            build(out)
            (out / ".built-by").write_text(f"{os.getpid()} "
                                           f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}\n")
            (out / ".done").write_text(json.dumps(key, sort_keys=True, default=str) + "\n")
    return out


# The main job's tables for BBQ, consistency and the generative grid, which the score
# commands and `compare` are checked against (the probe protocol, which the main job
# also replays, is left out: no score command writes its table).
REPLAY_ARGS = ("--protocols", "bbq", "consistency", "generative")


@dataclass(frozen=True)
class Replay:
    """The main job's outputs: ``run`` (its run directory), ``card`` (card.yaml, .md,
    .html) and ``store`` (the response store it replayed from). Read-only."""
    run: Path
    card: Path
    store: Path

    def load(self) -> RunResult:
        """A fresh :class:`RunResult` of the run (yours to change)."""
        return RunResult.load(self.run)


@pytest.fixture(scope="session")
def replay(tmp_path_factory, recorded_store) -> Replay:
    """``fairness-tests audit --protocols bbq consistency generative`` on the committed
    recordings, once per session (see the module docstring)."""
    def build(d: Path) -> None:
        store = copy_store(recorded_store, d / "store.sqlite")
        rc = main(["audit", "--out", str(d / "report"), *REPLAY_ARGS, "--store", str(store)])
        assert rc in (0, 1), f"the main job exited {rc}"

    d = once(tmp_path_factory, "replay", {"argv": REPLAY_ARGS}, build)
    return Replay(run=d / "report" / "run", card=d / "report" / "card",
                  store=d / "store.sqlite")


@pytest.fixture(scope="session")
def recorded_store(tmp_path_factory) -> Path:
    """A response store holding the embedded model's committed recordings (the files
    its manifest lists), imported once per session. Read-only: ``warm_store`` copies."""
    files = default_recordings(EMBEDDED)

    def build(d: Path) -> None:
        with ResponseStore(d / "s.sqlite") as s:
            for f in files:
                s.import_jsonl(f)

    key = {f: Path(f).stat().st_mtime_ns for f in files}
    return once(tmp_path_factory, "recorded-store", key, build) / "s.sqlite"


@pytest.fixture
def warm_store(recorded_store, tmp_path) -> Path:
    """A copy of ``recorded_store`` in ``tmp_path``: a replay audit on it asks the store
    only (the recordings' import finds every row there)."""
    return copy_store(recorded_store, tmp_path / "warm.sqlite")


@pytest.fixture(scope="session")
def gate_run_dirs(tmp_path_factory, recorded_store) -> dict:
    """The gate's baseline and candidate run directories (tests/gate_testdata.py), once
    per session: {"base": Path, "cand": Path, "n_flipped": int}."""
    def build(d: Path) -> None:
        runs = make_runs(d, store=copy_store(recorded_store, d / "store.sqlite"))
        (d / "gate.json").write_text(json.dumps({"n_flipped": runs["n_flipped"]}))

    d = once(tmp_path_factory, "gate", {"make_runs": "bbq consistency n_boot=200"}, build)
    return {"base": d / "base", "cand": d / "cand",
            **json.loads((d / "gate.json").read_text())}


@pytest.fixture
def store(tmp_path):
    """An empty response store in ``tmp_path``, closed after the test."""
    s = ResponseStore(tmp_path / "s.sqlite")
    yield s
    s.close()


# ---------------------------------------------------------------------------------------
# The main job with its defaults, once per session (added for issue 24; shared by
# tests/test_committed_card.py, tests/test_compare.py and tests/test_one_pipeline.py).

@pytest.fixture(scope="session")
def main_job(tmp_path_factory, recorded_store) -> Replay:
    """``fairness-tests audit`` with no protocol option, as a user runs it (BBQ,
    consistency, generative and the probe), on a copy of ``recorded_store``, once per
    session: its run directory, card and store. Read-only, like ``replay``, whose
    tables it holds byte for byte (it adds the probe's ``counterfactual`` table): a test
    that needs the main job's BBQ, consistency or generative results can use this one
    and spare the session a second audit."""
    def build(d: Path) -> None:
        store = copy_store(recorded_store, d / "store.sqlite")
        rc = main(["audit", "-q", "--out", str(d / "report"), "--store", str(store)])
        assert rc == 0, f"the main job exited {rc}"

    d = once(tmp_path_factory, "main-job", {"argv": "audit"}, build)
    return Replay(run=d / "report" / "run", card=d / "report" / "card",
                  store=d / "store.sqlite")


# ---------------------------------------------------------------------------------------
# numpy's extension modules load once per process (a second load raises "ImportError:
# cannot load module more than once per process"). An in-process pytester session
# (tests/test_plugin.py) drops from sys.modules what it imported, so a numpy submodule
# first imported inside one (numpy.fft, through scipy.stats) failed every later test of
# that xdist worker that needs it. Imported here, it is never first imported inside one.
import numpy.fft  # noqa: E402,F401  (added for issue 24)
import scipy.stats  # noqa: E402,F401
