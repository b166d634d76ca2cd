"""Multiple-choice questions per second for the embedded model (Gemma 3 270M).

Compares, on real BBQ prompts (Race_x_SES, the protocol's own prompt builder):

  A. distribution: ONE forward pass per question (batched, left padding,
     logits_to_keep=1) + R repeats drawn from the letter distribution
     (what the transformers backend does for kind="choice");
  B. sampled letter: R separate one-token generations per question after the same
     answer prefix (same distribution, R times the model work);
  C. free generation: R sampled generations per question WITHOUT the answer prefix
     (max_new_tokens tokens, parsed with the BBQ answer parser), i.e. what a
     chat endpoint does; the share of parseable answers is printed too.

Usage: python bench/bench_embedded_mc.py [--n 32] [--n-slow 8] [--repeats 20]
       [--batch-size 8] [--max-new-tokens 8] [--threads N]
Prints figures; nothing is timed in tests. Model load time (GGUF vs cached copy)
is printed first.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=32, help="questions for method A")
    ap.add_argument("--n-slow", type=int, default=8, help="questions for methods B and C")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=8)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--skip", default="", help="comma list of methods to skip (A,B,C)")
    args = ap.parse_args()

    import torch
    if args.threads:
        torch.set_num_threads(args.threads)

    from fairness_tests.models.backends import embedded as emb
    from fairness_tests.models.backends import transformers_backend as tb
    from fairness_tests.models.request import Decoding
    from fairness_tests.paths import bbq_dir
    from fairness_tests.protocols.bbq.data import read_items
    from fairness_tests.protocols.bbq.prompt import build_requests, parse_answer

    skip = {s.strip().upper() for s in args.skip.split(",") if s.strip()}
    path = emb.prepare()
    info = emb.conversion_info(path)
    t0 = time.perf_counter()
    backend = tb.TransformersBackend("embedded", batch_size=args.batch_size, device=args.device)
    loaded = backend.loaded()
    print(f"# embedded model: {path}")
    print(f"load from cached safetensors: {loaded.load_s:.1f} s "
          f"(GGUF load during the one-off conversion: {info.get('gguf_load_s')} s)")
    print(f"device={loaded.device} dtype={loaded.dtype} torch threads={torch.get_num_threads()} "
          f"batch={args.batch_size} repeats={args.repeats}")
    del t0

    items = read_items(bbq_dir() / "Race_x_SES.jsonl", "Race_x_SES")
    # a mix of contexts and lengths: evenly spaced items
    items = items.iloc[:: max(1, len(items) // max(args.n, 1))].head(args.n)
    dec = Decoding(temperature=1.0, top_p=1.0, max_tokens=args.max_new_tokens)
    reqs = build_requests(items, repeats=args.repeats, decoding=dec, backend="transformers",
                          model=emb.EMBEDDED_MODEL_ID)
    # warm-up (first call pays one-off costs)
    backend.answer(reqs[: args.repeats])

    results = {}
    if "A" not in skip:
        t = time.perf_counter()
        res = backend.answer(reqs)
        dt = time.perf_counter() - t
        n_q = len(items)
        first = np.array([r.answer for r in res[:: args.repeats]])
        mass = np.mean([r.letter_mass for r in res[:: args.repeats]])
        probs = np.mean([r.letter_probs for r in res[:: args.repeats]], axis=0)
        results["A"] = n_q / dt
        print(f"A distribution: {n_q} questions x {args.repeats} repeats in {dt:.2f} s = "
              f"{n_q / dt:.2f} questions/s ({n_q * args.repeats / dt:.0f} answers/s); "
              f"mean P(a,b,c)={np.round(probs, 3).tolist()}, mean letter mass={mass:.3f}, "
              f"answer counts (repeat 0) {np.bincount(first, minlength=3).tolist()}")

    n_slow = min(args.n_slow, len(items))
    slow = reqs[: n_slow * args.repeats]
    if "B" not in skip:
        texts = [backend.prompt_text(r) for r in slow]
        ids = backend.letter_ids(("a", "b", "c"))
        t = time.perf_counter()
        got = []
        for s in range(0, len(slow), args.batch_size):
            got += backend._generate_batch(slow[s:s + args.batch_size],
                                           texts[s:s + args.batch_size], 1.0, 1.0, 1)
        dt = time.perf_counter() - t
        tok = backend.loaded().tokenizer
        letters = [tok.decode([i]) for i in ids]
        valid = np.mean([g[0] in letters for g in got])
        results["B"] = n_slow / dt
        print(f"B sampled letter: {n_slow} questions x {args.repeats} one-token generations in "
              f"{dt:.2f} s = {n_slow / dt:.2f} questions/s; a letter in {valid:.0%} of samples")

    if "C" not in skip:
        free = [r.with_(kind="generate") for r in slow]
        t = time.perf_counter()
        res = backend.answer(free)
        dt = time.perf_counter() - t
        parsed = [parse_answer(r.text, list(q.meta["options"]), q.meta["rotation"])
                  for q, r in zip(slow, res)]
        ok = np.mean([p is not None for p in parsed])
        results["C"] = n_slow / dt
        print(f"C free generation: {n_slow} questions x {args.repeats} generations of <= "
              f"{args.max_new_tokens} tokens in {dt:.2f} s = {n_slow / dt:.2f} questions/s; "
              f"parseable answers {ok:.0%}; e.g. {json.dumps(res[0].text)[:80]}")

    if "A" in results:
        for k in ("B", "C"):
            if k in results:
                print(f"speed-up A/{k}: {results['A'] / results[k]:.1f}x")


if __name__ == "__main__":
    main()
