"""The consistency protocol (20 repeats) per repeat mode against a loopback
OpenAI-compatible server: requests, input tokens and wall time, on the 448-item
sample and on all 8,112 items, and the dry-run estimate against the counted truth.

The path a user runs: ``fairness-tests audit --live --benchmarks consistency
--repeat-mode M --consistency-items S`` (in-process ``cli.main``, default
concurrency 8) into a fresh SQLite store, against ``tests/fault_server.py`` run as
its own process (the toy letter model, tokens counted with tiktoken o200k_base and
OpenAI's chat overhead, as for gpt-4o-mini), model ``openai/gpt-4o-mini`` (priced in
litellm's local cost map). Before each live run, ``audit --dry-run``'s estimate
(:func:`fairness_tests.pipeline.dry_run.dry_run`, what the CLI prints) for the same command.

Expected requests: 448 x 20 = 8,960 (calls), 448 (n, logprobs); all items:
162,240 / 8,112 / 8,112.

Batch rows (``--batch``): the same runs with ``audit --batch --batch-poll 0.05`` against
``tests/batch_server.py`` (the same answers, served through OpenAI's Files and Batches
endpoints): requests are batch lines, ``batches`` the jobs created; the dry-run cost is
the batch price (litellm's ``*_cost_per_token_batches``), the counted cost what the store
holds (billed at the batch price). The wall time is the loopback's (its batches complete
in three polls), not a provider's completion window.

    python bench/bench_repeat_modes.py [--items sample all] [--modes calls n logprobs]
                                       [--batch]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["FAIRNESS_PROGRESS"] = "off"

# the package after the environment above
from fairness_tests.cli.main import main as cli_main  # noqa: E402
from fairness_tests.models.batch.batch_lines import batch_price  # noqa: E402
from fairness_tests.models.store.store import ResponseStore  # noqa: E402
from fairness_tests.pipeline.configure import audit_config  # noqa: E402
from fairness_tests.pipeline.dry_run import dry_run  # noqa: E402

MODEL = "openai/gpt-4o-mini"


class Server:
    """tests/fault_server.py (or tests/batch_server.py) in its own process."""

    def __init__(self, script: str = "fault_server.py"):
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / script), "--letters",
             "--tiktoken", "o200k_base"], stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://127.0.0.1:"):
            raise SystemExit(f"server did not start: {self.url!r}")

    def stats(self) -> dict:
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as r:   # loopback
            return json.loads(r.read())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def args_for(url: str, store: Path, mode: str, items: str) -> list[str]:
    return ["--backend", "litellm", "--model", MODEL, "--api-base", url, "--store", str(store),
            "--recordings", "--benchmarks", "consistency", "--repeats", "20",
            "--repeat-mode", mode, "--consistency-items", items]


def one(mode: str, items: str, batch: bool = False) -> dict:
    server = Server("batch_server.py" if batch else "fault_server.py")
    extra = ["--batch", "--batch-poll", "0.05"] if batch else []
    try:
        with tempfile.TemporaryDirectory() as d:
            store = Path(d) / "store.sqlite"
            argv = args_for(server.url, store, mode, items)
            config = audit_config(
                model=MODEL, backend="litellm", benchmarks=["consistency"], repeats=20,
                store=str(store), api_base=server.url, repeat_mode=mode,
                consistency_items=items, recordings=())
            t0 = time.perf_counter()
            rows, _ = dry_run(config)
            t_dry = time.perf_counter() - t0
            est = next(r for r in rows if r.protocol == "consistency" and r.selected)
            t0 = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                rc = cli_main(["audit", "--live", *argv, *extra, "--out", str(Path(d) / "report")])
            wall = time.perf_counter() - t0
            if rc not in (0, 1):
                raise SystemExit(f"audit exited {rc}")
            truth = server.stats()
            with ResponseStore(store) as st:
                cost = sum(r["response"]["cost_usd"] or 0.0 for r in st.iter_records())
                stored = len(st)
    finally:
        server.stop()
    dry_cost = est.cost_usd
    if batch:
        price = batch_price(MODEL)
        dry_cost = est.input_tokens * price.input_per_token \
            + est.output_tokens * price.output_per_token
    return {"items": items, "mode": mode + ("+batch" if batch else ""), "responses": stored,
            "batches": truth.get("batches", 0), "requests": truth["requests"],
            "input_tokens": truth["prompt_tokens"], "output_tokens": truth["completion_tokens"],
            "cost_usd": cost, "wall_s": wall, "dry_calls": est.calls,
            "dry_input_tokens": est.input_tokens, "dry_output_tokens": est.output_tokens,
            "dry_cost_usd": dry_cost, "dry_s": t_dry}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", nargs="+", default=["sample", "all"], choices=["sample", "all"])
    ap.add_argument("--modes", nargs="+", default=["calls", "n", "logprobs"],
                    choices=["calls", "n", "logprobs"])
    ap.add_argument("--batch", action="store_true",
                    help="also the batch rows (audit --batch against tests/batch_server.py)")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    a = ap.parse_args()
    print(f"consistency x 20 repeats, {MODEL} on a loopback server; load average at start "
          f"{os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    head = (f"{'items':6} {'mode':14} {'requests':>9} {'(dry run)':>9} {'input tok':>10} "
            f"{'(dry run)':>10} {'output tok':>10} {'(at most)':>10} {'cost $':>8} "
            f"{'(at most)':>9} {'wall s':>7} {'req/s':>6}")
    print(head)
    rows = []
    runs = [(items, mode, False) for items in a.items for mode in a.modes]
    if a.batch:
        runs += [(items, mode, True) for items in a.items for mode in a.modes]
    for items, mode, batch in runs:
        r = one(mode, items, batch)
        rows.append(r)
        print(f"{r['items']:6} {r['mode']:14} {r['requests']:>9} {r['dry_calls']:>9} "
              f"{r['input_tokens']:>10} {r['dry_input_tokens']:>10} {r['output_tokens']:>10} "
              f"{r['dry_output_tokens']:>10} {r['cost_usd']:>8.4f} {r['dry_cost_usd']:>9.4f} "
              f"{r['wall_s']:>7.1f} {r['requests'] / r['wall_s']:>6.0f}"
              + (f"  ({r['batches']} batch job(s))" if r["batches"] else ""), flush=True)
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
