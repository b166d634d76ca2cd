"""What ``bbq score`` and ``generative score`` share: the output check before any work,
the saved run, and the verdicts judged like the audit's (the same summary, the same exit
codes; ``--no-rules``: metrics only, exit 0)."""
from __future__ import annotations

from typing import Any

from fairness_tests.core.io import check_output
from fairness_tests.pipeline.scored import score_rules
from fairness_tests.report.verdicts import verdict_counts, verdict_exit, verdict_summary
from fairness_tests.rules.thresholds import RuleSet
from fairness_tests.run.result import RunResult


def prepare(c: Any) -> RuleSet | None:
    """Before anything is scored: ``--out`` checked (a user's files are never replaced)
    and the rules loaded (a bad threshold file fails first)."""
    if c.out:
        check_output(c.out, force=c.force)
    return score_rules(c.thresholds, c.model, judge=not c.no_rules, out=c.out)


def save(run: RunResult, c: Any) -> None:
    if c.out:
        run.save(c.out, force=c.force)


def json_verdicts(run: RunResult, c: Any) -> dict | None:
    """The verdicts' counts and exit code for a JSON report (None with ``--no-rules``)."""
    if c.no_rules:
        return None
    return {"exit_code": int(verdict_exit(run.verdicts)), **verdict_counts(run.verdicts)}


def outcome(run: RunResult, c: Any, *, text: bool) -> int:
    """Print the verdict summary (``text``) and return the exit code: the verdicts'
    (:func:`~fairness_tests.report.verdicts.verdict_exit`), 0 with ``--no-rules``."""
    if c.no_rules:
        return 0
    if text:
        print()
        print(verdict_summary(run.verdicts))
    return int(verdict_exit(run.verdicts))
