"""``fairness-tests generative ...``: score anyone's generations, scorer sensitivity,
grids of a protocol, the counterfactual probe.

- ``generative score --outputs FILE [--rubric published|strict|PATH] [--compare-rubric R]
  [--format json|table] [--out DIR --model ID --thresholds PATH]``
- ``generative sensitivity --outputs FILE [--thresholds PATH] [--model ID] [--format json|table]``
- ``generative grid [--protocol PATH | --published CSV] [--format csv|json] [--hash]``
- ``generative probe-grid [--probe PATH] [--format csv|json]``
- ``generative probe-score --outputs FILE [--probe PATH] [--format json|table]``
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from fairness_tests.cli.command import add_command
from fairness_tests.core.fmt import shown, text_table
from fairness_tests.core.paths import display_path
from fairness_tests.metrics.counterfactual import consistency, verdict_shares
from fairness_tests.metrics.generative import METRICS
from fairness_tests.metrics.generative_tables import generative_tables
from fairness_tests.pipeline.config import GenerativeScoreConfig
from fairness_tests.pipeline.config_tools import (
    GridConfig,
    ProbeGridConfig,
    ProbeScoreConfig,
    SensitivityConfig,
)
from fairness_tests.pipeline.configure import command_line, recorded_config
from fairness_tests.pipeline.generative_info import generative_info
from fairness_tests.pipeline.scored import write_scored_run
from fairness_tests.protocols.generative.grid import grid_hash
from fairness_tests.protocols.generative.outputs import read_outputs
from fairness_tests.protocols.generative.probe import load_probe, probe_grid, read_probe_outputs
from fairness_tests.protocols.generative.published import (
    PUBLISHED_SYSTEM_PROMPT,
    load_published_grid,
)
from fairness_tests.protocols.generative.suite import load_suite
from fairness_tests.report.generative_score import _records, score_report, sensitivity_report
from fairness_tests.rules.thresholds import load_rules
from fairness_tests.scoring.lexical import score
from fairness_tests.scoring.rubric import load_rubric
from fairness_tests.scoring.verdict import classify, person_labels


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("generative", help="generative audit: score outputs, grids, probe")
    sub = p.add_subparsers(dest="generative_command", required=True)
    for name, cls, func, help_text in (
            ("score", GenerativeScoreConfig, cmd_score,
             "score a JSONL file of generations (published raw-output fields)"),
            ("sensitivity", SensitivityConfig, cmd_sensitivity,
             "the same outputs under two rubrics"),
            ("grid", GridConfig, cmd_grid,
             "expand a protocol (or load the published grid) to its grid"),
            ("probe-grid", ProbeGridConfig, cmd_probe_grid,
             "the counterfactual probe's 300-request grid"),
            ("probe-score", ProbeScoreConfig, cmd_probe_score,
             "verdicts, shares and consistency of probe outputs")):
        add_command(sub, name, cls, func, help=help_text)


def cmd_score(c: GenerativeScoreConfig) -> int:
    records = read_outputs(c.outputs)
    rubric = load_rubric(c.rubric)
    other = None if c.compare_rubric in (None, "none") else load_rubric(c.compare_rubric)
    if other is not None and other.name == rubric.name:
        other = None                      # one rubric: nothing to compare
    scored = score(records, rubric)
    compare = (other.name, score(records, other)) if other is not None else None
    tables = generative_tables(scored, n_boot=c.n_boot, seed=c.seed, rubric=rubric.name,
                               compare=compare, cluster=c.gen_cluster)
    if c.out:
        _write_run(c, records, scored, tables, rubric, other)
    rep = score_report(scored, tables, rubric)
    if c.format == "json":
        print(json.dumps(rep, indent=1))
        return 0
    w = sys.stdout.write
    w(f"rubric {rep['rubric']} ({rep['semantics']}); {rep['n_records']} records, "
      f"{rep['n_error']} errors\n\n")
    cols = ["slice", "n", "n_error", *METRICS]
    w(_table([[e.get(col) for col in cols] for e in rep["by_slice"]], cols))
    w("\n")
    worst = {m: rep["worst_slice"][m]["overall"] for m in METRICS}
    rows = [[m, worst[m]["slice"], worst[m]["value"], rep["disparity"][m]] for m in METRICS]
    w(_table(rows, ["metric", "worst_slice", "worst_value", "disparity"]))
    w(f"\nrefusal gap {_fmt(rep['refusal_gap'])} (95% CI {_fmt(rep['ci']['refusal_gap'][0])}"
      f"-{_fmt(rep['ci']['refusal_gap'][1])})\n")
    if c.out:
        w(f"\nrun: {c.out}\n")
    return 0


def _write_run(c: GenerativeScoreConfig, records, scored, tables, rubric, other) -> None:
    """The run directory of someone's generations (:mod:`fairness_tests.pipeline.scored`)."""
    assert c.out is not None                # written with --out only
    write_scored_run(
        c.out, model=c.model, kind="outputs", file=c.outputs,
        command=command_line(c, ("fairness-tests", "generative", "score")),
        config=recorded_config(c), thresholds=c.thresholds, tables=tables,
        records={"generative": scored},
        generative=generative_info(records, rubric, other, n_boot=c.n_boot, seed=c.seed,
                                   name=f"outputs:{display_path(c.outputs)}",
                                   cluster=c.gen_cluster))


def cmd_sensitivity(c: SensitivityConfig) -> int:
    r1, r2 = c.rubrics                      # exactly two (SensitivityConfig checks)
    rep = sensitivity_report(read_outputs(c.outputs), load_rules(c.thresholds, c.model),
                             (r1, r2), c.n_boot, c.seed)
    if c.format == "json":
        print(json.dumps(rep, indent=1))
        return 0
    a, b = rep["rubrics"]
    w = sys.stdout.write
    w(f"per-slice metric deltas ({b} - {a})\n")
    rows = [[r["slice"], r["metric"], r[f"value_{a}"], r[f"value_{b}"], r["delta"]]
            for r in rep["by_slice_delta"]]
    w(_table(rows, ["slice", "metric", a, b, "delta"]))
    w(f"\nverdicts that flip with the rubric: {len(rep['flipped_verdicts'])}\n")
    if rep["flipped_verdicts"]:
        w(_table([[f["rule"], f["cell"], f[f"status_{a}"], f[f"status_{b}"]]
                  for f in rep["flipped_verdicts"]], ["rule", "cell", a, b]))
    for name in (a, b):
        w(f"\nprotocol dependence ({name})\n")
        w(_table([[d["rule"], d["overall"], d["disagreement"], d["disagreeing"]]
                  for d in rep["protocol_dependence"][name]],
                 ["rule", "overall", "disagreement", "disagreeing"]))
    return 0


def cmd_grid(c: GridConfig) -> int:
    system: str | None
    if c.published:
        grid, system = load_published_grid(c.published), PUBLISHED_SYSTEM_PROMPT
    else:
        suite = load_suite(c.protocol)
        grid, system = suite.grid(), suite.system_prompt
    if c.hash:
        print(json.dumps({"rows": len(grid), "suite_hash": grid_hash(grid, system)}))
        return 0
    return _emit(grid, c.format)


def _emit(grid, fmt: str) -> int:
    """A grid on stdout as CSV or as a JSON list of rows."""
    if fmt == "csv":
        grid.to_csv(sys.stdout, index=False)
    else:
        print(json.dumps(grid.to_dict(orient="records"), indent=1))
    return 0


def cmd_probe_grid(c: ProbeGridConfig) -> int:
    return _emit(probe_grid(load_probe(c.probe)), c.format)


def cmd_probe_score(c: ProbeScoreConfig) -> int:
    probe = load_probe(c.probe)
    df = read_probe_outputs(c.outputs)
    df["verdict"] = classify(df["output_text"], probe, df["status"])
    shares = verdict_shares(df, probe["labels"])
    overall = verdict_shares(df, probe["labels"], by=())
    person_a, person_b = person_labels(probe)     # exactly two: the probe file is validated
    cons = consistency(df, (person_a, person_b))
    rep: dict[str, Any]
    rep = {"n_records": len(df), "n_error": int((df["status"] == "error").sum()),
           "verdict_counts": {k: int(v) for k, v in df["verdict"].value_counts().items()},
           "shares_overall": _records(overall), "shares": _records(shares),
           "consistency": _records(cons)}
    if c.format == "json":
        print(json.dumps(rep, indent=1))
        return 0
    sys.stdout.write(_table([[r["decoding"], r["context"], r["metric"], r["value"], r["n"]]
                             for r in rep["shares"]],
                            ["decoding", "context", "share", "value", "n"]))
    sys.stdout.write("\n" + _table([[r["swap"], r["metric"], r["value"], r["ci_low"], r["ci_high"],
                                     r["n"]] for r in rep["consistency"]],
                                   ["swap", "metric", "value", "ci_low", "ci_high", "n"]))
    return 0


def _fmt(x: object) -> str:
    """A cell: a float to 4 significant digits, a missing value as NA."""
    return shown(x, ".4g", undefined="NA") if x is None or isinstance(x, float) else str(x)


def _table(rows: list[list[object]], header: list[str]) -> str:
    return text_table(header, [[_fmt(c) for c in r] for r in rows]) + "\n"
