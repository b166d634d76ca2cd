"""Re-running a completed run: zero model calls, and how long it takes.

Records N requests through the litellm backend against a loopback server into
a fresh SQLite store, then runs the same requests again (live backend: store
hits only) and in replay mode, counting the calls the server receives.

    python bench/bench_rerun.py [--n 2000]
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
from fairness_tests.models.backends.replay import ReplayBackend  # noqa: E402
from fairness_tests.models.requests.request import Decoding, Request, chat  # noqa: E402
from fairness_tests.models.store.store import ResponseStore  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5, help="timed re-runs (best is shown)")
    a = ap.parse_args()
    load_litellm()
    with FaultServer() as server, tempfile.TemporaryDirectory() as d:
        reqs = [Request(messages=chat("Answer with a letter.", f"question {i // 20}"),
                        backend="litellm", model="openai/bench-model", api_base=server.url,
                        kind="choice", choices=("a", "b", "c"), decoding=Decoding(1.0, 1.0, 4),
                        seed=0, repeat=i % 20, meta={"item": i // 20, "repeat": i % 20})
                for i in range(a.n)]
        store = ResponseStore(Path(d) / "r.sqlite")
        t0 = time.perf_counter()
        ask(reqs, LiteLLMBackend(max_concurrency=32), store, progress=False)
        record_s = time.perf_counter() - t0
        recorded_calls = len(server.hits)
        server.reset()
        live, replayed = [], []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            out = ask(reqs, LiteLLMBackend(max_concurrency=32), store, progress=False)
            live.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            out2 = ask(reqs, ReplayBackend(store=store), store)
            replayed.append(time.perf_counter() - t0)
        assert [o.answer for o in out] == [o.answer for o in out2]
        rerun_calls = len(server.hits)
        size = store.stats()["size_bytes"]
        store.close()
    print(f"requests: {a.n} (multiple choice, {a.n // 20} prompts x 20 repeats); "
          f"store {size / 1e6:.2f} MB")
    print(f"first run (recording, concurrency 32): {recorded_calls} model calls, "
          f"{record_s:.2f} s")
    print(f"re-run, live backend: {rerun_calls} model calls over {a.repeats} re-runs; "
          f"best {min(live):.3f} s ({a.n / min(live):,.0f} responses/s)")
    print(f"re-run, replay backend: best {min(replayed):.3f} s "
          f"({a.n / min(replayed):,.0f} responses/s)")
    return 0 if rerun_calls == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
