"""What the pytest plugin costs where it is not used: a pytest run of one unrelated test
in an environment with the package installed, with the plugin and with
``-p no:fairness_tests``, alternating, median of N runs each (issue 21: at most 0.25 s).

    python bench/bench_plugin_cost.py [--runs 15]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one_run(directory: Path, extra: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra,
                    "test_unrelated.py"], cwd=directory, capture_output=True, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "test_unrelated.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        with_plugin, without = [], []
        for _ in range(args.runs):          # alternating: the machine's drift cancels
            with_plugin.append(one_run(d, []))
            without.append(one_run(d, ["-p", "no:fairness_tests"]))
    a, b = statistics.median(with_plugin), statistics.median(without)
    print(f"pytest of one unrelated test, median of {args.runs} alternating runs:")
    print(f"  with the plugin      {a:.3f} s")
    print(f"  -p no:fairness_tests {b:.3f} s")
    print(f"  the plugin costs     {a - b:+.3f} s (target <= 0.25 s)")


if __name__ == "__main__":
    main()
