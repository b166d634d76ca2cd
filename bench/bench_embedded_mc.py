"""Multiple-choice answers per second of the embedded model, through `fairness-tests audit --live`.

Runs the command a user runs, as a subprocess, on a fresh store with no recordings:

    python -m fairness_tests.cli.main audit --live --benchmarks bbq --rotations none --limit 30 \\
        --batch-size B --recordings --store <tmp> --out <tmp>

(240 intersectional BBQ items: the first 30 per dataset x context x polarity) once per
batch size, with OMP_NUM_THREADS = --threads (torch's CPU threads). On a virtual
machine the hypervisor may give this machine's CPUs to others ("steal" in /proc/stat);
the share stolen while answering is printed beside each figure. Its progress lines
are read as they are written and time-stamped here: "answering" is from the line saying
the model is ready to the last line, which is what items/s is computed over; the model
load is the time before. It also prints how many progress lines came while the model
worked, the tokens computed against the tokens in the prompts (the backend's own line),
and the forward-pass time (the sum of the recorded latencies). Nothing is timed in tests.

    python bench/bench_embedded_mc.py [--batch-sizes 8,16,32] [--limit 30] [--threads 2]
        [--workers 1,auto] [--rotations none] [--benchmarks bbq] [--keep DIR]

``--benchmarks bbq consistency --rotations sample`` measures the consistency sample with
its option rotations (1344 prompts, each asked 20 times at rotation 0).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class AuditRun:
    """What one `audit --live` subprocess did."""
    batch_size: int
    wall_s: float = 0.0
    load_s: float = 0.0
    answer_s: float = 0.0
    answers: int = 0
    prompts: int = 0
    prompt_tokens: int = 0
    computed_tokens: int = 0
    forward_s: float = 0.0
    lines_while_working: int = 0
    workers: str = ""               # "2 workers x 1 thread", from the backend's line
    steal_pct: float = float("nan")
    lines: list[tuple[float, str]] = field(default_factory=list)
    store: Path | None = None
    returncode: int = 0

    @property
    def items_per_s(self) -> float:
        return self.answers / self.answer_s if self.answer_s else float("nan")


NOTE = re.compile(r"model ready in [\d.]+ s \(([^)]*)\); (\d+) requests"
                  r"(?:, (\d+) distinct prompts: (\d+) of (\d+) prompt tokens)?")
COUNT = re.compile(r"\s(\d+)/(\d+)\s")


def cpu_times() -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs from /proc/stat ((0, 0) where there is none):
    steal is the time the hypervisor gave this virtual machine's CPUs to others."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return (v[7] if len(v) > 7 else 0), sum(v[:8])


def run_audit(batch_size: int | None, workdir: Path, *, limit: int | None = 30, threads: int = 2,
              rotations: str = "none", protocols: tuple[str, ...] = ("bbq",),
              echo: bool = True, workers: str | None = None) -> AuditRun:
    """One fresh-store `audit --live` run as a subprocess; its progress time-stamped.
    ``batch_size``/``workers`` None: the audit's default (the command a user types)."""
    tag = f"b{batch_size or 'default'}" + (f"-w{workers}" if workers else "")
    store = workdir / f"store-{tag}.sqlite"
    for p in (store, Path(f"{store}-wal"), Path(f"{store}-shm")):
        if p.exists():
            p.unlink()
    cmd = [sys.executable, "-m", "fairness_tests.cli.main", "audit", "--live",
           "--benchmarks", *protocols, "--rotations", rotations,
           *(["--batch-size", str(batch_size)] if batch_size else []),
           *(["--workers", str(workers)] if workers else []),
           "--recordings", "--store", str(store),
           "--out", str(workdir / f"out-{tag}")]
    if limit:
        cmd += ["--limit", str(limit)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               FAIRNESS_PROGRESS="stderr", HF_HUB_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    run = AuditRun(batch_size, store=store)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, bufsize=1)
    assert proc.stderr is not None
    marks: list[tuple[int, int]] = []
    for raw in proc.stderr:
        line = raw.rstrip("\n").split("\r")[-1]
        if line.startswith("bbq "):
            run.lines.append((time.perf_counter() - t0, line))
            if "model ready" in line or (marks and COUNT.search(line)):
                marks = marks[:1] + [cpu_times()]
            if echo:
                print(f"  [{run.lines[-1][0]:6.1f}s] {line}", flush=True)
    run.returncode = proc.wait()
    run.wall_s = time.perf_counter() - t0
    ready = next((i for i, (_, ln) in enumerate(run.lines) if "model ready" in ln), None)
    if ready is None or run.returncode not in (0, 1):   # 1 = a rule failed: a finished run
        raise SystemExit(f"audit failed (exit {run.returncode}); command: {' '.join(cmd)}")
    t_ready, note = run.lines[ready]
    m = NOTE.search(note)
    if m:
        run.workers = m.group(1)
    if m and m.group(3):
        run.prompts, run.computed_tokens, run.prompt_tokens = (int(m.group(i)) for i in (3, 4, 5))
    work = [(t, ln) for t, ln in run.lines[ready + 1:] if COUNT.search(ln)]
    run.load_s = t_ready
    run.answer_s = work[-1][0] - t_ready if work else float("nan")
    run.answers = int(COUNT.search(work[-1][1]).group(1)) if work else 0
    run.lines_while_working = len(work)
    if len(marks) == 2 and marks[1][1] > marks[0][1]:
        run.steal_pct = 100.0 * (marks[1][0] - marks[0][0]) / (marks[1][1] - marks[0][1])
    con = sqlite3.connect(store)
    try:
        run.forward_s = _forward_seconds(con)
    finally:
        con.close()
    return run


def _forward_seconds(con: sqlite3.Connection) -> float:
    """Sum of the recorded latencies over distinct prompts (repeats of a prompt share one
    distribution and carry its latency; the latencies of prompts add up to the forward
    passes' wall time)."""
    seen: dict[str, float] = {}
    for req, lat in con.execute("SELECT request_json, latency_s FROM responses"):
        q = json.loads(req)
        q.pop("repeat", None)
        q.pop("seed", None)
        seen[json.dumps(q, sort_keys=True)] = lat or 0.0
    return sum(seen.values())


def describe(run: AuditRun) -> str:
    tok = (f"; tokens computed {run.computed_tokens} of {run.prompt_tokens} in the "
           f"{run.prompts} prompts ({run.computed_tokens / run.prompt_tokens:.1%})"
           if run.prompt_tokens else "")
    return (f"batch {run.batch_size or 'default'}: {run.answers} answers in {run.answer_s:.1f} s = "
            f"{run.items_per_s:.2f} items/s (wall {run.wall_s:.1f} s, model load + setup "
            f"{run.load_s:.1f} s, {run.workers or '1 worker'}, forward passes "
            f"{run.forward_s:.1f} s summed over the workers, "
            f"{run.lines_while_working} progress lines while answering, CPU steal "
            f"{run.steal_pct:.1f}% while answering){tok}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch-sizes", default="8,16,32")
    ap.add_argument("--limit", type=int, default=30, help="items per dataset x context x polarity")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workers", default="",
                    help="comma-separated --workers values to alternate per batch size "
                         "(e.g. 1,auto); default: the audit's own (auto)")
    ap.add_argument("--rotations", default="none", choices=("none", "sample", "all"))
    ap.add_argument("--benchmarks", nargs="+", default=["bbq"])
    ap.add_argument("--keep", default=None, help="keep stores and runs in this directory")
    ap.add_argument("--quiet", action="store_true", help="do not echo the progress lines")
    a = ap.parse_args()
    sizes = [int(x) for x in a.batch_sizes.split(",") if x.strip()]
    print(f"# audit --live --benchmarks {' '.join(a.benchmarks)} --rotations {a.rotations} "
          f"--limit {a.limit}; {a.threads} threads; load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.keep) if a.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        runs = []
        for b in sizes:
            for w in [x.strip() for x in a.workers.split(",") if x.strip()] or [None]:
                runs.append(run_audit(b, work, limit=a.limit, threads=a.threads,
                                      rotations=a.rotations, benchmarks=tuple(a.benchmarks),
                                      echo=not a.quiet, workers=w))
                print(describe(runs[-1]) + f"  [load average {os.getloadavg()[0]:.2f}]",
                      flush=True)
    best = max(runs, key=lambda r: r.items_per_s)
    print(f"fastest: batch {best.batch_size}, {best.workers} ({best.items_per_s:.2f} items/s); "
          f"load average now {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
