"""``fairness-tests compare RUN_DIR... --out DIR``: N models side by side.

Run directories come from ``fairness-tests audit --out`` (``R/run``), ``bbq score
--out`` or ``generative score --out``; directories given the same name (``--names``,
else the run's model id) are one model when they hold different protocols (its BBQ
predictions and its generations scored apart). Writes ``compare.md``, a
self-contained ``compare.html`` and ``compare.csv`` (every number of the report, one
row each). The runs must share the protocol (item set, data, suite hash, decoding,
repeats, rubric); with ``--allow-protocol-change`` they are compared on their common
items and the differences head the report.

Exit code 0 when the report is written, 2 on bad input (not a run directory, names
that do not match, runs of different protocols without --allow-protocol-change).
"""
from __future__ import annotations

import argparse

from fairness_tests.compare.models import load_entries
from fairness_tests.compare.render import write_report
from fairness_tests.compare.report import build_report
from fairness_tests.core.errors import ConfigError
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compare", help="compare N models: tables, figures, paired comparisons, rankings",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (two or more)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="where compare.md, compare.html and compare.csv are written")
    p.add_argument("--names", default=None, metavar="a,b,c",
                   help="one model name per run directory, in order (default: each run's "
                        "model id); the same name twice = one model's runs of two protocols")
    p.add_argument("--allow-protocol-change", action="store_true",
                   help="compare runs made under different protocols on their common items "
                        "(the differences are listed at the top of the report)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise error rate of the pairwise comparisons (default 0.05)")
    p.add_argument("--n-boot", type=int, default=None, help="paired resamples (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    names = None
    if args.names is not None:
        names = [n.strip() for n in args.names.split(",")]
    if not 0 < args.alpha < 1:
        raise ConfigError(f"--alpha must be between 0 and 1, got {args.alpha}", key="--alpha")
    if args.n_boot is not None and args.n_boot < 100:
        raise ConfigError(f"--n-boot must be at least 100, got {args.n_boot}", key="--n-boot")
    entries = load_entries(args.runs, names)
    report = build_report(entries, allow_protocol_change=args.allow_protocol_change,
                          n_boot=args.n_boot or DEFAULT_N_BOOT, seed=args.seed,
                          alpha=args.alpha)
    paths = write_report(report, args.out)
    for d in report.differences:
        print(f"fairness-tests compare: warning: protocol differs: {d}")
    print(f"compared {len(entries)} models: {', '.join(report.names)}")
    for kind in ("md", "html", "csv"):
        print(f"  {paths[kind]}")
    return 0
