"""``fairness-tests audit``: the main job. Runs the audit (replay by default: the
committed recordings, no model call), saves the run directory, writes the Fairness
Card (YAML, Markdown, HTML) and prints the decision rules' outcomes.

Exit code 0 when no rule fails (expected failures and "not evaluable" do not fail
the run), 1 when a rule fails or a declared expected failure passes (as pytest's
strict xfail does), 2 on bad input, 3 when replay misses responses, 4 when --max-cost
was reached (everything recorded is kept; run it again to resume).

``--dry-run`` asks nothing: per protocol and repeat mode it prints the requests,
input/output tokens and cost the run would spend, and what the store already holds.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fairness_tests.card import write_cards
from fairness_tests.cli.command import add_command
from fairness_tests.core.fmt import json_value
from fairness_tests.core.option_sources import cli_spelling
from fairness_tests.core.options import Layer, specs
from fairness_tests.pipeline.audit import run_audit
from fairness_tests.pipeline.config import AuditCommand
from fairness_tests.pipeline.configure import audit_config
from fairness_tests.pipeline.dry_run import dry_run
from fairness_tests.rules.evaluate import worst_cells


def register(subparsers) -> None:
    add_command(subparsers, "audit", AuditCommand, cmd_audit, build=config_from_args,
                help="run the fairness audit and write the run, the card and the report",
                description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)


def config_from_args(cls: type, args: argparse.Namespace) -> AuditCommand:
    """The parsed ``audit`` options -> the command's configuration (over the project's
    table and the model's recording settings)."""
    return audit_config(Layer({n: getattr(args, n) for n in specs(cls) if hasattr(args, n)},
                              cli_spelling(cls)), cls=cls)


def cmd_audit(command: AuditCommand) -> int:
    config = command.audit()
    if command.dry_run:
        print(dry_run(config)[1])
        return 0
    result = run_audit(config)
    if config.shard:
        return _shard_summary(result, config)
    out = Path(command.out)
    result.save(out / "run")
    card = write_cards(result, out / "card", user_yaml=command.user_yaml)
    print(summary(result))
    for note in result.metadata.notes:
        print(note)
    print(f"\nrun: {out / 'run'}\ncard: {', '.join(str(p) for p in card.paths.values())}")
    return exit_code(result.verdicts)


def exit_code(verdicts) -> int:
    """1 when a rule fails or a declared expected failure passes (strict), else 0."""
    if verdicts is None or not len(verdicts):
        return 0
    failed = (verdicts["status"] == "fail").any()
    return 1 if failed or len(unexpected_passes(verdicts)) else 0


def unexpected_passes(verdicts):
    """Verdict rows that pass although the rule declares an expected failure for them."""
    declared = verdicts["why"].astype(str).str.contains("declared expected_fail", regex=False)
    return verdicts[(verdicts["status"] == "pass") & declared]


def _shard_summary(result, config) -> int:
    """A sharded run records; its tables (of one shard) are not a result."""
    req = result.metadata.requests
    parts = [f"{k}: {req[k + '_shard']} of {req[k]} requests ({req[k + '_new']} new)"
             for k in req if f"{k}_shard" in req]
    print(f"recorded shard {config.shard} into {config.store or 'the default store'}: "
          + "; ".join(parts))
    print("no tables or card from one shard: merge the shard stores with `fairness-tests "
          "store merge S1 S2 ... --into S`, then `fairness-tests audit --store S`")
    return 0


def summary(result) -> str:
    """One line per rule: how many cells pass / fail / expected_fail / not evaluable,
    and the worst failing cell (furthest on the wrong side of the bound, in the rule's
    own direction); then every declared expected failure that passed."""

    v = result.verdicts
    if v is None or not len(v):
        return "no decision rule was evaluated"
    lines = [f"{'rule':38} {'pass':>5} {'fail':>5} {'xfail':>5} {'n/e':>5}  worst failing cell"]
    for rule, g in v.groupby("rule", sort=False):
        counts = g["status"].value_counts()
        bad = worst_cells(g[g["status"].isin(["fail", "expected_fail"])], rule, k=1)
        worst = ""
        if len(bad):
            r = bad.iloc[0]
            val = json_value(r[r["compared"]])
            worst = f"{r['cell']}: {r['compared']} {val:.3g}" if isinstance(val, float) \
                else f"{r['cell']}"
            worst += f" ({r['op']} {r['bound']})"
        lines.append(f"{rule:38} {counts.get('pass', 0):>5} {counts.get('fail', 0):>5} "
                     f"{counts.get('expected_fail', 0):>5} {counts.get('not_evaluable', 0):>5}  "
                     f"{worst}")
    for _, r in unexpected_passes(v).iterrows():
        lines.append(f"error: {r['rule']} {r['cell']} is declared an expected failure but "
                     "passed: remove the declaration (or the model regressed back)")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    from fairness_tests.cli.main import main
    sys.exit(main(["audit", *sys.argv[1:]]))
