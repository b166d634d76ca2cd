"""Winogender: this tool against lm-evaluation-harness's own ``winogender_*`` tasks, side by side.

Same sentences, same weights, same threads, one script, each side in its own child process:

1. ours: the transformers backend (the audit's, :class:`TransformersBackend` on
   ``embedded:gemma-3-270m``, its default batching and workers, ``--threads`` CPU threads
   in all) answering the benchmark's ``loglikelihood`` requests (two per sentence sharing
   one context, computed once by the prefix tree), then the ``winogender`` table from
   them (:mod:`fairness_tests.benchmarks.winogender.metrics`);
2. lm-eval 0.4.13 (optional: skipped with a message without it): ``HFLM`` on the cached
   safetensors copy of the embedded GGUF (the checkpoint ours loads; see
   ``bench_vs_lmeval.py``), float32, ``--lmeval-batch-size``, ``add_bos_token``, running
   lm-eval's own task YAMLs on our fields of the authors' files
   (:mod:`fairness_tests.benchmarks.winogender.lmeval`): ``winogender_all`` first (timed:
   its ``evaluate`` call), then the six subset tasks (male, female, neutral, gotcha,
   gotcha_male, gotcha_female) for their ``acc``.

Answering time excludes loading the model on both sides. Prints items/s of both and the
ratio (ours / lm-eval; the issue asks >= 5x), the per-sentence log-likelihood max |diff|
(<= 1e-4) and every task's accuracy difference (<= 1e-6), and exits 1 when an equality
does not hold.

    python bench/bench_winogender_vs_lmeval.py [--limit N] [--threads 2]
        [--lmeval-batch-size 8]

``--limit N``: the first N templates of each answer (6 sentences each; default all 720).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fairness_tests.benchmarks.winogender import data as D  # noqa: E402
from fairness_tests.benchmarks.winogender import metrics as M  # noqa: E402
from fairness_tests.benchmarks.winogender import prompt as P  # noqa: E402
from fairness_tests.benchmarks.winogender.family import limit_templates  # noqa: E402
from fairness_tests.core.paths import benchmark_data_dir  # noqa: E402
from fairness_tests.models.backends import embedded as emb  # noqa: E402

LL_TOL, ACC_TOL = 1e-4, 1e-6


def items_of(limit: int | None):
    return limit_templates(D.load(benchmark_data_dir("winogender")).sentences, limit)


def ours_worker(a) -> dict:
    """Child process: our backend answering the requests; the table from the answers."""
    import torch  # noqa: PLC0415  heavy, optional: only in the child process
    torch.set_num_threads(a.threads)
    from fairness_tests.models.backends.transformers_backend import (  # noqa: PLC0415
        TransformersBackend,
    )
    items = items_of(a.limit)
    be = TransformersBackend(emb.EMBEDDED, threads=a.threads)
    reqs = P.requests(items.to_dict("records"), backend="transformers", model=emb.EMBEDDED,
                      api_base=None)
    t0 = time.perf_counter()
    be.loaded()
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    res = be.answer(reqs)
    answer_s = time.perf_counter() - t1
    bad = [r.error for r in res if r.status != "ok"]
    if bad:
        raise SystemExit(f"{len(bad)} requests failed: {bad[0]}")
    ll = np.array([r.logprob for r in res], dtype=np.float64).reshape(-1, 2)
    table = M.winogender_table(M.answers(items, ll), None, n_boot=10)
    acc = {f"{s}/{g}": float(v) for s, g, v in table.loc[
        table["metric"] == M.ACCURACY, ["subset", "gender", "value"]].itertuples(index=False)}
    return {"load_s": load_s, "answer_s": answer_s, "items": len(items),
            "requests": len(reqs), "sentid": items["sentid"].tolist(),
            "loglik": ll.tolist(), "acc": acc}


def lmeval_worker(a) -> dict:
    """Child process: lm-eval's HFLM and its own winogender tasks."""
    import torch  # noqa: PLC0415  heavy, optional
    torch.set_num_threads(a.threads)
    from lm_eval.models.huggingface import HFLM  # noqa: PLC0415  optional (this bench only)

    from fairness_tests.benchmarks.winogender import lmeval as L  # noqa: PLC0415
    items = items_of(a.limit)
    work = Path(a.work)
    t0 = time.perf_counter()
    lm = HFLM(pretrained=str(emb.prepare()), device="cpu", dtype="float32",
              batch_size=a.lmeval_batch_size, add_bos_token=True)
    load_s = time.perf_counter() - t0
    main = L.tasks(items, work / "all", ("winogender_all",))
    t1 = time.perf_counter()
    first = L.evaluate(lm, main)
    answer_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    rest = L.evaluate(lm, L.tasks(items, work / "rest", tuple(L.TASKS)[1:]))
    rest_s = time.perf_counter() - t2
    acc = {**first["acc"], **rest["acc"]}
    return {"load_s": load_s, "answer_s": answer_s, "rest_s": rest_s, "items": len(items),
            "threads": torch.get_num_threads(), "acc": acc,
            "loglik": first["loglik"]["winogender_all"]}


def child(a, role: str, work: Path) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads),
               HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    argv = [sys.executable, __file__, "--worker", role, "--work", str(work), "--threads",
            str(a.threads), "--lmeval-batch-size", str(a.lmeval_batch_size)]
    if a.limit:
        argv += ["--limit", str(a.limit)]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-3000:])
        raise SystemExit(f"{role} worker failed (exit {proc.returncode})")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall_s"] = time.perf_counter() - t0
    return out


def compare(ours: dict, ref: dict) -> bool:
    """Print the per-sentence and per-task differences; True when both are within bounds."""
    from fairness_tests.benchmarks.winogender import lmeval as L  # noqa: PLC0415  optional
    mine = dict(zip(ours["sentid"], map(tuple, ours["loglik"]), strict=True))
    diffs = [abs(mine[s][j] - v[j]) for s, v in ref["loglik"].items() for j in (0, 1)]
    ll_max = max(diffs)
    print(f"log-likelihoods: {len(diffs)} compared, max |ours - lm-eval| = {ll_max:.2e} "
          f"(bound {LL_TOL:g})")
    worst = 0.0
    for task, (subset, gender) in L.TASKS.items():
        d = abs(ours["acc"][f"{subset}/{gender}"] - ref["acc"][task])
        worst = max(worst, d)
        print(f"  {task:26s} lm-eval acc {ref['acc'][task]:.6f}  ours "
              f"{ours['acc'][f'{subset}/{gender}']:.6f}  |diff| {d:.1e}")
    print(f"accuracy: max |diff| = {worst:.1e} (bound {ACC_TOL:g})")
    return ll_max <= LL_TOL and worst <= ACC_TOL


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lmeval-batch-size", type=int, default=8)
    ap.add_argument("--worker", choices=("ours", "lmeval"), help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps((ours_worker if a.worker == "ours" else lmeval_worker)(a)))
        return 0
    print(f"# {a.threads} threads, same checkpoint; load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        ours = child(a, "ours", Path(tmp))
        rate = ours["items"] / ours["answer_s"]
        print(f"ours: {ours['items']} sentences ({ours['requests']} loglikelihood requests) in "
              f"{ours['answer_s']:.1f} s = {rate:.2f} items/s (load {ours['load_s']:.1f} s, "
              f"wall {ours['wall_s']:.1f} s)  [load average {os.getloadavg()[0]:.2f}]",
              flush=True)
        try:
            import lm_eval  # noqa: PLC0415  optional (this bench only): skipped without it
        except ImportError:
            print("lm-eval: skipped, not installed (pip install lm-eval==0.4.13 for this bench)")
            return 0
        ref = child(a, "lmeval", Path(tmp))
    ref_rate = ref["items"] / ref["answer_s"]
    print(f"lm-eval {lm_eval.__version__} winogender_all, batch {a.lmeval_batch_size}: "
          f"{ref['items']} sentences in {ref['answer_s']:.1f} s = {ref_rate:.2f} items/s (load "
          f"{ref['load_s']:.1f} s, the six subset tasks {ref['rest_s']:.1f} s more, wall "
          f"{ref['wall_s']:.1f} s, {ref['threads']} threads)  [load average "
          f"{os.getloadavg()[0]:.2f}]")
    same = compare(ours, ref)
    print(f"ratio: ours / lm-eval = {rate / ref_rate:.2f}x items/s")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
