"""``fairness-tests card``: write, validate, re-render and diff Fairness Cards.

    fairness-tests card --run RUN_DIR [--user-yaml FILE] --out DIR
    fairness-tests card validate FILE [--complete]
    fairness-tests card render CARD.yaml --out DIR
    fairness-tests card diff BASELINE CANDIDATE [--format terminal|markdown] [--exit-code]

Exit codes: 0 success; 1 ``validate --complete`` on an incomplete card, or
``diff --exit-code`` with a regressed verdict; 2 bad input (invalid card, bad
user YAML, not a run directory: the message names the file, line or key).
"""
from __future__ import annotations

import argparse
import sys

from fairness_tests.card.diff import diff_cards, render_diff_markdown, render_diff_terminal
from fairness_tests.card.files import render_card_files, write_cards
from fairness_tests.card.schema import (
    line_index,
    load_card,
    read_yaml,
    validate_card,
    validate_file,
)
from fairness_tests.core.errors import ConfigError
from fairness_tests.run.result import RunResult


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "card", help="write, validate or diff a Fairness Card",
        description="Write the Fairness Card of a run (card.yaml, card.md, card.html), or "
                    "validate, re-render or diff cards.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n")[1])
    p.add_argument("--run", metavar="RUN_DIR", help="run directory (run.json, tables/, verdicts.csv)")
    p.add_argument("--user-yaml", metavar="FILE",
                   help="fields a run cannot know (intended use, harm model, governance, ...); "
                        "template: fairness_tests/data/card_user_example.yaml")
    p.add_argument("--out", metavar="DIR", help="output directory for card.yaml/.md/.html")
    p.add_argument("--gate", metavar="GATE", help="the upgrade gate with this run as the "
                   "candidate: gate.json or the directory `fairness-tests gate --out` wrote")
    p.set_defaults(func=_write)
    sub = p.add_subparsers(dest="card_command", metavar="{validate,render,diff}")

    v = sub.add_parser("validate", help="validate a card against the schema")
    v.add_argument("file", metavar="FILE")
    v.add_argument("--complete", action="store_true",
                   help="also fail (exit 1) when the card declares missing fields")
    v.set_defaults(func=_validate)

    r = sub.add_parser("render", help="render card.md and card.html from a card YAML")
    r.add_argument("file", metavar="CARD")
    r.add_argument("--out", dest="render_out", metavar="DIR", required=True)
    r.set_defaults(func=_render)

    d = sub.add_parser("diff", help="verdicts that changed between two cards")
    d.add_argument("baseline", metavar="BASELINE")
    d.add_argument("candidate", metavar="CANDIDATE")
    d.add_argument("--format", choices=["terminal", "markdown"], default="terminal")
    d.add_argument("--exit-code", action="store_true",
                   help="exit 1 when a verdict regressed (for CI gates)")
    d.set_defaults(func=_diff)


def _write(args) -> int:

    if not args.run or not args.out:
        raise ConfigError("usage: fairness-tests card --run RUN_DIR [--user-yaml FILE] [--gate GATE] --out DIR "
                          "(or: card validate FILE, card render CARD --out DIR, card diff A B)")
    run = RunResult.load(args.run)
    written = write_cards(run, args.out, user_yaml=args.user_yaml, gate=args.gate)
    for kind in ("yaml", "md", "html"):
        print(written.paths[kind])
    if written.report.missing:
        print(f"card is incomplete: {len(written.report.missing)} required field(s) missing "
              f"(listed under missing_fields): {', '.join(written.report.missing)}",
              file=sys.stderr)
    return 0


def _validate(args) -> int:

    report = validate_file(args.file)
    stream = sys.stdout if report.valid else sys.stderr
    print(report.summary(), file=stream)
    if not report.valid:
        return 2
    return 1 if (args.complete and report.missing) else 0


def _render(args) -> int:

    card, text = read_yaml(args.file)
    report = validate_card(card, source=args.file, lines=line_index(text))
    if not report.valid:
        first = report.errors[0]
        raise ConfigError(first.message, path=args.file, line=first.line, key=first.path)
    paths = render_card_files(card, args.render_out, kinds=("md", "html"))
    for kind in ("md", "html"):
        print(paths[kind])
    return 0


def _diff(args) -> int:

    d = diff_cards(load_card(args.baseline), load_card(args.candidate))
    if args.format == "markdown":
        sys.stdout.write(render_diff_markdown(d))
    else:
        sys.stdout.write(render_diff_terminal(d, color=sys.stdout.isatty()))
    return 1 if (args.exit_code and d.regressions) else 0
