"""``fairness-tests gate BASELINE_RUN CANDIDATE_RUN``: the model-upgrade gate on two run
directories (written by ``audit``, ``bbq score`` or ``generative score`` with ``--out``).

Every metric a default rule bounds is compared item by item (paired bootstrap over the
clusters both runs share), each cell tested one-sidedly against its rule's margin in
its mode (``harm``: fail only on a regression beyond the margin with statistical
support; ``non_inferiority``: fail unless shown to be no worse than the margin), with
Holm's procedure over the whole family. The table shows raw and adjusted p-values and
the smallest worsening each cell detects with 80% power: what this gate cannot see.

Which mode: ``harm`` for a release that should be blocked only by evidence of harm
(with few items it passes by design: nothing can be proven); ``non_inferiority`` for
a release that must show it is no worse (with few items it fails by design).

Exit code 0 when no cell fails, 1 when a cell fails, 2 on bad input or a refusal (the
candidate run is the baseline run; the runs do not share the protocol, unless
``--allow-protocol-change``; nothing to gate).
"""
from __future__ import annotations

import argparse
import sys

from fairness_tests.cli.command import add_command
from fairness_tests.core.exits import ExitCode
from fairness_tests.core.io import check_output, output_dir
from fairness_tests.pipeline.config import GateConfig
from fairness_tests.pipeline.gate import gate_runs, write_report
from fairness_tests.rules.thresholds import load_rules
from fairness_tests.run.result import RunResult


def register(subparsers) -> None:
    add_command(subparsers, "gate", GateConfig, run,
                help="gate a candidate run against a baseline run (paired, Holm, power)",
                description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)


def run(c: GateConfig) -> int:
    if c.out:
        check_output(c.out)                    # before any work: a user's files stay
    base, cand = RunResult.load(c.baseline), RunResult.load(c.candidate)
    cluster = {("bbq" if u in ("template", "item") else "generative"): u
               for u in c.cluster or ()}
    report = gate_runs(base, cand, mode=c.mode, seed=c.seed, cluster=cluster, n_boot=c.n_boot,
                       alpha=c.alpha, rules=load_rules(c.thresholds, cand.metadata.model),
                       allow_protocol_change=c.allow_protocol_change)
    if c.out and len(report.table):
        with output_dir(c.out) as tmp:
            write_report(report, tmp)
    if c.format == "json":
        sys.stdout.write(report.to_json())
    elif c.format == "md":
        sys.stdout.write(report.to_markdown())
    else:
        print("\n".join(report.to_text()))
        for s in report.detectable_statements():
            print(f"  {s}")
    for w in report.warnings:
        print(f"fairness-tests gate: warning: protocol differs: {w}", file=sys.stderr)
    if not len(report.table):
        print("fairness-tests gate: error: " + "; ".join(report.refusals), file=sys.stderr)
        return ExitCode.USAGE
    return ExitCode.RULE_FAILED if report.failed else ExitCode.OK
