"""A recording process for the store's process tests (run as a script).

Asks prompts ``<tag> <i>`` for i in [start, stop) through the litellm backend
against ``--api-base`` into the SQLite store at ``--store``. With ``--ready``
and ``--go`` it writes the ready file once imported and waits (bounded) for the
go file, so several workers start together.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from fairness_tests.models.asking.runner import ask
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
from fairness_tests.models.backends.litellm_import import load_litellm
from fairness_tests.models.requests.request import Decoding, Request, chat
from fairness_tests.models.store.store import ResponseStore


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--api-base", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--stop", type=int, required=True)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--ready")
    ap.add_argument("--go")
    a = ap.parse_args()

    load_litellm()                                   # import the heavy part before the start line
    if a.ready:
        Path(a.ready).write_text("ready")
    if a.go:
        deadline = time.monotonic() + 120
        while not Path(a.go).exists():
            if time.monotonic() > deadline:
                print("no go signal", file=sys.stderr)
                return 2
            time.sleep(0.02)
    requests = [Request(messages=chat(None, f"{a.tag} {i}"), backend="litellm",
                        model="openai/fault-model", api_base=a.api_base,
                        decoding=Decoding(0.0, 1.0, 8), meta={"i": i})
                for i in range(a.start, a.stop)]
    with ResponseStore(a.store) as store:
        out = ask(requests, LiteLLMBackend(max_concurrency=a.concurrency, timeout_s=20),
                  store, batch_size=a.batch_size, progress=False, poll_s=0.02)
    print(f"done {sum(o.status == 'ok' for o in out)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
