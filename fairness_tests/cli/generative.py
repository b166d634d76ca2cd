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

from fairness_tests.core.paths import display_path
from fairness_tests.metrics.counterfactual import consistency, verdict_shares
from fairness_tests.metrics.generative import METRICS
from fairness_tests.metrics.generative_tables import generative_tables
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
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT, DEFAULT_SEED


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("generative", help="generative audit: score outputs, grids, probe")
    sub = p.add_subparsers(dest="generative_command", required=True)

    s = sub.add_parser("score", help="score a JSONL file of generations (published raw-output fields)")
    s.add_argument("--outputs", required=True, help="JSONL, one generation per line")
    s.add_argument("--rubric", default="published", help="published | strict | PATH to a rubric file")
    s.add_argument("--compare-rubric", default="strict",
                   help="second rubric for scorer sensitivity ('none' to skip; default strict)")
    s.add_argument("--format", choices=("json", "table"), default="json")
    s.add_argument("--out", default=None, metavar="DIR",
                   help="also write a run directory (tables, verdicts, records, metadata) "
                        "that the card, the gate, compare and pytest --fairness-run read")
    s.add_argument("--model", default=None,
                   help="model id the generations are of (run metadata; threshold overrides)")
    s.add_argument("--thresholds", default=None, help="thresholds dir or file for --out")
    _boot_args(s)
    s.add_argument("--cluster", default="prompt", choices=("prompt", "row"),
                   help="bootstrap unit: whole prompts (family x paraphrase x occupation x "
                        "slice, asked over decodings and seeds; default) or single generations")
    s.set_defaults(func=cmd_score)

    v = sub.add_parser("sensitivity", help="same outputs under the published and strict rubrics")
    v.add_argument("--outputs", required=True)
    v.add_argument("--thresholds", default=None,
                   help="thresholds dir or file (default: the project's thresholds/, else the packaged one)")
    v.add_argument("--model", default=None, help="apply this model's threshold overrides")
    v.add_argument("--rubrics", nargs=2, default=("published", "strict"), metavar=("A", "B"))
    v.add_argument("--format", choices=("json", "table"), default="json")
    _boot_args(v)
    v.set_defaults(func=cmd_sensitivity)

    g = sub.add_parser("grid", help="expand a protocol (or load the published grid) to its grid")
    src = g.add_mutually_exclusive_group()
    src.add_argument("--protocol", default=None, help="protocol YAML (default: packaged default suite)")
    src.add_argument("--published", default=None, metavar="CSV", help="a published-format grid CSV")
    g.add_argument("--format", choices=("csv", "json"), default="csv")
    g.add_argument("--hash", action="store_true", help="print only the suite hash and row count")
    g.set_defaults(func=cmd_grid)

    pg = sub.add_parser("probe-grid", help="the counterfactual probe's 300-request grid")
    pg.add_argument("--probe", default=None, help="probe JSON (default: shared fairness_cards copy)")
    pg.add_argument("--format", choices=("csv", "json"), default="csv")
    pg.set_defaults(func=cmd_probe_grid)

    ps = sub.add_parser("probe-score", help="verdicts, shares and consistency of probe outputs")
    ps.add_argument("--outputs", required=True, help="JSONL with name_order, paraphrase_id, "
                    "context, decoding, seed, output_text, status")
    ps.add_argument("--probe", default=None)
    ps.add_argument("--format", choices=("json", "table"), default="json")
    ps.set_defaults(func=cmd_probe_score)


def _boot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n-boot", type=int, default=DEFAULT_N_BOOT, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="bootstrap seed")


def cmd_score(args: argparse.Namespace) -> int:

    records = read_outputs(args.outputs)
    rubric = load_rubric(args.rubric)
    other = None if args.compare_rubric in (None, "none") else load_rubric(args.compare_rubric)
    if other is not None and other.name == rubric.name:
        other = None                      # one rubric: nothing to compare
    scored = score(records, rubric)
    compare = (other.name, score(records, other)) if other is not None else None
    tables = generative_tables(scored, n_boot=args.n_boot, seed=args.seed, rubric=rubric.name,
                               compare=compare, cluster=args.cluster)
    if args.out:
        _write_run(args, records, scored, tables, rubric, other)
    rep = score_report(scored, tables, rubric)
    if args.format == "json":
        print(json.dumps(rep, indent=1))
        return 0
    w = sys.stdout.write
    w(f"rubric {rep['rubric']} ({rep['semantics']}); {rep['n_records']} records, "
      f"{rep['n_error']} errors\n\n")
    cols = ["slice", "n", "n_error", *METRICS]
    w(_table([[e.get(c) for c in cols] for e in rep["by_slice"]], cols))
    w("\n")
    rows = [[m, rep["worst_slice"][m]["overall"]["slice"], rep["worst_slice"][m]["overall"]["value"],
             rep["disparity"][m]] for m in METRICS]
    w(_table(rows, ["metric", "worst_slice", "worst_value", "disparity"]))
    w(f"\nrefusal gap {_fmt(rep['refusal_gap'])} (95% CI {_fmt(rep['ci']['refusal_gap'][0])}"
      f"-{_fmt(rep['ci']['refusal_gap'][1])})\n")
    if args.out:
        w(f"\nrun: {args.out}\n")
    return 0


def _write_run(args, records, scored, tables, rubric, other) -> None:
    """The run directory of someone's generations (:mod:`fairness_tests.pipeline.scored`)."""

    write_scored_run(
        args.out, model=args.model, kind="outputs", file=args.outputs,
        command=["generative", "score", "--outputs", display_path(args.outputs),
                 "--rubric", args.rubric, "--compare-rubric", str(args.compare_rubric),
                 "--seed", str(args.seed), "--n-boot", str(args.n_boot),
                 "--cluster", args.cluster],
        config={"rubric": args.rubric, "compare_rubric": args.compare_rubric,
                "n_boot": args.n_boot, "seed": args.seed, "cluster": args.cluster},
        thresholds=args.thresholds, tables=tables, records={"generative": scored},
        generative=generative_info(records, rubric, other, n_boot=args.n_boot, seed=args.seed,
                                   name=f"outputs:{display_path(args.outputs)}",
                                   cluster=args.cluster))


def cmd_sensitivity(args: argparse.Namespace) -> int:

    rep = sensitivity_report(read_outputs(args.outputs), load_rules(args.thresholds, args.model),
                             tuple(args.rubrics), args.n_boot, args.seed)
    if args.format == "json":
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


def cmd_grid(args: argparse.Namespace) -> int:

    if args.published:
        grid, system = load_published_grid(args.published), PUBLISHED_SYSTEM_PROMPT
    else:
        suite = load_suite(args.protocol)
        grid, system = suite.grid(), suite.system_prompt
    if args.hash:
        print(json.dumps({"rows": len(grid), "suite_hash": grid_hash(grid, system)}))
        return 0
    return _emit(grid, args.format)


def _emit(grid, fmt: str) -> int:
    """A grid on stdout as CSV or as a JSON list of rows."""
    if fmt == "csv":
        grid.to_csv(sys.stdout, index=False)
    else:
        print(json.dumps(grid.to_dict(orient="records"), indent=1))
    return 0


def cmd_probe_grid(args: argparse.Namespace) -> int:

    return _emit(probe_grid(load_probe(args.probe)), args.format)


def cmd_probe_score(args: argparse.Namespace) -> int:

    probe = load_probe(args.probe)
    df = read_probe_outputs(args.outputs)
    df["verdict"] = classify(df["output_text"], probe, df["status"])
    shares = verdict_shares(df, probe["labels"])
    overall = verdict_shares(df, probe["labels"], by=())
    cons = consistency(df, tuple(person_labels(probe)))
    rep = {"n_records": len(df), "n_error": int((df["status"] == "error").sum()),
           "verdict_counts": {k: int(v) for k, v in df["verdict"].value_counts().items()},
           "shares_overall": _records(overall), "shares": _records(shares),
           "consistency": _records(cons)}
    if args.format == "json":
        print(json.dumps(rep, indent=1))
        return 0
    sys.stdout.write(_table([[r["decoding"], r["context"], r["metric"], r["value"], r["n"]]
                             for r in rep["shares"]], ["decoding", "context", "share", "value", "n"]))
    sys.stdout.write("\n" + _table([[r["swap"], r["metric"], r["value"], r["ci_low"], r["ci_high"],
                                     r["n"]] for r in rep["consistency"]],
                                   ["swap", "metric", "value", "ci_low", "ci_high", "n"]))
    return 0


def _fmt(x: object) -> str:
    if x is None:
        return "NA"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _table(rows: list[list[object]], header: list[str]) -> str:
    cells = [header] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"
