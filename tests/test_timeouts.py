"""No test waits without a bound (issue 32): the test command once stayed at 97 % for
over 30 minutes with no line saying which test was waiting.

- The project's timeout configuration (pyproject.toml's pytest-timeout keys and the
  root conftest.py's backstop), run in an inner ``pytest -n 2`` session with a 2 s
  timeout: a test waiting for ever on an event fails with its name and the line it
  waited on, and the session goes on; a test stuck where SIGALRM cannot reach it is
  ended by the backstop (every thread's stack, the worker exits, xdist names the test).
- The lock waits: ``core.locks.exclusive`` and tests/conftest.py's ``once()`` fail
  after their bound naming the lock file and what they waited for.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fairness_tests.core.errors import ConfigError
from fairness_tests.core.locks import ENV_TIMEOUT, LockTimeout, exclusive

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent

WAITS = '''
import signal
import threading
import time


def test_passes():
    assert True


def test_waits_for_ever_on_an_event():
    never_set = threading.Event()
    never_set.wait()                    # the line the failure shows


def test_stuck_where_the_signal_cannot_reach():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])   # as C code holding it
    time.sleep(3600)
'''


def _project_timeout_ini() -> dict[str, str]:
    """The pytest-timeout keys of this repository's pyproject.toml."""
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    return {k: str(v) for k, v in ini.items() if k.startswith("timeout")}


def test_the_project_bounds_every_test_with_a_traceback_and_a_backstop():
    """The configuration itself: a default bound, the method that fails the test where it
    waits (not one that only kills the worker), and a backstop after it."""
    ini = _project_timeout_ini()
    assert float(ini["timeout"]) > 0
    assert ini["timeout_method"] == "signal"
    assert float(ini["timeout_kill_after"]) > 0


@pytest.mark.timeout(240)
def test_a_test_waiting_for_ever_fails_naming_itself_and_its_wait(tmp_path):
    ini = {**_project_timeout_ini(), "timeout": "2", "timeout_kill_after": "3"}
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\n" + "".join(f"{k} = {v}\n" for k, v in ini.items()))
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")     # the backstop
    (tmp_path / "test_waits.py").write_text(textwrap.dedent(WAITS))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "FAIRNESS_PYTEST"))}
    env["COLUMNS"] = "250"                        # summary lines whole
    # the bound of the whole inner session (the sleep alone is an hour): finished within
    # it, or TimeoutExpired names the command (65 s measured on the loaded 2-core machine)
    p = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:randomly",
                        "-p", "no:cacheprovider", "-rfE", "test_waits.py"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=200)
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    # the event wait: failed by SIGALRM at 2 s, its name and the line it waited on
    assert "FAILED test_waits.py::test_waits_for_ever_on_an_event - Failed: Timeout (>2.0s)" \
        in out, out
    assert "never_set.wait()" in out, out
    # the blocked signal: the backstop at 2 + 3 s dumped the stacks and ended the worker
    assert "FAILED test_waits.py::test_stuck_where_the_signal_cannot_reach - worker 'gw" \
        in out, out
    assert "crashed while running 'test_waits.py::test_stuck_where_the_signal_cannot_reach'" \
        in out, out
    assert "Timeout (0:00:05)!" in out, out                       # faulthandler's dump
    assert "in test_stuck_where_the_signal_cannot_reach" in out, out
    assert "1 passed" in out, out                                # the session went on


HOLDER = """
import sys, time
from fairness_tests.core.locks import exclusive
with exclusive(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def held(tmp_path):
    """``held(path)``: ``path`` locked by another process until the test ends."""
    procs = []

    def hold(path: Path) -> None:
        p = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)],
                             env={**os.environ, "PYTHONPATH": str(ROOT)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        assert p.stdout.readline().strip() == "locked", p.communicate(timeout=30)[1]

    yield hold
    for p in procs:
        p.kill()
        p.communicate(timeout=30)


def test_a_lock_wait_bounded_by_the_environment_names_the_lock_and_what(
        tmp_path, held, monkeypatch):
    lock = tmp_path / "x.lock"
    held(lock)
    monkeypatch.setenv(ENV_TIMEOUT, "0.3")
    t0 = time.monotonic()
    with pytest.raises(LockTimeout) as exc:
        with exclusive(lock, what="the thing"):
            pass
    assert time.monotonic() - t0 < 10
    assert str(exc.value) == (f"waiting for the thing: lock {lock} held by another process "
                              f"for more than 0.3 s (the bound: ${ENV_TIMEOUT})")


@pytest.mark.parametrize("value", ["0", "-1", "abc", "inf", "nan"])
def test_a_bad_lock_bound_in_the_environment_is_named(tmp_path, monkeypatch, value):
    monkeypatch.setenv(ENV_TIMEOUT, value)
    with pytest.raises(ConfigError, match=rf"^{ENV_TIMEOUT}='{value}': expected a number of "
                                          r"seconds > 0$"):
        with exclusive(tmp_path / "x.lock"):
            pass


class _Factory:
    """A stand-in for pytest's TempPathFactory: the session's base directory."""

    def __init__(self, base: Path):
        self.base = base

    def getbasetemp(self) -> Path:
        return self.base


def test_once_waiting_for_another_process_past_its_bound_names_the_lock(
        tmp_path, held, monkeypatch, request):
    conftest = request.config.pluginmanager.get_plugin(str(ROOT / "tests" / "conftest.py"))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    factory = _Factory(tmp_path)
    built = []
    first = conftest.once(factory, "probe", {"k": 1}, built.append)
    assert built == [first]
    [lock] = (tmp_path / "once").glob("*.lock")
    held(lock)
    t0 = time.monotonic()
    with pytest.raises(LockTimeout) as exc:
        conftest.once(factory, "probe", {"k": 1}, built.append, wait_s=0.3)
    assert time.monotonic() - t0 < 10
    assert str(exc.value) == (f"waiting for 'probe', built once per session by another "
                              f"process: lock {lock} held by another process for more "
                              f"than 0.3 s")
    assert built == [first]                       # nothing built while it was held
