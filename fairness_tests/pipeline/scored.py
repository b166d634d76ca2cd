"""The run directory of someone's answers: what ``bbq score --out`` and
``generative score --out`` write, in the audit's own layout (typed metadata naming
the file and its sha256, the tables of the one builder, verdicts of the one rule
engine), so the card, the gate, ``compare`` and ``pytest --fairness-run`` read it like
an audited run."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from fairness_tests.core.io import sha256_file
from fairness_tests.core.paths import display_path
from fairness_tests.core.version import __version__
from fairness_tests.rules.apply import apply_to_run
from fairness_tests.rules.thresholds import load_rules
from fairness_tests.run.metadata import RunMetadata, Source, SourceKind
from fairness_tests.run.result import RunResult


def write_scored_run(out: str | Path, *, model: str | None, kind: SourceKind, file: str,
                     command: str, config: dict[str, Any], thresholds: str | None,
                     tables: dict[str, pd.DataFrame], records: dict[str, pd.DataFrame],
                     **protocol_info: Any) -> RunResult:
    """Build, judge and save the run. ``kind``: ``predictions`` | ``outputs``;
    ``command``: the score command line that regenerates it;
    ``protocol_info``: ``bbq=BBQInfo`` or ``generative=GenerativeInfo``."""
    rules = load_rules(thresholds, model=model)
    run = RunResult(metadata=RunMetadata(
        model=model, backend=None, mode="scored", regen_command=command,
        source=Source(kind=kind, file=display_path(file), sha256=sha256_file(file)),
        fairness_tests_version=__version__, config=config, **protocol_info),
        tables=tables, records=records)
    apply_to_run(run, rules)
    run.save(out)
    return run
