"""Compare N models: the study's tables and figures with models as rows, pairwise
comparisons paired on shared items (the gate's statistics, Holm) and rankings with
rank intervals. ``fairness-tests compare RUN_DIR... --out DIR`` and the pytest plugin
(several ``--fairness-model`` with ``--fairness-report DIR``) both call
:func:`write_compare`'s machinery: :func:`~.models.load_entries` /
:func:`~.models.entries_from_runs` -> :func:`~.report.build_report` ->
:func:`~.render.write_report`."""
from __future__ import annotations

from pathlib import Path

from fairness_tests.compare.models import entries_from_runs
from fairness_tests.compare.render import write_report
from fairness_tests.compare.report import build_report
from fairness_tests.run.result import RunResult
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT, DEFAULT_SEED


def write_compare(runs: dict[str, RunResult], out: str | Path, *,
                  allow_protocol_change: bool = False, n_boot: int = DEFAULT_N_BOOT,
                  seed: int = DEFAULT_SEED, alpha: float = 0.05,
                  cluster: dict[str, str] | None = None) -> dict[str, Path]:
    """Write ``compare.md``, ``compare.html`` and ``compare.csv`` for ``runs`` (model
    name -> its run, in report order) into ``out``; returns the paths by kind. Raises
    :class:`~fairness_tests.pipeline.gate.ProtocolChangeError` when the runs do not share
    the protocol (unless ``allow_protocol_change``)."""

    entries = entries_from_runs(runs)
    report = build_report(entries, allow_protocol_change=allow_protocol_change, n_boot=n_boot,
                          seed=seed, alpha=alpha, cluster=cluster)
    return write_report(report, out)
