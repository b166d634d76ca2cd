"""The store across real processes: a SIGKILLed recording resumes asking only for
what is missing; parallel processes never ask the same key twice."""
from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from fault_server import FaultServer  # noqa: E402
from helpers import finish  # noqa: E402

from fairness_tests.models.asking.runner import ask  # noqa: E402
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend  # noqa: E402
from fairness_tests.models.requests.request import Decoding, Request, chat  # noqa: E402
from fairness_tests.models.store.store import ResponseStore  # noqa: E402

WORKER = [sys.executable, str(HERE / "record_worker.py")]


def _rows(path: Path) -> int:
    if not path.exists():
        return 0
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return con.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    except sqlite3.OperationalError:          # schema not created yet
        return 0
    finally:
        con.close()


@pytest.mark.slow
def test_sigkill_mid_run_keeps_completed_and_resume_asks_only_missing(tmp_path):
    n = 60
    store_path = tmp_path / "rec.sqlite"
    with FaultServer(latency_s=0.05) as server:
        proc = subprocess.Popen(WORKER + ["--store", str(store_path), "--api-base", server.url,
                                          "--tag", "killme", "--stop", str(n),
                                          "--concurrency", "2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 90
        while _rows(store_path) < 15:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "recording never got going"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        first_hits = server.count("killme")
        kept = _rows(store_path)
        assert 15 <= kept < n                       # killed mid-run, work kept
        assert first_hits >= kept                   # in-flight ones were asked but not stored

        store = ResponseStore(store_path)
        assert store.integrity_ok()
        reqs = [Request(messages=chat(None, f"killme {i}"), backend="litellm",
                        model="openai/fault-model", api_base=server.url,
                        decoding=Decoding(0.0, 1.0, 8), meta={"i": i}) for i in range(n)]
        done_before = {k for k in store.keys()}
        for k in done_before:                        # completed rows are whole
            r = store.get(k)
            assert r.status == "ok" and r.text.startswith("(b) reply to: killme")
        t0 = time.monotonic()
        out = ask(reqs, LiteLLMBackend(max_concurrency=4), store, progress=False)
        # the dead process's leases lapse at once (its pid is gone): no waiting for expiry
        assert time.monotonic() - t0 < 20
        asked_again = server.count("killme") - first_hits
        assert asked_again == n - kept              # only the missing keys were asked
        assert all(o.status == "ok" for o in out) and len(store) == n
        store.close()


@pytest.mark.slow
def test_parallel_processes_ask_each_key_exactly_once(tmp_path):
    store_path = tmp_path / "shared.sqlite"
    ranges = [(0, 30), (10, 40), (20, 50)]
    go = tmp_path / "go"
    with FaultServer(latency_s=0.03) as server:
        procs = []
        for j, (a, b) in enumerate(ranges):
            procs.append(subprocess.Popen(
                WORKER + ["--store", str(store_path), "--api-base", server.url, "--tag", "par",
                          "--start", str(a), "--stop", str(b), "--concurrency", "4",
                          "--batch-size", "5", "--ready", str(tmp_path / f"ready{j}"),
                          "--go", str(go)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        deadline = time.monotonic() + 120
        while not all((tmp_path / f"ready{j}").exists() for j in range(len(ranges))):
            assert all(p.poll() is None for p in procs), "a worker died before starting"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        go.write_text("go")
        outs = finish(procs, 120)
        assert [p.returncode for p in procs] == [0, 0, 0], [e.decode()[-1500:] for _, e in outs]
        assert [o.decode().strip() for o, _ in outs] == ["done 30", "done 30", "done 30"]
        per_prompt = server.attempts
        prompts = [f"par {i}" for i in range(50)]
        assert sorted(per_prompt) == sorted(prompts)
        assert set(per_prompt.values()) == {1}        # every key asked exactly once
    assert _rows(store_path) == 50
