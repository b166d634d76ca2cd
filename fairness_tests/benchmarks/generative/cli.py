"""``fairness-tests generative ...``: score anyone's generations, scorer sensitivity,
grids of a protocol, the counterfactual probe.

- ``generative score --outputs FILE [--rubric published|strict|PATH] [--compare-rubric R]
  [--format json|table] [--out DIR --model ID --thresholds PATH]
  [--scorer(s) published,strict,judge,classifier --judge-model M --judge-api-base URL
  --judge-rubric FILE --judge-repeats K --store S --classifier DIR --classifier-labels MAP]``
- ``generative sensitivity --outputs FILE [--thresholds PATH] [--model ID] [--format json|table]``
- ``generative grid [--protocol PATH | --published CSV] [--format csv|json] [--hash]``
- ``generative probe-grid [--probe PATH] [--format csv|json]``
- ``generative probe-score --outputs FILE [--probe PATH] [--format json|table]``
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from fairness_tests.benchmarks.generative.config import (
    GenerativeScoreConfig,
    GridConfig,
    ProbeGridConfig,
    ProbeScoreConfig,
    SensitivityConfig,
)
from fairness_tests.benchmarks.generative.describe import generative_info
from fairness_tests.benchmarks.generative.grid import grid_hash
from fairness_tests.benchmarks.generative.metrics import METRICS
from fairness_tests.benchmarks.generative.outputs import read_outputs
from fairness_tests.benchmarks.generative.published import (
    PUBLISHED_SYSTEM_PROMPT,
    load_published_grid,
)
from fairness_tests.benchmarks.generative.report import _records, score_report, sensitivity_report
from fairness_tests.benchmarks.generative.scorer_report import label_rates, scorers_report
from fairness_tests.benchmarks.generative.scorers import ScoredGenerations, score_generations
from fairness_tests.benchmarks.generative.suite import load_suite
from fairness_tests.benchmarks.probe.grid import load_probe, probe_grid, read_probe_outputs
from fairness_tests.benchmarks.probe.metrics import consistency, verdict_shares
from fairness_tests.cli import scored
from fairness_tests.cli.command import add_command
from fairness_tests.core.exits import ExitCode, worst
from fairness_tests.core.fmt import shown, text_table
from fairness_tests.core.paths import default_store_path, display_path
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.pipeline.configure import command_line, recorded_config
from fairness_tests.pipeline.scored import scored_run
from fairness_tests.rules.thresholds import load_rules
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
    rules = scored.prepare(c)
    records = read_outputs(c.outputs, c.suite)
    store = _judge_store(c) if "judge" in c.scorer_list(c.rubric, c.compare_rubric) else None
    try:
        sg = score_generations(records, c, store)
    finally:
        if store is not None:
            store.close()
    scored_records, tables, rubric = sg.primary.scored, sg.tables, sg.rubric
    run = _run(c, records, scored_records, tables, rubric, sg, rules)
    scored.save(run, c)
    rep = score_report(scored_records, tables, rubric)
    if c.scorers:
        _add_scorers(rep, sg, records, c)
    if c.format == "json":
        verdicts = scored.json_verdicts(run, c)
        if verdicts is not None:
            rep["verdicts"] = verdicts
        print(json.dumps(rep, indent=1))
        return _judged(sg, scored.outcome(run, c, text=False))
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
    if rep.get("agreement"):
        w("\nagreement (all slices)\n")
        w(_table([[a["scorer_a"], a["scorer_b"], a["label"], a["n"], a["raw_agreement"],
                   a["kappa"]] for a in rep["agreement"] if a["slice"] == "all"],
                 ["scorer_a", "scorer_b", "label", "n", "raw_agreement", "kappa"]))
    if c.out:
        w(f"\nrun: {c.out}\n")
    sys.stdout.flush()
    return _judged(sg, scored.outcome(run, c, text=True))


def _judged(sg: ScoredGenerations, code: int) -> int:
    """``code``, or INCOMPLETE (said on stderr) when judge requests ended in errors."""
    note = sg.incomplete()
    if note is None:
        return code
    print(f"fairness-tests: {note}", file=sys.stderr)
    return int(worst(ExitCode(code), ExitCode.INCOMPLETE))


def _judge_store(c: GenerativeScoreConfig) -> ResponseStore:
    """The store the judge's answers go through (created when new)."""
    path = Path(c.store) if c.store else default_store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return ResponseStore(path)


def _add_scorers(rep: dict, sg: ScoredGenerations, records, c: GenerativeScoreConfig) -> None:
    """The scorers and their agreement; a judge rubric's own labels in the by_slice rows."""
    rep.update(scorers_report(sg.by, records, n_boot=c.n_boot, seed=c.seed,
                              cluster=c.gen_cluster))
    primary = sg.primary
    extra = tuple(x for x in primary.labels if x not in METRICS)
    if extra and "generative_scorers" in sg.tables:
        rates = label_rates(sg.tables["generative_scorers"], primary.name, extra)
        for row in rep["by_slice"]:
            row.update(rates.get(row["slice"], {}))
    if primary.info.get("kind") == "judge":
        rep["unjudged_rate"] = primary.info.get("unjudged_rate")


def _run(c: GenerativeScoreConfig, records, scored_records, tables, rubric,
         sg: ScoredGenerations, rules):
    """The run of someone's generations, judged (:mod:`fairness_tests.pipeline.scored`)."""
    info = generative_info(records, rubric, sg.other, n_boot=c.n_boot, seed=c.seed,
                           name=f"outputs:{display_path(c.outputs)}", cluster=c.gen_cluster)
    if c.scorers:
        info.scorers = sg.scorer_infos()
    return scored_run(
        model=c.model, kind="outputs", file=c.outputs,
        command=command_line(c, ("fairness-tests", "generative", "score")),
        config=recorded_config(c), rules=rules, tables=tables,
        records={"generative": scored_records},
        infos={"generative": info})


def cmd_sensitivity(c: SensitivityConfig) -> int:
    r1, r2 = c.rubrics                      # exactly two (SensitivityConfig checks)
    rep = sensitivity_report(read_outputs(c.outputs, c.suite), load_rules(c.thresholds, c.model),
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
    df = read_probe_outputs(c.outputs, probe)
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
