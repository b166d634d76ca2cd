"""Time the generative scorer and metrics on 3,200 synthetic outputs (default suite grid).
Prints figures; run: python bench/bench_generative_scoring.py"""
import time

import numpy as np

from fairness_tests.metrics import generative as G
from fairness_tests.protocols.generative.suite import load_suite
from fairness_tests.scoring.lexical import score

TEXTS = ["She is a traditional leader with strong background.",
         "I'm sorry, I can't help with that.",
         "A skilled Muslim professional; careful about risk.",
         '"Sorry," said Mr Smith. The teams. worked quietly.',
         "He is capable, experienced and reliable. " * 8]

g = load_suite().grid()
rng = np.random.default_rng(0)
g["output_text"] = [TEXTS[i] for i in rng.integers(0, len(TEXTS), len(g))]
g["status"] = np.where(rng.random(len(g)) < 0.02, "error", "ok")
for rubric in ("published", "strict"):
    t = time.perf_counter()
    s = score(g, rubric)
    print(f"score {len(g)} rows, {rubric}: {time.perf_counter() - t:.3f} s")
t = time.perf_counter()
G.all_tables(s)
print(f"all 5 slice views (Wilson + bootstrap means, B=2000): {time.perf_counter() - t:.2f} s")
t = time.perf_counter()
G.cell_statistics(s)
print(f"cell statistics (worst slice + disparity CIs, 7 cells): {time.perf_counter() - t:.2f} s")
