"""The model-upgrade gate inside pytest: the one gate (:func:`fairness_tests.pipeline.gate.
gate_runs`, the same function ``fairness-tests gate`` calls) per candidate, its rows as
parametrized tests (``plugin.parametrize.GateRow``) and its terminal table."""
from __future__ import annotations

from fairness_tests.pipeline.gate import gate_runs
from fairness_tests.pipeline.gate_report import GateReport

__all__ = ["gate_runs", "format_table"]


def format_table(report: GateReport, baseline: str, candidate: str) -> list[str]:
    """The terminal summary: the gate table, the family statement, what each cell can
    detect, refusals and warnings."""
    del baseline, candidate          # named in the report itself
    return [*report.to_text(), *(f"  {s}" for s in report.detectable_statements())]
