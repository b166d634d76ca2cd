"""Fixtures shared by this repository's tests, and work done once per test session.

``once(...)`` builds a directory at most once per pytest session, shared by every xdist
worker: the first process that needs it takes an exclusive file lock
(:mod:`fairness_tests.core.locks`), builds it and marks it done; the others wait on the
lock (bounded: ``ONCE_WAIT_S``) and read it. It is keyed by a name and the sha256 of
a configuration, so a test that needs another configuration computes its own.

Built that way:

- ``main_job``: the main job on the committed recordings (``fairness-tests audit``
  with its defaults): its run directory, card and store. Read-only: a test that
  changes something copies it.
- ``recorded_store``: a store with the embedded model's committed recordings imported
  (``warm_store`` copies it for a test that writes);
- ``gate_run_dirs``: the gate's baseline and candidate run directories
  (tests/gate_testdata.py).

Also here: the ``store`` fixture (an empty response store in ``tmp_path``), the
committed card parsed once per process (``committed_card``) and one ``transformers
serve`` of the embedded model per worker (``transformers_server``). Plain helpers
(requests, rules) are in tests/helpers.py.

numpy's extension modules load once per process ("cannot load module more than once
per process"), and an in-process pytester session (tests/test_plugin.py) drops from
``sys.modules`` what its inner session imported: a numpy submodule first imported in
one (numpy.fft, through scipy.stats) failed every later test of that xdist worker.
They are imported here, so never first inside one.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy.fft  # noqa: F401  (see the module docstring)
import pytest
import scipy.stats  # noqa: F401
from gate_testdata import make_runs
from helpers import copy_store
from transformers_server import serve

from fairness_tests.card.schema import load_card
from fairness_tests.cli.main import main
from fairness_tests.core.locks import exclusive
from fairness_tests.core.registry import BENCHMARK_NAMES
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.pipeline.recordings import default_recordings
from fairness_tests.run.result import RunResult

EMBEDDED = "embedded:gemma-3-270m"


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of this session that every xdist worker sees: the parent of the
    workers' own base directories (``.../pytest-N/popen-gw0``), or the base directory
    itself without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


#: how long once() waits for another process's build: under the tests' own bound
#: (pyproject.toml: timeout = 300), so that the failure names the lock file and the build
ONCE_WAIT_S = 270.0


def once(tmp_path_factory: pytest.TempPathFactory, name: str, key: dict[str, Any],
         build: Callable[[Path], None], wait_s: float = ONCE_WAIT_S) -> Path:
    """``<shared>/once/<name>-<sha256(key)[:16]>/``, filled by ``build(dir)`` by the first
    process of the session that asks; the others wait on its lock (at most ``wait_s``
    seconds: then a LockTimeout naming the lock file and ``name``) and reuse it. A build
    that raised leaves no ``.done`` mark, so the next process builds it again."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
    root = shared_root(tmp_path_factory) / "once"
    out = root / f"{name}-{digest[:16]}"
    with exclusive(root / f"{out.name}.lock", timeout_s=wait_s,
                   what=f"{name!r}, built once per session by another process"):
        if not (out / ".done").exists():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            build(out)
            (out / ".built-by").write_text(f"{os.getpid()} "
                                           f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}\n")
            (out / ".done").write_text(json.dumps(key, sort_keys=True, default=str) + "\n")
    return out


@dataclass(frozen=True)
class MainJob:
    """The main job's outputs: ``run`` (its run directory), ``card`` (card.yaml, .md,
    .html) and ``store`` (the response store it replayed from). Read-only."""
    run: Path
    card: Path
    store: Path

    def load(self) -> RunResult:
        """A fresh :class:`RunResult` of the run (yours to change)."""
        return RunResult.load(self.run)


@pytest.fixture(scope="session")
def main_job(tmp_path_factory, recorded_store) -> MainJob:
    """``fairness-tests audit`` with no protocol option, as a user runs it (BBQ,
    consistency, generative and the probe), on a copy of ``recorded_store``, once per
    session (see the module docstring): the one full audit the session's tests share
    (the committed card, the score commands and ``compare`` are checked against it)."""
    def build(d: Path) -> None:
        store = copy_store(recorded_store, d / "store.sqlite")
        rc = main(["audit", "-q", "--out", str(d / "report"), "--store", str(store)])
        assert rc == 0, f"the main job exited {rc}"

    d = once(tmp_path_factory, "main-job", {"argv": "audit"}, build)
    return MainJob(run=d / "report" / "run", card=d / "report" / "card",
                   store=d / "store.sqlite")


#: the lending example of the templates benchmark (its recorded answers are committed)
LENDING = Path(__file__).resolve().parent.parent / "fairness_tests" / "benchmarks" / \
    "templates" / "examples" / "lending.yaml"
#: the benchmarks beside BBQ that ``benchmarks_job`` asks, and its argument list
BESIDE_BBQ = ("crows_pairs", "winogender", "winobias", "kobbq", "templates")
BENCHMARKS_ARGV = ("audit", "-q", "--benchmarks", *BESIDE_BBQ, "--benchmark", str(LENDING))


@pytest.fixture(scope="session")
def benchmarks_job(tmp_path_factory, recorded_store) -> Path:
    """The run directory of ``fairness-tests audit --benchmarks crows_pairs winogender
    winobias kobbq templates --benchmark <the lending example>``, replayed from the
    committed recordings (a copy of ``recorded_store``) once per session, with the
    defaults the pytest suite uses (tests/test_benchmark_drift.py checks the committed
    drift snapshots against it; tests/test_benchmark_gate.py gates and compares it).
    Read-only: a test that changes something copies it."""
    def build(d: Path) -> None:
        store = copy_store(recorded_store, d / "store.sqlite")
        rc = main([*BENCHMARKS_ARGV, "--out", str(d / "report"), "--store", str(store)])
        assert rc in (0, 1), f"the audit of the benchmarks exited {rc}"

    d = once(tmp_path_factory, "benchmarks-job", {"argv": BENCHMARKS_ARGV}, build)
    return d / "report" / "run"


@pytest.fixture(scope="session")
def recorded_store(tmp_path_factory) -> Path:
    """A response store holding the embedded model's committed recordings (the files
    its manifest lists, and every benchmark's own), imported once per session.
    Read-only: ``warm_store`` copies."""
    files = default_recordings(EMBEDDED, BENCHMARK_NAMES)

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


# The committed card of the embedded model (docs/cards/embedded-gemma-3-270m/card.yaml,
# 845 KB of YAML), parsed once per process and shared by the card tests (test_card_render,
# test_card_browser, test_card_print).
COMMITTED_CARD = Path(__file__).resolve().parent.parent / "docs" / "cards" / \
    "embedded-gemma-3-270m" / "card.yaml"


@pytest.fixture(scope="session")
def committed_card() -> Callable[[], dict]:
    """A function returning ``load_card(COMMITTED_CARD)``, parsed once; each call a
    fresh copy (a test may change it)."""
    data = pickle.dumps(load_card(COMMITTED_CARD))
    return lambda: pickle.loads(data)


# transformers serve, once per session (tests/test_live_server*.py).
@pytest.fixture(scope="session")
def transformers_server(tmp_path_factory):
    """The real ``transformers serve`` of the embedded model on 127.0.0.1
    (tests/transformers_server.py), started once per session (per xdist worker) and
    shared by the live-server modules: ``{"api_base", "model_dir", "log"}``."""
    with serve(tmp_path_factory.mktemp("serve")) as info:
        yield info


@pytest.fixture
def own_controller(monkeypatch):
    """An in-process pytester session that is a controller of its own, also when the test
    runs in an xdist worker: the worker's variables would make plugins (syrupy) behave as
    in a worker, e.g. leave out the snapshot summary line."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


#: the packaged drift snapshots
SNAPSHOTS = (Path(__file__).resolve().parents[1] / "fairness_tests" / "suite" / "__snapshots__"
             / "test_drift")


@pytest.fixture
def drift_project(pytester, own_controller):
    """A project importing the packaged suite's drift test, every packaged snapshot beside
    it (as ``fairness-tests init`` writes it)."""
    pytester.makepyfile(test_fairness="from fairness_tests.suite.test_drift import *  "
                                      "# noqa: F401,F403\n")
    shutil.copytree(SNAPSHOTS, pytester.path / "__snapshots__" / "test_fairness")
    return pytester


def drift_session(project, run: Path, *args: str):
    """The drift test of ``project`` on the embedded model's ``run``, verbose."""
    return project.runpytest("-p", "no:cacheprovider", "--fairness-model", EMBEDDED,
                             "--fairness-run", str(run), "-v", "-rs", *args)
