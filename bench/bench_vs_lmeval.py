"""`fairness-tests audit --live` against lm-evaluation-harness multiple_choice, side by side.

Same items, same weights, same threads, in one script and one process tree:

1. ours: `python -m fairness_tests.cli.main audit --live --benchmarks bbq --rotations none
   --limit 30` on a fresh store (240 intersectional BBQ items), as
   ``bench_embedded_mc.py`` runs it (answering time from its progress lines);
2. lm-eval 0.4.13 (``pip install lm-eval==0.4.13``; an optional dependency of this
   bench only: without it this part is skipped with a message), in a child process:
   ``HFLM`` on the cached safetensors copy of the embedded GGUF (the checkpoint ours
   loads), float32, ``--batch-size`` (8), the same torch threads, asked the
   ``loglikelihood`` requests a ``multiple_choice`` task makes: for each item, one per
   option, context = the exact prompt ours feeds the model (Gemma turns, model turn
   opened) and continuation = the option (``--lmeval-choices texts``: ``"Answer:"`` then
   ``" " + option text``, lm-eval's BBQ scoring; ``letters``: ``"Answer: ("`` then the
   letter, the question ours answers, where lm-eval computes each context once). The
   items are read back from the store of run 1, so both see the same ones. Answering
   time = the ``loglikelihood`` call; the model load is timed apart.

Prints items/s of both, the ratio, and the load average.

    python bench/bench_vs_lmeval.py [--limit 30] [--threads 2] [--batch-size B]
        [--lmeval-batch-size 8] [--lmeval-choices texts|letters]
"""
from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from bench_embedded_mc import describe, run_audit  # noqa: E402

from fairness_tests.models.backends import embedded as emb  # noqa: E402


def items_from_store(store: Path) -> list[dict]:
    """The recorded items: messages, options in display order, letters."""
    con = sqlite3.connect(store)
    try:
        rows = con.execute("SELECT request_json, meta_json FROM responses ORDER BY key").fetchall()
    finally:
        con.close()
    out, seen = [], set()
    for req, meta in rows:
        q, m = json.loads(req), json.loads(meta)
        ident = (m["dataset"], m["example_id"], m["rotation"])
        if q["kind"] != "choice" or ident in seen:
            continue
        seen.add(ident)
        shown = [m["options"][o] for o in m["order"]]
        out.append({"id": list(ident), "messages": q["messages"], "choices": q["choices"],
                    "shown": shown, "letter_probs": None})
    probs = {}
    con = sqlite3.connect(store)
    try:
        for meta, lp in con.execute("SELECT meta_json, letter_probs FROM responses"):
            m = json.loads(meta)
            probs[(m["dataset"], m["example_id"], m["rotation"])] = json.loads(lp) if lp else None
    finally:
        con.close()
    for it in out:
        it["letter_probs"] = probs.get(tuple(it["id"]))
    return sorted(out, key=lambda d: d["id"])


def lmeval_worker(args) -> int:
    """Child process: lm-eval's HFLM answering the items' multiple-choice requests."""
    import torch  # noqa: PLC0415  heavy, optional: only in the lm-eval child process
    torch.set_num_threads(args.threads)
    from lm_eval.api.instance import Instance  # noqa: PLC0415  optional (this bench only)
    from lm_eval.models.huggingface import HFLM  # noqa: PLC0415  likewise

    items = json.loads(Path(args.items).read_text())
    t0 = time.perf_counter()
    lm = HFLM(pretrained=str(emb.prepare()), device="cpu", dtype="float32",
              batch_size=args.lmeval_batch_size, add_bos_token=True)
    load_s = time.perf_counter() - t0
    reqs = []
    for i, it in enumerate(items):
        turns = emb.format_gemma([tuple(m) for m in it["messages"]])
        for j, letter in enumerate(it["choices"]):
            if args.lmeval_choices == "letters":
                ctx, cont = turns + emb.ANSWER_PREFIX, letter
            else:
                ctx, cont = turns + "Answer:", " " + it["shown"][j]
            reqs.append(Instance(request_type="loglikelihood", doc=it, arguments=(ctx, cont),
                                 idx=j, metadata=("fairness_bbq", i, 1)))
    t1 = time.perf_counter()
    res = lm.loglikelihood(reqs)
    answer_s = time.perf_counter() - t1
    k = len(items[0]["choices"]) if items else 3
    picks = [max(range(k), key=lambda j: res[i * k + j][0]) for i in range(len(items))]
    print(json.dumps({"load_s": load_s, "answer_s": answer_s, "items": len(items),
                      "requests": len(reqs), "threads": torch.get_num_threads(),
                      "picks": picks, "loglik": [r[0] for r in res]}))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=None,
                    help="ours (audit --batch-size; default: the audit's own default)")
    ap.add_argument("--lmeval-batch-size", type=int, default=8)
    ap.add_argument("--lmeval-choices", choices=("texts", "letters"), default="texts")
    ap.add_argument("--lmeval-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--items", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.lmeval_worker:
        return lmeval_worker(a)

    print(f"# {a.threads} threads, float32, same checkpoint; load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ours = run_audit(a.batch_size, work, limit=a.limit, threads=a.threads, echo=False)
        print("ours   " + describe(ours) + f"  [load average {os.getloadavg()[0]:.2f}]",
              flush=True)
        try:
            import lm_eval  # noqa: PLC0415  optional (this bench only): skipped without it
        except ImportError:
            print("lm-eval: skipped, not installed (pip install lm-eval==0.4.13 for this bench)")
            return 0
        items = items_from_store(ours.store)
        path = work / "items.json"
        path.write_text(json.dumps(items))
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads),
                   HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, "--lmeval-worker", "--items", str(path),
                               "--threads", str(a.threads), "--lmeval-batch-size",
                               str(a.lmeval_batch_size), "--lmeval-choices", a.lmeval_choices],
                              env=env, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            raise SystemExit(f"lm-eval worker failed (exit {proc.returncode})")
        got = json.loads(proc.stdout.strip().splitlines()[-1])
    rate = got["items"] / got["answer_s"]
    print(f"lm-eval {lm_eval.__version__} multiple_choice ({a.lmeval_choices}), batch "
          f"{a.lmeval_batch_size}: {got['items']} items ({got['requests']} loglikelihood "
          f"requests) in {got['answer_s']:.1f} s = {rate:.2f} items/s (wall {wall:.1f} s, load "
          f"{got['load_s']:.1f} s, {got['threads']} threads)  [load average "
          f"{os.getloadavg()[0]:.2f}]")
    if a.lmeval_choices == "letters":        # the same question: compare the distributions
        k = len(items[0]["choices"])
        ll = np.array(got["loglik"]).reshape(len(items), k)
        p = np.exp(ll - ll.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        mine = np.array([it["letter_probs"] for it in items])
        print(f"same question asked: max |P(letter) ours - lm-eval| = "
              f"{np.abs(p - mine).max():.2e}; same argmax in "
              f"{np.mean(p.argmax(1) == mine.argmax(1)):.0%} of items")
    print(f"ratio: ours / lm-eval = {ours.items_per_s / rate:.2f}x   "
          f"(load average now {os.getloadavg()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
