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

A comparison that cannot be evaluated (no defined difference or test: e.g. a cell
whose items all come from one template, when templates are resampled) has no p-value
and is outside the family. In non_inferiority mode it FAILS (verdict fail, its note
"not shown to be no worse ...: not evaluable: <why>"): non-inferiority must be shown.
In harm mode it is not_evaluable and does not fail; the summary line says how many
comparisons were not evaluated and why.

Exit codes (fairness_tests/core/exits.py; the rule is GateReport.exit_code):
  0  no cell fails, and at least one comparison was evaluated
  1  a cell fails (harm: a worsening beyond its margin; non_inferiority: not shown to
     be within its margin, including a cell that cannot be evaluated), at least one
     comparison having been evaluated
  5  nothing compared: not one comparison could be evaluated, in any mode (one line on
     stderr says why, e.g. "1 cluster (question_index)"); gate.json etc. are written
  2  bad input or a refusal: a run directory missing a part (all named), the candidate
     run is the baseline run, the runs do not share the protocol (unless
     --allow-protocol-change), nothing to gate (no per-item records in common)
"""
from __future__ import annotations

import argparse
import sys

from fairness_tests.cli.command import add_command
from fairness_tests.core.exits import ExitCode
from fairness_tests.core.io import check_output, output_dir
from fairness_tests.core.registry import cluster_units
from fairness_tests.explore.write import bundle, write_explorer
from fairness_tests.pipeline.config import GateConfig
from fairness_tests.pipeline.gate import gate_runs
from fairness_tests.pipeline.gate_report import write_report
from fairness_tests.rules.thresholds import load_rules
from fairness_tests.run.result import RunResult

#: the folder of ``--out`` that holds the run explorer of the two runs
EXPLORER = "explore"


def register(subparsers) -> None:
    add_command(subparsers, "gate", GateConfig, run,
                help="gate a candidate run against a baseline run (paired, Holm, power)",
                description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)


def run(c: GateConfig) -> int:
    if c.out:
        check_output(c.out)                    # before any work: a user's files stay
    base, cand = RunResult.load(c.baseline), RunResult.load(c.candidate)
    cluster = cluster_units(c.cluster)
    rules = load_rules(c.thresholds, cand.metadata.model)
    report = gate_runs(base, cand, mode=c.mode, seed=c.seed, cluster=cluster, n_boot=c.n_boot,
                       alpha=c.alpha, rules=rules, allow_protocol_change=c.allow_protocol_change)
    if c.out and len(report.table):
        with output_dir(c.out) as tmp:
            write_report(report, tmp)
            (tmp / EXPLORER).mkdir()      # the run explorer of the two runs, this gate's table
            write_explorer(tmp / EXPLORER, bundle(
                [base, cand], [load_rules(c.thresholds, base.metadata.model), rules],
                gates=[report]))
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
    code = report.exit_code()
    if code == ExitCode.USAGE:
        print("fairness-tests gate: error: " + "; ".join(report.refusals), file=sys.stderr)
    elif code == ExitCode.NOTHING_EVALUATED:
        print(f"fairness-tests gate: {report.summary()}", file=sys.stderr)
    return code
