"""Throughput of the litellm path against a loopback OpenAI-compatible server with a
fixed 50 ms latency, at concurrency 1, 8 and 32.

Measures the whole path a run takes: runner.ask -> store lookups and leases ->
LiteLLMBackend (asyncio, semaphore) -> HTTP on 127.0.0.1 -> commit of each
response to a fresh SQLite store. The ideal is concurrency / 0.05 s.

    python bench/bench_litellm.py [--latency 0.05] [--seconds 4]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from fault_server import FaultServer  # noqa: E402

from fairness_tests.models.asking.runner import ask  # noqa: E402
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend  # noqa: E402
from fairness_tests.models.backends.litellm_import import load_litellm  # noqa: E402
from fairness_tests.models.requests.request import Decoding, Request, chat  # noqa: E402
from fairness_tests.models.store.store import ResponseStore  # noqa: E402


def run(server: FaultServer, concurrency: int, n: int, tag: str) -> tuple[float, int]:
    reqs = [Request(messages=chat(None, f"{tag} {i}"), backend="litellm",
                    model="openai/bench-model", api_base=server.url,
                    decoding=Decoding(0.0, 1.0, 8)) for i in range(n)]
    with tempfile.TemporaryDirectory() as d, ResponseStore(Path(d) / "b.sqlite") as store:
        be = LiteLLMBackend(max_concurrency=concurrency, timeout_s=30)
        t0 = time.perf_counter()
        out = ask(reqs, be, store, progress=False, batch_size=10_000)
        dt = time.perf_counter() - t0
        assert all(o.status == "ok" for o in out), [o.error for o in out if o.status != "ok"][:3]
        assert len(store) == n
    return dt, server.max_inflight


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--seconds", type=float, default=4.0,
                    help="aim for about this long per concurrency level")
    ap.add_argument("--levels", default="1,8,32")
    a = ap.parse_args()
    load_litellm()
    print(f"loopback server latency {a.latency * 1000:.0f} ms; each level runs about "
          f"{a.seconds:g} s; ideal = concurrency / latency")
    print(f"{'concurrency':>11} {'requests':>9} {'seconds':>8} {'req/s':>8} {'ideal':>7} "
          f"{'eff.':>6} {'max in flight':>14}")
    with FaultServer(latency_s=a.latency) as server:
        run(server, 4, 8, "warmup")
        for c in (int(x) for x in a.levels.split(",")):
            server.reset()
            ideal = c / a.latency
            n = max(20, int(ideal * a.seconds))
            dt, peak = run(server, c, n, f"c{c}")
            rate = n / dt
            print(f"{c:>11} {n:>9} {dt:>8.2f} {rate:>8.1f} {ideal:>7.0f} {rate / ideal:>6.0%} "
                  f"{peak:>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
