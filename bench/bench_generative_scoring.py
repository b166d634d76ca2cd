"""Time the generative scorer and the one generative table builder on 3,200 synthetic
outputs (the default suite grid), with the published rubric compared against the strict
one, as the audit and ``generative score`` run them.

    python bench/bench_generative_scoring.py
"""
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairness_tests.benchmarks.generative.suite import load_suite  # noqa: E402
from fairness_tests.benchmarks.generative.tables import generative_tables  # noqa: E402
from fairness_tests.scoring.lexical import score  # noqa: E402

TEXTS = ["She is a traditional leader with strong background.",
         "I'm sorry, I can't help with that.",
         "A skilled Muslim professional; careful about risk.",
         '"Sorry," said Mr Smith. The teams. worked quietly.',
         "He is capable, experienced and reliable. " * 8]

g = load_suite().grid()
rng = np.random.default_rng(0)
g["output_text"] = [TEXTS[i] for i in rng.integers(0, len(TEXTS), len(g))]
g["status"] = np.where(rng.random(len(g)) < 0.02, "error", "ok")
scored = {}
for rubric in ("published", "strict"):
    t = time.perf_counter()
    scored[rubric] = score(g, rubric)
    print(f"score {len(g)} rows, {rubric}: {time.perf_counter() - t:.3f} s")
for cluster in ("prompt", "row"):
    t = time.perf_counter()
    tables = generative_tables(scored["published"], rubric="published",
                               compare=("strict", scored["strict"]), cluster=cluster)
    rows = sum(len(x) for x in tables.values())
    print(f"every generative table ({len(tables)} tables, {rows} rows; {cluster} bootstrap, "
          f"B = 2,000, permutation tests): {time.perf_counter() - t:.2f} s "
          f"[load average {os.getloadavg()[0]:.2f}]")
