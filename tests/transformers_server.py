"""``transformers serve`` of the embedded model on 127.0.0.1, for the live-server tests
(tests/test_live_server.py, tests/test_live_server_completion.py): :func:`serve` starts
it as a subprocess on a free loopback port in its own process group, waits for
``/v1/models`` with a bounded loop, yields ``{"api_base", "model_dir", "log"}`` and
stops it (SIGTERM to the group, then SIGKILL). The ``transformers_server`` fixture
(tests/conftest.py) starts it once per session and shares it."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fairness_tests.models.backends import embedded as emb

READY_TIMEOUT_S = 240.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve_command(model_dir: Path, port: int) -> list[str]:
    exe = shutil.which("transformers")
    head = [exe] if exe else [sys.executable, "-m", "transformers.cli.transformers"]
    return head + ["serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port),
                   "--device", "cpu", "--log-level", "warning"]


def _get(url: str, timeout: float = 2.0) -> int:
    with urllib.request.urlopen(url, timeout=timeout) as r:   # loopback only
        return r.status


@contextmanager
def serve(log_dir: Path) -> Iterator[dict]:
    """The embedded model served on 127.0.0.1 (see the module docstring); its log in
    ``log_dir/serve.log``."""
    pytest.importorskip("fastapi", reason="transformers[serving] extras not installed")
    pytest.importorskip("litellm")
    model_dir = emb.prepare()
    port = _free_port()
    log_path = log_dir / "serve.log"
    log = open(log_path, "wb")
    # one torch thread: the CPU is shared (two threads spin-wait when oversubscribed)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    proc = subprocess.Popen(_serve_command(model_dir, port), stdout=log, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:                                   # bounded by the deadline
            if proc.poll() is not None:
                pytest.fail(f"transformers serve exited with {proc.returncode}:\n"
                            f"{log_path.read_text(errors='replace')[-3000:]}")
            try:
                if _get(base + "/v1/models") == 200:
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve not ready after {READY_TIMEOUT_S:.0f}s:\n"
                            f"{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        yield {"api_base": base + "/v1", "model_dir": model_dir, "log": log_path}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)       # the server's own process group
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)
        log.close()
