"""The everyday paths side by side, in one run, through the user's commands (issue 24).

Each figure is the wall time of a subprocess running the real command line of this
checkout (``python -m fairness_tests ...``, ``python -m pytest ...``), never a private
shortcut:

- **read**: a Python process that imports pandas and reads the main job's inputs into
  data frames: the committed recordings (21,020 responses, JSON lines, gzip), the two
  BBQ files and their metadata, and the generative grid expanded from the suite YAML
  (3,200 rows). This is the floor the main job is measured against.
- **main**: ``fairness-tests audit --out DIR`` on a warm store (the recordings already
  imported by an untimed first run), its stderr lines timestamped as they arrive.
- **dry**: ``fairness-tests audit --dry-run`` on the same store (nothing to ask).
- **suite**: ``python -m pytest -n 2`` in a repository made by ``fairness-tests init``
  that shares the main job's store (so it is as warm).

Ratios (targets): main/read <= 4, suite/main <= 1.2, dry/main <= 0.2, and the main
job's longest silence (the longest stretch without a stderr line, from its start to
its end) <= 0.25 of its run. With ``--test-command`` the project's own test command
(``python -m pytest -n auto`` in this checkout, the README's) is timed after the
rounds, against its 300 s target. With ``--repeats N`` each command runs N times
(interleaved: read, main, dry, suite, read, ...) and the medians are printed; the load
average at the start and the end says how busy the machine was.

    python bench/bench_everyday.py [--repeats 3] [--bbq-dir ../shared/bbq] [--keep DIR]
                                   [--test-command]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

READ_SCRIPT = r"""
import gzip, itertools, sys
import pandas as pd, yaml
rec, bbq, suite = sys.argv[1], sys.argv[2], sys.argv[3]
with gzip.open(rec, "rt") as fh:
    recordings = pd.read_json(fh, lines=True)
items = [pd.read_json(f"{bbq}/{c}.jsonl", lines=True) for c in ("Race_x_SES", "Race_x_gender")]
meta = pd.read_csv(f"{bbq}/additional_metadata.csv")
s = yaml.safe_load(open(suite))
names = list(s["slices"]["attributes"])
rows = []
for combo in itertools.product(*(s["slices"]["attributes"][n] for n in names)):
    a = s["slices"]["insertion"].format(**dict(zip(names, combo)))
    for occ, fam, reg, seed in itertools.product(s["occupations"], s["families"],
                                                 s["decoding"], s["seeds"]):
        for p in fam["paraphrases"]:
            rows.append({"family": fam["id"], "occupation": occ, "slice": "_".join(combo),
                         "prompt": p.replace("{A}", a).replace("{OCC}", occ),
                         "temperature": reg["temperature"], "seed": seed})
grid = pd.DataFrame(rows)
print(len(recordings), sum(map(len, items)), len(meta), len(grid))
"""

TARGETS = {"main/read": 4.0, "suite/main": 1.2, "dry/main": 0.2, "silence/main": 0.25}


@dataclass
class Timed:
    """One command's wall time, CPU time (user + system, its whole process tree), exit
    code, and the arrival times of its stderr lines."""
    seconds: float
    cpu: float
    rc: int
    stdout: str
    line_times: list[float] = field(default_factory=list)

    def longest_silence(self) -> float:
        """max gap between consecutive events in [start, stderr lines..., end], seconds."""
        marks = [0.0, *self.line_times, self.seconds]
        return max(b - a for a, b in zip(marks[:-1], marks[1:], strict=True))


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> Timed:
    """Run ``cmd``; stderr is read line by line as it arrives and each line stamped."""
    c0 = _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1)
    stamps: list[float] = []

    def read_stderr() -> None:
        for _ in proc.stderr:
            stamps.append(time.perf_counter() - t0)
    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    out = proc.stdout.read()
    rc = proc.wait()
    reader.join()
    return Timed(time.perf_counter() - t0, _children_cpu() - c0, rc, out, stamps)


def _children_cpu() -> float:
    """User + system seconds of every finished descendant (xdist workers included: each
    parent waits for its children)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def setup(work: Path, env: dict[str, str]) -> tuple[Path, Path]:
    """The user's repository (``init``) and its store, warmed by one untimed main job."""
    repo = work / "repo"
    repo.mkdir()
    ft = [sys.executable, "-m", "fairness_tests"]
    subprocess.run([*ft, "init"], cwd=repo, env=env, check=True, capture_output=True)
    store = repo / ".fairness" / "store.sqlite"
    warm = timed([*ft, "audit", "--out", str(work / "warm"), "--store", str(store)], repo, env)
    if warm.rc not in (0, 1):
        sys.exit(f"bench: the warm-up audit failed (exit {warm.rc})")
    print(f"setup: init + first main job (imports the recordings into the store) "
          f"{warm.seconds:.1f} s", flush=True)
    return repo, store


def one_round(i: int, work: Path, repo: Path, store: Path, env: dict[str, str],
              bbq: str) -> dict[str, Timed]:
    ft = [sys.executable, "-m", "fairness_tests"]
    rec = ROOT / "fixtures" / "recordings" / "embedded-gemma-3-270m.jsonl.gz"
    suite = ROOT / "fairness_tests" / "data" / "suites" / "default.yaml"
    out: dict[str, Timed] = {}
    out["read"] = timed([sys.executable, "-c", READ_SCRIPT, str(rec), bbq, str(suite)],
                        repo, env)
    out["main"] = timed([*ft, "audit", "--out", str(work / f"report-{i}"), "--store",
                         str(store)], repo, env)
    out["dry"] = timed([*ft, "audit", "--dry-run", "--store", str(store)], repo, env)
    out["suite"] = timed([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider",
                          "-q"], repo, env)
    for name, t in out.items():
        ok = t.rc == 0 or (name == "main" and t.rc == 1)
        if not ok:
            sys.exit(f"bench: {name} exited {t.rc}:\n{t.stdout[-3000:]}")
    return out


def ratios(r: dict[str, float]) -> dict[str, float]:
    out = {"main/read": r["main"] / r["read"], "suite/main": r["suite"] / r["main"],
           "dry/main": r["dry"] / r["main"]}
    if "silence" in r:
        out["silence/main"] = r["silence"] / r["main"]
    return out


def report(rounds: list[dict[str, Timed]], loads: tuple[str, str]) -> None:
    wall = [{**{k: t.seconds for k, t in r.items()},
             "silence": r["main"].longest_silence()} for r in rounds]
    cpu = [{k: t.cpu for k, t in r.items()} for r in rounds]
    label = {"read": "read the inputs into pandas", "main": "main job (warm store)",
             "dry": "audit --dry-run, nothing to ask", "suite": "suite after init, pytest -n 2",
             "silence": "main job's longest silence"}
    n = len(rounds)
    print(f"\neveryday paths, {n} round(s), medians (load average at start {loads[0]}, "
          f"at end {loads[1]}; {os.cpu_count()} CPUs):")
    print(f"  {'':<34} {'wall':>7}     {'CPU':>7}" + ("   wall of each round" if n > 1 else ""))
    for k in label:
        w = statistics.median(p[k] for p in wall)
        c = f"{statistics.median(p[k] for p in cpu):7.1f} s" if k in cpu[0] else " " * 9
        each = "  ".join(f"{p[k]:6.1f}" for p in wall) if n > 1 else ""
        print(f"  {label[k]:<34} {w:7.1f} s   {c}   {each}")
    lines = statistics.median(len(r["main"].line_times) for r in rounds)
    print(f"  (main job: {lines:g} stderr lines)")
    print("ratios (median over the rounds; target), of wall time and of CPU time:")
    rw, rc = [ratios(p) for p in wall], [ratios(p) for p in cpu]
    for k, target in TARGETS.items():
        v = statistics.median(r[k] for r in rw)
        c = f"{statistics.median(r[k] for r in rc):6.2f}" if k in rc[0] else "     -"
        print(f"  {k:<13} wall {v:6.2f}  CPU {c}   (<= {target:g})  "
              f"{'ok' if v <= target else 'OVER'}")


def test_command(env: dict[str, str]) -> None:
    """The README's test command in this checkout, timed (target: 300 s)."""
    start = load_average()
    env = {k: v for k, v in env.items() if k != "FAIRNESS_BBQ_DIR"}     # as CI runs it
    t = timed([sys.executable, "-m", "pytest", "-n", "auto", "-q", "-p", "no:cacheprovider"],
              ROOT, {**env, "FAIRNESS_REQUIRE_BROWSER": env.get("FAIRNESS_REQUIRE_BROWSER", "1")})
    tail = [line for line in t.stdout.splitlines() if " passed" in line or " failed" in line]
    print(f"\ntest command (python -m pytest -n auto): {t.seconds:.1f} s wall, {t.cpu:.1f} s CPU, "
          f"exit {t.rc} (<= 300 s) {'ok' if t.seconds <= 300 and t.rc == 0 else 'OVER'}; "
          f"load average {start} -> {load_average()}; {tail[-1] if tail else ''}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--bbq-dir", default=os.environ.get("FAIRNESS_BBQ_DIR")
                    or str(ROOT.parent / "shared" / "bbq"))
    ap.add_argument("--keep", help="work in this (new) directory and keep it")
    ap.add_argument("--test-command", action="store_true",
                    help="also time the project's test command (python -m pytest -n auto)")
    args = ap.parse_args()
    env = {**os.environ, "FAIRNESS_BBQ_DIR": str(Path(args.bbq_dir).resolve()),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1",
           # this checkout's package, whatever is installed
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("FAIRNESS_PROGRESS", None)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-everyday-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        start = load_average()
        repo, store = setup(work, env)
        rounds = []
        for i in range(args.repeats):
            rounds.append(one_round(i, work, repo, store, env, env["FAIRNESS_BBQ_DIR"]))
            r = rounds[-1]
            print(f"round {i + 1}: " + "  ".join(f"{k} {t.seconds:.1f} s (CPU {t.cpu:.1f})"
                                                 for k, t in r.items())
                  + f"  silence {r['main'].longest_silence():.1f} s", flush=True)
        report(rounds, (start, load_average()))
        if args.test_command:
            test_command(env)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
