"""Repository-level pytest configuration.

The fairness plugin itself (options, fixtures, snapshot extension, gate) is
``fairness_tests.plugin.plugin``, loaded through the ``pytest11`` entry point of
the installed package; registering it here again would load it twice.

Here: the environment every test of this checkout runs under.
"""
import faulthandler
import os
import sys

import pytest

# litellm must never fetch its cost map over the network (also at import time).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Hugging Face libraries must never reach a hub from the tests.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Cache the rewritten test modules (and the package's compiled modules) in __pycache__
# (gitignored) even where PYTHONDONTWRITEBYTECODE is set, as on the shared development
# machine: otherwise every pytest process, each xdist worker included, compiles and
# rewrites all ~90 test modules again (about 6 s of CPU a process there, of ~13 s of
# collection). pytest and Python write these files atomically and check them against
# the source's mtime, so a stale one is never used.
sys.dont_write_bytecode = False

# Lock waits (the fairness plugin's session runs, the embedded model's conversion) are
# bounded by $FAIRNESS_LOCK_TIMEOUT_S (fairness_tests/core/locks.py; default one hour):
# ten minutes here, so that a worker waiting in collection fails naming the lock file.
os.environ.setdefault("FAIRNESS_LOCK_TIMEOUT_S", "600")


# --- the timeout backstop ---------------------------------------------------------------
# pytest-timeout's "signal" method ([tool.pytest.ini_options] timeout, timeout_method)
# fails a test that runs past its timeout with the traceback of where it waited, and the
# session goes on. A test stuck where SIGALRM cannot get through (inside C code that
# never returns to the interpreter, or with the signal blocked) would still hang: these
# hooks arm faulthandler for the same test, `timeout_kill_after` seconds later, which
# dumps every thread's stack on stderr and exits the process (under xdist the controller
# reports the crashed worker and the test it was running, and starts another worker).
def pytest_addoption(parser):
    parser.addini("timeout_kill_after", "seconds after a test's pytest-timeout at which a "
                  "process whose test did not stop dumps every thread's stack and exits "
                  "(0: never)", default="60")


_STDERR = pytest.StashKey[int]()


def pytest_configure(config):
    """A copy of the real stderr for the backstop's dump (captured tests write fd 2 to
    a temporary file; capturing is suspended while plugins are configured)."""
    config.stash[_STDERR] = os.dup(sys.stderr.fileno())


def pytest_unconfigure(config):
    fd = config.stash.get(_STDERR, None)
    if fd is not None:
        os.close(fd)
        del config.stash[_STDERR]


def _kill_after(config) -> float:
    """The ini value ``timeout_kill_after`` in seconds (0 or less: no backstop)."""
    return float(config.getini("timeout_kill_after") or 0)


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_set_timer(item, settings):
    """Arm the backstop at the test's timeout + ``timeout_kill_after``; return None, so
    that pytest-timeout sets its own timer too."""
    grace = _kill_after(item.config)
    if grace > 0 and settings.timeout:
        faulthandler.dump_traceback_later(settings.timeout + grace, exit=True,
                                          file=item.config.stash[_STDERR])
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_cancel_timer(item):
    """Disarm the backstop (the test ended); None: pytest-timeout cancels its own."""
    faulthandler.cancel_dump_traceback_later()
    return None
