"""CrowS-Pairs: `fairness-tests audit --live --benchmarks crows_pairs` against
lm-evaluation-harness's own ``crows_pairs_english`` task, side by side.

Same pairs, same weights, same threads, in one script:

1. ours: ``python -m fairness_tests.cli.main audit --live --benchmarks crows_pairs
   [--limit N]`` on a fresh store (answering time from its progress lines: model ready to
   the last answer), its per-pair records read back from the run directory;
2. lm-eval 0.4.13 (optional: skipped with a message without it), in a child process:
   ``HFLM`` on the cached safetensors copy of the embedded GGUF (the checkpoint ours
   loads: :func:`fairness_tests.models.backends.embedded.prepare`), float32, batch size
   ``--lmeval-batch-size``, ``torch.set_num_threads(--threads)``, running ITS task,
   ``crows_pairs_english``, from its installed YAML and ``utils.py``, on the same pairs of
   the authors' file (:mod:`fairness_tests.benchmarks.crows_pairs.lmeval` says how its
   dataset's fields are built). Answering time = lm-eval's ``evaluate`` call; the model
   load apart.

Prints items (pairs) per second of both, the ratio, the largest absolute difference of a
sentence's log-likelihood (the issue asks <= 1e-4) and of each aggregate (<= 1e-6;
lm-eval's pct_stereotype is a share, ours a percentage: ours / 100 is compared).

    python bench/bench_crows_pairs_vs_lmeval.py [--limit N] [--threads 2]
        [--lmeval-batch-size 8]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fairness_tests.benchmarks.crows_pairs import lmeval as L  # noqa: E402
from fairness_tests.benchmarks.crows_pairs.data import load  # noqa: E402
from fairness_tests.models.backends import embedded as emb  # noqa: E402

COUNT = re.compile(r"\s(\d+)/(\d+)\s")


def chosen(pair_ids: list[int]) -> tuple:
    """The pairs of ``pair_ids`` as this tool reads the authors' file, in file order."""
    keep = set(pair_ids)
    return tuple(p for p in load().pairs if p.pair_id in keep)


def lmeval_worker(a) -> int:
    """Child process: lm-eval's task on the pairs of ``--pairs``."""
    import torch  # noqa: PLC0415  heavy, optional: only in the lm-eval child process
    torch.set_num_threads(a.threads)
    pairs = chosen(json.loads(Path(a.pairs).read_text()))
    t0 = time.perf_counter()
    lm = L.hflm(emb.prepare(), int(a.lmeval_batch_size))
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    got = L.evaluate(lm, pairs)
    got.update(load_s=load_s, answer_s=time.perf_counter() - t1, threads=torch.get_num_threads())
    print(json.dumps(got))
    return 0


def run_ours(work: Path, limit: int, threads: int) -> tuple[pd.DataFrame, dict]:
    """A fresh-store ``audit --live --benchmarks crows_pairs``; its records and timings."""
    cmd = [sys.executable, "-m", "fairness_tests.cli.main", "audit", "--live", "--benchmarks",
           "crows_pairs", "--recordings", "--store", str(work / "store.sqlite"),
           "--out", str(work / "ours"), *(["--limit", str(limit)] if limit else [])]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               FAIRNESS_PROGRESS="stderr", HF_HUB_OFFLINE="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, bufsize=1)
    assert proc.stderr is not None
    lines = []
    for raw in proc.stderr:
        line = raw.rstrip("\n").split("\r")[-1]
        if line.startswith("crows_pairs "):
            lines.append((time.perf_counter() - t0, line))
    rc, wall = proc.wait(), time.perf_counter() - t0
    ready = next((t for t, ln in lines if "model ready" in ln), None)
    counts = [(t, ln) for t, ln in lines if COUNT.search(ln)]
    if rc not in (0, 1, 5) or ready is None or not counts:
        raise SystemExit(f"audit failed (exit {rc}): {' '.join(cmd)}")
    records = pd.read_csv(work / "ours" / "run" / "records" / "crows_pairs.csv.gz")
    table = pd.read_csv(work / "ours" / "run" / "tables" / "crows_pairs.csv")
    return records, {"wall_s": wall, "load_s": ready, "answer_s": counts[-1][0] - ready,
                     "table": table}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=10, help="pairs per bias type (0: all 1,508)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lmeval-batch-size", default="8",
                    help="lm-eval's batch size; several (8,1): the first is timed and compared "
                         "with ours, the others with the first (lm-eval's own reproducibility "
                         "across batch sizes)")
    ap.add_argument("--lmeval-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--pairs", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.lmeval_worker:
        return lmeval_worker(a)
    print(f"# {a.threads} threads, float32, same checkpoint; load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rec, ours = run_ours(work, a.limit, a.threads)
        n = len(rec)
        print(f"ours: {n} pairs ({2 * n} loglikelihood requests) in {ours['answer_s']:.1f} s = "
              f"{n / ours['answer_s']:.2f} pairs/s (wall {ours['wall_s']:.1f} s, model load + "
              f"setup {ours['load_s']:.1f} s)  [load average {os.getloadavg()[0]:.2f}]",
              flush=True)
        try:
            import lm_eval  # noqa: PLC0415  optional (this bench only): skipped without it
        except ImportError:
            print("lm-eval: skipped, not installed (pip install lm-eval==0.4.13 for this bench)")
            return 0
        pairs = work / "pairs.json"
        pairs.write_text(json.dumps([int(x) for x in rec["pair_id"]]))
        runs = [lmeval_child(pairs, a.threads, int(b)) for b in a.lmeval_batch_size.split(",")]
    got = runs[0]
    rate, mine = len(got["pair_id"]) / got["answer_s"], n / ours["answer_s"]
    print(f"lm-eval {lm_eval.__version__} {L.TASK}, batch {got['batch_size']}: "
          f"{len(got['pair_id'])} pairs in {got['answer_s']:.1f} s = {rate:.2f} pairs/s (model "
          f"load {got['load_s']:.1f} s, {got['threads']} threads)  [load average "
          f"{os.getloadavg()[0]:.2f}]")
    print(compare(rec, ours["table"], got))
    for other in runs[1:]:
        print(f"lm-eval batch {other['batch_size']} against batch {got['batch_size']}: " +
              ll_differences(other, got))
    print(f"ratio: ours / lm-eval = {mine / rate:.2f}x  (load average now {os.getloadavg()})")
    return 0


def lmeval_child(pairs: Path, threads: int, batch_size: int) -> dict:
    """lm-eval's run of the pairs in a child process (its own torch threads)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, __file__, "--lmeval-worker", "--pairs", str(pairs),
                           "--threads", str(threads), "--lmeval-batch-size", str(batch_size)],
                          env=env, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-3000:])
        raise SystemExit(f"lm-eval worker failed (exit {proc.returncode})")
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "batch_size": batch_size}


def ll_differences(a: dict, b: dict) -> str:
    """The largest log-likelihood and aggregate differences between two lm-eval runs."""
    ll = max(np.abs(np.array(a["ll_more"]) - b["ll_more"]).max(),
             np.abs(np.array(a["ll_less"]) - b["ll_less"]).max())
    agg = {k: abs(a["agg"][k] - b["agg"][k]) for k in a["agg"]}
    return (f"max |log-likelihood difference| {ll:.2e}; |pct_stereotype difference| "
            f"{agg['pct_stereotype']:.2e}; |likelihood_diff difference| "
            f"{agg['likelihood_diff']:.2e}")


def compare(rec: pd.DataFrame, table: pd.DataFrame, got: dict) -> str:
    """The largest differences, ours - lm-eval: per sentence and per aggregate."""
    ours = rec.set_index("pair_id").loc[got["pair_id"]]
    ll = max(np.abs(ours["ll_more"] - got["ll_more"]).max(),
             np.abs(ours["ll_less"] - got["ll_less"]).max())
    per = np.abs(ours["stereotype"].to_numpy() - np.array(got["pct_stereotype"])).max()
    overall = table[table["bias_type"] == "all"].set_index("metric")["value"]
    d_pct = abs(overall["pct_stereotype"] / 100 - got["agg"]["pct_stereotype"])
    d_diff = abs(overall["likelihood_diff"] - got["agg"]["likelihood_diff"])
    return (f"max |log-likelihood ours - lm-eval| = {ll:.2e} over {2 * len(ours)} sentences; "
            f"per-pair stereotype flags differ by at most {per:g}; aggregates: "
            f"|pct_stereotype/100 - lm-eval| = {d_pct:.2e}, |likelihood_diff - lm-eval| = "
            f"{d_diff:.2e} (lm-eval pct_stereotype {got['agg']['pct_stereotype']:.6f}, "
            f"likelihood_diff {got['agg']['likelihood_diff']:.6f})")


if __name__ == "__main__":
    sys.exit(main())
