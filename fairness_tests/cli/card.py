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
from pathlib import Path

from fairness_tests.card.diff import diff_cards, render_diff_markdown, render_diff_terminal
from fairness_tests.card.files import render_card_files, write_cards
from fairness_tests.card.schema import (
    line_index,
    load_card,
    read_yaml,
    validate_card,
    validate_file,
)
from fairness_tests.card.user_yaml import check_user_yaml
from fairness_tests.cli.command import add_command
from fairness_tests.core.errors import ConfigError
from fairness_tests.core.io import check_output, output_dir
from fairness_tests.pipeline.config_tools import (
    CardConfig,
    CardDiffConfig,
    CardRenderConfig,
    CardValidateConfig,
)
from fairness_tests.run.result import RunResult


def register(subparsers) -> None:
    p = add_command(
        subparsers, "card", CardConfig, _write, help="write, validate or diff a Fairness Card",
        description="Write the Fairness Card of a run (card.yaml, card.md, card.html), or "
                    "validate, re-render or diff cards.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n")[1])
    sub = p.add_subparsers(dest="card_command", metavar="{validate,render,diff}")
    add_command(sub, "validate", CardValidateConfig, _validate,
                help="validate a card against the schema")
    add_command(sub, "render", CardRenderConfig, _render,
                help="render card.md and card.html from a card YAML")
    add_command(sub, "diff", CardDiffConfig, _diff, help="verdicts that changed between two cards")


def _write(c: CardConfig) -> int:
    assert c.run is not None and c.out is not None   # CardConfig requires both here
    check_output(c.out)                        # before any work: a user's files stay
    check_user_yaml(c.user_yaml)
    run = RunResult.load(c.run, need_records=False)     # the card reads no per-item records
    with output_dir(c.out) as tmp:
        written = write_cards(run, tmp, user_yaml=c.user_yaml, gate=c.gate, explorer=c.explorer)
    for kind in ("yaml", "md", "html"):
        print(Path(c.out) / written.paths[kind].name)
    if written.report.missing:
        print(f"card is incomplete: {len(written.report.missing)} required field(s) missing "
              f"(listed under missing_fields): {', '.join(written.report.missing)}",
              file=sys.stderr)
    return 0


def _validate(c) -> int:
    report = validate_file(c.file)
    stream = sys.stdout if report.valid else sys.stderr
    print(report.summary(), file=stream)
    if not report.valid:
        return 2
    return 1 if (c.complete and report.missing) else 0


def _render(c) -> int:
    card, text = read_yaml(c.file)
    report = validate_card(card, source=c.file, lines=line_index(text))
    if not report.valid:
        first = report.errors[0]
        raise ConfigError(first.message, path=c.file, line=first.line, key=first.key)
    paths = render_card_files(card, c.out, kinds=("md", "html"))   # beside its card.yaml
    for kind in ("md", "html"):
        print(paths[kind])
    return 0


def _diff(c) -> int:
    d = diff_cards(load_card(c.baseline), load_card(c.candidate))
    if c.format == "markdown":
        sys.stdout.write(render_diff_markdown(d))
    else:
        sys.stdout.write(render_diff_terminal(d, color=sys.stdout.isatty()))
    return 1 if (c.exit_code and d.regressions) else 0
