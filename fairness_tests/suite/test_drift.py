"""Drift snapshots of the metric tables (human-readable files under __snapshots__/,
compared with the thresholds' per-metric drift tolerances). Update with
``pytest fairness_tests/suite/test_drift.py --snapshot-update``."""
import pytest

from fairness_tests.suite.properties import drift_tables


@pytest.mark.fairness_tables(*drift_tables())
def test_metric_table_drift(fairness_table, metric_snapshot):
    fairness_table.check()
    assert metric_snapshot == fairness_table.table
