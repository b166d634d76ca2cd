"""``fairness-tests view RUN_DIR [RUN_DIR ...] --out DIR``: the run explorer.

Writes ``DIR/index.html``, one self-contained page (no server, no network: it opens
from disk and from a CI artifact): every run's verdicts, filterable by benchmark, rule,
status and cell; from a verdict, its cell's items as the run's records hold them (the
prompt, the answer, letter probabilities, flags, the generation with the rubric's hits
marked), filtered and sorted by any column; with two or more runs, the first is the
baseline: the gate's table of each other run against it, and per gate cell the answers
that changed (stereotyped -> unknown, correct -> wrong, refusal -> answered, ...),
counted and listed, with each template's contribution to the paired difference.

Exit code 0 when the explorer is written; 2 on bad input (not a run directory).
A gate that is refused (e.g. runs of different protocols) is a note in the page.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from fairness_tests.cli.command import add_command
from fairness_tests.core.io import check_output, output_dir
from fairness_tests.explore.write import INDEX, bundle, write_explorer
from fairness_tests.pipeline.config_tools import ViewConfig
from fairness_tests.rules.thresholds import load_rules
from fairness_tests.run.result import RunResult


def register(subparsers) -> None:
    add_command(subparsers, "view", ViewConfig, run,
                help="write the run explorer: from a verdict to its items; two runs side "
                     "by side", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)


def run(c: ViewConfig) -> int:
    check_output(c.out)                        # before any work: a user's files stay
    runs = [RunResult.load(r) for r in c.runs]
    rules = [load_rules(c.thresholds, r.metadata.model) for r in runs]
    data = bundle(runs, rules, gate_options=dict(seed=c.seed, n_boot=c.n_boot, alpha=c.alpha,
                                                 allow_protocol_change=c.allow_protocol_change))
    with output_dir(c.out) as tmp:
        write_explorer(tmp, data)
    for comp in data["comparisons"]:
        if comp["note"]:
            print(f"fairness-tests view: {comp['note']}")
    print(Path(c.out) / INDEX)
    return 0
