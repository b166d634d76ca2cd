"""``fairness-tests audit``: the main job. Runs the audit (replay by default: the
committed recordings, no model call), saves the run directory, writes the Fairness
Card (YAML, Markdown, HTML) and prints the decision rules' outcomes.

Exit codes (:class:`fairness_tests.core.exits.ExitCode`): 0 when every evaluated rule
holds and at least one was evaluated (expected failures and "not evaluable" cells do
not fail the run); 1 when a rule fails or a declared expected failure passes (as
pytest's strict xfail does); 2 on bad input; 3 when replay misses responses; 4 when
--max-cost was reached (everything recorded is kept; run it again to resume); 5 when
no rule could be evaluated; 6 when requests ended in errors (a rerun asks only those);
7 when ``--batch --batch-wait none`` submitted batch jobs that are not finished (run it
again to collect).

``--dry-run`` asks nothing: per protocol and repeat mode it prints the requests,
input/output tokens and cost the run would spend, and what the store already holds.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from fairness_tests.card import write_cards
from fairness_tests.card.user_yaml import check_user_yaml
from fairness_tests.cli.command import add_command
from fairness_tests.core.exits import ExitCode, worst
from fairness_tests.core.io import check_output, output_dir
from fairness_tests.core.option_sources import cli_spelling
from fairness_tests.core.options import Layer, specs
from fairness_tests.explore.write import INDEX, bundle, write_explorer
from fairness_tests.models.batch.batch import BatchPending
from fairness_tests.pipeline.audit import run_audit
from fairness_tests.pipeline.benchmark import data_notes
from fairness_tests.pipeline.config import AuditCommand
from fairness_tests.pipeline.configure import audit_config
from fairness_tests.pipeline.dry_run import dry_run
from fairness_tests.pipeline.stages import Stages
from fairness_tests.report.verdicts import (
    asking_lines,
    incomplete,
    judge_incomplete,
    verdict_exit,
    verdict_summary,
)
from fairness_tests.rules.thresholds import load_rules

#: the folder of ``--out`` that holds the run explorer (``--explore``)
EXPLORER = "explore"


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
    check_user_yaml(command.user_yaml)        # before any work: not after the whole audit
    config = command.audit()
    if command.dry_run:
        print(dry_run(config)[1])
        return 0
    out = Path(command.out)
    if not config.shard:
        check_output(out, force=command.force)       # before anything is asked
    stages = Stages(enabled=not command.quiet)
    if command.quiet:
        config = replace(config, progress=False)
    try:
        result = run_audit(config, stages=stages)
    except BatchPending as exc:       # --batch-wait none: submitted; the same command collects
        print(f"fairness-tests: {exc}", file=sys.stderr)
        return ExitCode.BATCH_PENDING
    if config.shard:
        return _shard_summary(result, config)
    stages(f"writing the run and the card to {out}")
    with output_dir(out, force=command.force) as tmp:    # run/ and card/ swapped in together
        result.save(tmp / "run")
        link = None
        if command.explore:
            stages("writing the run explorer")
            result.source = out / "run"
            (tmp / EXPLORER).mkdir()
            write_explorer(tmp / EXPLORER, bundle([result], [load_rules(config.thresholds,
                                                                        config.model)]))
            link = f"../{EXPLORER}/{INDEX}"
        with output_dir(tmp / "card") as card_dir:
            card = write_cards(result, card_dir, user_yaml=command.user_yaml, explorer=link)
    stages("done")
    print(summary(result))
    for line in asking_lines(result.metadata):
        print(line)
    spent = usage_line(result.metadata.asking)
    if spent:
        print(spent)
    for note in result.metadata.notes:
        print(note)
    for line in data_notes(result.metadata):
        print(line)
    paths = ", ".join(str(out / "card" / p.name) for p in card.paths.values())
    print(f"\nrun: {out / 'run'}\ncard: {paths}")
    if command.explore:
        print(f"explorer: {out / EXPLORER / INDEX}")
    return exit_code(result.verdicts, result.metadata)


def exit_code(verdicts, metadata=None) -> int:
    """The run's code: INCOMPLETE when requests ended in errors (the message names how
    many and the first error), else the verdicts' (:func:`verdict_exit`)."""
    codes = [verdict_exit(verdicts)]
    failed, total, first = incomplete(metadata)
    if failed:
        print(f"fairness-tests: incomplete: {failed} of {total} requests ended in an error "
              f"after their retries (first: {first}); the results above lack them: run the "
              "same command again to ask only those", file=sys.stderr)
        codes.append(ExitCode.INCOMPLETE)
    judged = judge_incomplete(metadata)
    if judged:
        print(f"fairness-tests: {judged}", file=sys.stderr)
        codes.append(ExitCode.INCOMPLETE)
    return int(worst(*codes))


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


def usage_line(asking) -> str | None:
    """What a live API run spent, in one line: replies, HTTP attempts, tokens and the
    cost; a cost litellm has no price for is "unknown" (never $0.0000). None when the
    run recorded no usage (replay, a local model)."""
    u = asking.usage if asking is not None else None
    if u is None:
        return None
    if u.cost_usd is not None and not u.cost_unknown_calls:
        cost = f"cost {u.cost_usd:.4f} USD"
    else:
        cost = f"cost unknown ({u.cost_unknown_calls} repl(ies) without a price"
        cost += f"; {u.cost_known_usd:.4f} USD for the priced ones)" if u.cost_known_usd \
            else ")"
    return (f"spent: {u.calls} repl(ies) in {u.attempts} HTTP "
            f"attempt(s) ({u.retries} retries), {u.prompt_tokens} prompt + "
            f"{u.completion_tokens} completion tokens, {cost}")


def summary(result) -> str:
    """The verdict summary (:func:`fairness_tests.report.verdicts.verdict_summary`)."""
    return verdict_summary(result.verdicts)


if __name__ == "__main__":  # pragma: no cover
    from fairness_tests.cli.main import main
    sys.exit(main(["audit", *sys.argv[1:]]))
