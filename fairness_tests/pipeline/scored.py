"""The run of someone's answers: what ``bbq score`` and ``generative score`` judge
and, with ``--out``, write, in the audit's own layout (typed metadata naming
the file and its sha256, the tables of the one builder, verdicts of the one rule
engine), so the card, the gate, ``compare`` and ``pytest --fairness-run`` read it like
an audited run."""
from __future__ import annotations

from typing import Any

import pandas as pd

from fairness_tests.core.io import sha256_file
from fairness_tests.core.paths import display_path
from fairness_tests.core.version import __version__
from fairness_tests.rules.apply import apply_to_run
from fairness_tests.rules.thresholds import RuleSet, load_rules
from fairness_tests.run.metadata import RunMetadata, Source, SourceKind
from fairness_tests.run.result import RunResult


def scored_run(*, model: str | None, kind: SourceKind, file: str, command: str,
               config: dict[str, Any], rules: RuleSet | None, tables: dict[str, pd.DataFrame],
               records: dict[str, pd.DataFrame], infos: dict[str, Any]) -> RunResult:
    """Build the run and judge it by ``rules`` (None: no verdicts). ``kind``:
    ``predictions`` | ``outputs``; ``command``: the score command line that regenerates
    it; ``infos``: ``{registered key: the benchmark's info}`` (run.json's). The caller
    saves it (:meth:`RunResult.save`) when asked to."""
    run = RunResult(metadata=RunMetadata(
        model=model, backend=None, mode="scored", regen_command=command,
        source=Source(kind=kind, file=display_path(file), sha256=sha256_file(file)),
        fairness_tests_version=__version__, config=config, infos=infos),
        tables=tables, records=records)
    if rules is not None:
        apply_to_run(run, rules)
    return run


def score_rules(thresholds: str | None, model: str | None, *, judge: bool,
                out: str | None) -> RuleSet | None:
    """The rules a score command judges by: loaded (before anything is scored, so a bad
    threshold file fails first) unless ``--no-rules`` without ``--out`` (a saved run
    always carries its verdicts, for the card and the gate)."""
    return load_rules(thresholds, model=model) if (judge or out) else None
