"""The exit codes of every ``fairness-tests`` command: one table, for the CLI, the docs and
the tests (pytest's own codes are pytest's: 0 passed, 1 a test failed, 4 usage error, 5
no test collected).

When several apply, the first in this order wins: usage (2), missing responses (3),
budget (4), batch pending (7), incomplete (6), a failing rule (1), nothing evaluated (5),
success (0). So a run whose requests failed says so (6) even when a rule fails on what it
got, and a rule that fails is never hidden behind "nothing else was evaluated".

``gate``: 0 no cell fails and at least one comparison was evaluated; 1 a cell fails
(harm: a worsening beyond its margin; non_inferiority: not shown to be within it,
which includes a cell that cannot be evaluated) and at least one comparison was
evaluated; 5 not one comparison could be evaluated, in any mode (its non-inferiority
cells' verdicts are "fail, not shown", but with nothing compared the code says so,
5, not 1); 2 bad input or a refusal. The rule is
``fairness_tests.pipeline.gate_report.GateReport.exit_code``.
"""
from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    #: every evaluated rule holds, and at least one rule was evaluated
    OK = 0
    #: a decision rule fails (or a declared expected failure passes); ``gate``: a cell
    #: fails, a non-inferiority cell that cannot be evaluated included
    RULE_FAILED = 1
    #: bad input or usage: one line naming the file, line, key or option (an output that
    #: is, holds or sits inside another path of the command, or cannot be written there,
    #: included: refused before any work)
    USAGE = 2
    #: replay: responses missing from the store (the message says how to record them)
    MISSING_RESPONSES = 3
    #: --max-cost reached: everything recorded is kept; the same command resumes
    BUDGET = 4
    #: no rule could be evaluated (every rule not evaluable, or a protocol produced no cell);
    #: ``gate``: not one comparison evaluated, in any mode
    NOTHING_EVALUATED = 5
    #: ``audit --batch --batch-wait none``: batch jobs submitted (or still running) at the
    #: provider, recorded in the store; nothing evaluated yet. The same command collects
    BATCH_PENDING = 7
    #: requests ended in errors: the results are incomplete; a rerun asks only those again
    INCOMPLETE = 6
    #: an unexpected fault: one line, and the traceback in a log file whose path is printed
    INTERNAL = 70
    #: interrupted (Ctrl-C / SIGINT): the store is consistent, outputs are old or new whole
    INTERRUPTED = 130


#: precedence when several codes apply (earlier wins)
PRECEDENCE = (ExitCode.USAGE, ExitCode.MISSING_RESPONSES, ExitCode.BUDGET,
              ExitCode.BATCH_PENDING, ExitCode.INCOMPLETE, ExitCode.RULE_FAILED,
              ExitCode.NOTHING_EVALUATED, ExitCode.OK)


def worst(*codes: ExitCode) -> ExitCode:
    """The code that wins among ``codes`` (:data:`PRECEDENCE`; OK when none is given)."""
    present = set(codes)
    return next((c for c in PRECEDENCE if c in present), ExitCode.OK)
