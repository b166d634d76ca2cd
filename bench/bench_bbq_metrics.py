"""Benchmark: every BBQ metric for 8,112 items x 20 repeats (162,240 synthetic answers).

Loads the intersectional items from ../shared/bbq (or $FAIRNESS_BBQ_DIR), draws
seeded synthetic answers (5% invalid), then times the metric computation only
(the one BBQ builder, ``bbq_tables``: first-run metrics with 2,000-resample template
bootstrap CIs and design effects, permutation tests of SF/DF, per-group table,
consistency), best of 3 runs; also with ``cluster="item"``. Prints the figures and
the load average for the README.

    python bench/bench_bbq_metrics.py
"""
from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd

from fairness_tests.benchmarks.bbq.data import bbq_dir, load_bbq
from fairness_tests.benchmarks.bbq.filter import filter_items
from fairness_tests.benchmarks.bbq.tables import bbq_tables
from fairness_tests.stats import bootstrap as stats
from fairness_tests.stats import permutation

REPEATS = 20


def synthetic_predictions(items: pd.DataFrame, repeats: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = len(items) * repeats
    answer = rng.integers(0, 3, n).astype(float)
    answer[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame({"dataset": np.repeat(items["dataset"].to_numpy(), repeats),
                         "example_id": np.repeat(items["example_id"].to_numpy(), repeats),
                         "repeat": np.tile(np.arange(repeats), len(items)),
                         "rotation": 0,
                         "answer": answer})


def main() -> None:
    t0 = time.perf_counter()
    data = load_bbq(bbq_dir())
    items = filter_items(data.items)
    t_load = time.perf_counter() - t0
    preds = synthetic_predictions(items, REPEATS)
    for cluster in ("template", "item"):
        times = []
        for _ in range(3):
            # each run draws its resamples and permutations afresh
            stats._multiplicities.cache_clear()
            stats._cluster_multiplicities.cache_clear()
            permutation._permuted.cache_clear()
            t = time.perf_counter()
            tables = bbq_tables(items, preds, cluster=cluster)
            times.append(time.perf_counter() - t)
        n_rows = sum(len(t) for t in tables.values())
        print(f"bbq metrics ({cluster} bootstrap): {len(items):,} items x {REPEATS} repeats = "
              f"{len(preds):,} answers: {min(times):.2f} s (best of 3; runs "
              f"{', '.join(f'{x:.2f}' for x in times)}), {n_rows} metric rows in "
              f"{len(tables)} tables; load + filter {t_load:.2f} s; "
              f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
