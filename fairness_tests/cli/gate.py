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

from fairness_tests.core.errors import ConfigError
from fairness_tests.pipeline.gate import CLUSTER_CHOICES, gate_runs, write_report
from fairness_tests.rules.thresholds import load_rules
from fairness_tests.run.result import RunResult
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT
from fairness_tests.stats.significance import ALPHA


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "gate", help="gate a candidate run against a baseline run (paired, Holm, power)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("baseline", metavar="BASELINE_RUN", help="run directory of the baseline")
    p.add_argument("candidate", metavar="CANDIDATE_RUN", help="run directory of the candidate")
    p.add_argument("--format", default="table", choices=["table", "md", "json"])
    p.add_argument("--out", default=None, help="write gate.csv, gate.json and gate.md here")
    p.add_argument("--mode", default=None, choices=["harm", "non_inferiority"],
                   help="every cell in this mode (default: each rule's gate.mode, else harm)")
    p.add_argument("--allow-protocol-change", action="store_true",
                   help="compare runs made under different protocols (differences are "
                        "listed as warnings; the common items are compared)")
    choices = sorted({c for v in CLUSTER_CHOICES.values() for c in v})
    p.add_argument("--cluster", action="append", default=None, choices=choices,
                   help="resampling unit: template|item (BBQ, default template), "
                        "prompt|row (generative, default prompt); repeat for both")
    p.add_argument("--thresholds", default=None,
                   help="thresholds dir or file whose gate settings apply (default: ours)")
    p.add_argument("--alpha", type=float, default=None,
                   help="family-wise error rate of the gate (default 0.05)")
    p.add_argument("--n-boot", type=int, default=None, help="paired resamples (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    base, cand = RunResult.load(args.baseline), RunResult.load(args.candidate)
    cluster = {}
    for c in args.cluster or ():
        proto = next(k for k, v in CLUSTER_CHOICES.items() if c in v)
        if proto in cluster and cluster[proto] != c:
            raise ConfigError(f"--cluster given twice for {proto}: {cluster[proto]} and {c}")
        cluster[proto] = c
    alpha = ALPHA if args.alpha is None else args.alpha
    if not 0 < alpha < 1:
        raise ConfigError(f"--alpha must be between 0 and 1, got {alpha}")
    report = gate_runs(base, cand, mode=args.mode, seed=args.seed, cluster=cluster,
                       n_boot=args.n_boot or DEFAULT_N_BOOT, alpha=alpha,
                       rules=load_rules(args.thresholds, cand.metadata.model),
                       allow_protocol_change=args.allow_protocol_change)
    if args.out:
        write_report(report, args.out)
    if args.format == "json":
        sys.stdout.write(report.to_json())
    elif args.format == "md":
        sys.stdout.write(report.to_markdown())
    else:
        print("\n".join(report.to_text()))
        for s in report.detectable_statements():
            print(f"  {s}")
    for w in report.warnings:
        print(f"fairness-tests gate: warning: protocol differs: {w}", file=sys.stderr)
    if not len(report.table):
        print("fairness-tests gate: error: " + "; ".join(report.refusals), file=sys.stderr)
        return 2
    return 1 if report.failed else 0
