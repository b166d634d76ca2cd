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
from pathlib import Path

from fairness_tests.cli.command import add_command
from fairness_tests.compare.models import load_entries
from fairness_tests.compare.render import write_report
from fairness_tests.compare.report import build_report
from fairness_tests.core.io import check_output, output_dir
from fairness_tests.pipeline.config_tools import CompareConfig


def register(subparsers) -> None:
    add_command(subparsers, "compare", CompareConfig, run,
                help="compare N models: tables, figures, paired comparisons, rankings",
                description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)


def run(c: CompareConfig) -> int:
    check_output(c.out)                        # before any work: a user's files stay
    names = [n.strip() for n in c.names.split(",")] if c.names is not None else None
    entries = load_entries(list(c.runs), names)
    report = build_report(entries, allow_protocol_change=c.allow_protocol_change,
                          n_boot=c.n_boot, seed=c.seed, alpha=c.alpha)
    with output_dir(c.out) as tmp:
        written = write_report(report, tmp)
    paths = {kind: Path(c.out) / p.name for kind, p in written.items()}
    for d in report.differences:
        print(f"fairness-tests compare: warning: protocol differs: {d}")
    print(f"compared {len(entries)} models: {', '.join(report.names)}")
    for kind in ("md", "html", "csv"):
        print(f"  {paths[kind]}")
    return 0
